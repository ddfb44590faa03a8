"""kg_common (the probe contract) and kg_helper (the resident helper's JSON-line protocol), run for real."""
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PY_DIR = os.path.join(HERE, "..", "..", "python")

LOADER = (
    "import sys,json,types\n"
    "d=json.loads(sys.stdin.readline())\n"
    "for n,s in d['modules']:\n"
    " m=types.ModuleType(n);m.__file__=n+'.py';sys.modules[n]=m;exec(compile(s,n+'.py','exec'),m.__dict__)\n"
    "sys.modules['kg_helper'].serve(d['nonce'])\n"
)


def src(name):
    with open(os.path.join(PY_DIR, name + ".py"), encoding="utf-8") as f:
        return f.read()


class ProbeByHand(unittest.TestCase):
    def test_host_info_prints_one_json_document(self):
        out = subprocess.run([sys.executable, os.path.join(PY_DIR, "host_info.py")], stdout=subprocess.PIPE, check=True)
        doc = json.loads(out.stdout.decode())
        self.assertEqual(doc["python"]["executable"], sys.executable)
        self.assertIn("hostname", doc)

    def test_probe_error_is_one_line_and_exit_2(self):
        r = subprocess.run(
            [sys.executable, os.path.join(PY_DIR, "read_file.py"), "/definitely/not/here"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stdout, b"")
        self.assertEqual(r.stderr.decode().strip(), "error: /definitely/not/here does not exist")


class ResidentHelper(unittest.TestCase):
    def setUp(self):
        self.p = subprocess.Popen(
            [sys.executable, "-u", "-c", LOADER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            universal_newlines=True,
        )
        first = {"modules": [["kg_common", src("kg_common")], ["kg_helper", src("kg_helper")]], "nonce": "n0nce"}
        self.p.stdin.write(json.dumps(first) + "\n")
        self.p.stdin.flush()
        ready = json.loads(self.p.stdout.readline())
        self.assertEqual(ready["ready"], "n0nce")

    def tearDown(self):
        self.p.stdin.close()
        self.p.wait(10)
        self.p.stdout.close()
        self.p.stderr.close()

    def ask(self, req):
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def test_source_once_then_hash_only(self):
        s = src("read_file")
        r1 = self.ask({"id": 1, "op": "probe", "name": "read_file", "hash": "h1", "src": s, "args": [__file__, "--max-bytes", "10", "--from-start"]})
        self.assertTrue(r1["ok"], r1)
        self.assertEqual(r1["id"], 1)
        self.assertEqual(r1["result"]["end"], 10)
        r2 = self.ask({"id": 2, "op": "probe", "name": "read_file", "hash": "h1", "args": [__file__, "--max-bytes", "5", "--from-start"]})
        self.assertEqual(r2["result"]["end"], 5)
        r3 = self.ask({"id": 3, "op": "probe", "name": "other", "hash": "unknown", "args": []})
        self.assertEqual(r3["error"]["code"], "need-source")

    def test_probe_errors_come_back_as_documents_and_the_helper_lives_on(self):
        s = src("read_file")
        r = self.ask({"id": 7, "op": "probe", "name": "read_file", "hash": "h", "src": s, "args": ["/nope"]})
        self.assertFalse(r["ok"])
        self.assertEqual(r["error"]["code"], "not-found")
        bad = self.ask({"id": 8, "op": "probe", "name": "boom", "hash": "b", "src": "def main(argv):\n    raise ValueError('x')\n", "args": []})
        self.assertEqual(bad["error"]["code"], "internal")
        self.assertIn("ValueError: x", bad["error"]["message"])
        printer = self.ask(
            {"id": 9, "op": "probe", "name": "printer", "hash": "p", "src": "def main(argv):\n    print('noise')\n    return {'ok': 1}\n", "args": []}
        )
        self.assertEqual(printer["result"], {"ok": 1}, "a probe's print() must not corrupt the channel")

    def test_a_slow_request_does_not_hold_up_a_quick_one(self):
        slow = "import time\ndef main(argv):\n    time.sleep(float(argv[0]))\n    return {'slept': argv[0]}\n"
        self.p.stdin.write(json.dumps({"id": 1, "op": "probe", "name": "slow", "hash": "s", "src": slow, "args": ["2"]}) + "\n")
        self.p.stdin.write(json.dumps({"id": 2, "op": "probe", "name": "slow", "hash": "s", "src": slow, "args": ["0"]}) + "\n")
        self.p.stdin.flush()
        first = json.loads(self.p.stdout.readline())
        second = json.loads(self.p.stdout.readline())
        self.assertEqual([first["id"], second["id"]], [2, 1])


if __name__ == "__main__":
    unittest.main()
