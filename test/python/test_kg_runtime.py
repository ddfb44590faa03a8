"""kg_common (the probe contract) and kg_helper (the resident helper's JSON-line protocol), run for real."""
import errno
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
# kg_pool.SPARES_DEFAULT: the most children a helper started without --spares keeps forked ahead of need, idle.
SPARES = 4
PY_DIR = os.path.join(HERE, "..", "..", "python")
# src/core/probes/sources.ts HELPER_MODULES: the order the loader executes them in.
HELPER_MODULES = ("kg_modules", "kg_common", "kg_frame", "kg_spare", "kg_zygote", "kg_pool", "kg_helper")

LOADER = (
    "import os,sys,json,types\n"
    "b=b''\n"
    "while b'\\n' not in b:\n"
    " c=os.read(0,1<<20)\n"
    " if not c:raise SystemExit(1)\n"
    " b+=c\n"
    "l,_,r=b.partition(b'\\n')\n"
    "d=json.loads(l)\n"
    "for n,s in d['modules']:\n"
    " m=types.ModuleType(n);m.__file__=n+'.py';sys.modules[n]=m;exec(compile(s,n+'.py','exec'),m.__dict__)\n"
    "sys.modules['kg_helper'].serve(d['nonce'],r)\n"
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


class HelperCase(unittest.TestCase):
    # The client's words after the loader (kg_pool.pool_options): none, the helper's defaults.
    ARGS = ()  # type: tuple

    def setUp(self):
        self.p = subprocess.Popen(
            [sys.executable, "-u", "-c", LOADER] + list(self.ARGS),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            universal_newlines=True,
        )
        first = {"modules": [[n, src(n)] for n in HELPER_MODULES], "nonce": "n0nce"}
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

    def write(self, req):
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()

    def read(self):
        return json.loads(self.p.stdout.readline())


class FirstRequestsWithTheModules(unittest.TestCase):
    def test_requests_written_behind_the_modules_line_are_answered_after_the_ready_line(self):
        # The client writes its first requests in the same write as the modules, not waiting for the ready line (one
        # round trip less on first contact): the loader must not swallow them into a buffer of its own.
        p = subprocess.Popen([sys.executable, "-u", "-c", LOADER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        try:
            first = {"modules": [[n, src(n)] for n in HELPER_MODULES], "nonce": "n0nce"}
            reqs = [{"id": i, "op": "probe", "name": "read_file", "hash": "h1", "src": src("read_file"),
                     "args": [__file__, "--max-bytes", str(i), "--from-start"]} for i in (1, 2)]
            p.stdin.write(("\n".join(json.dumps(d) for d in [first] + reqs) + "\n").encode())
            p.stdin.flush()
            lines = []
            while len(lines) < 3:
                # a bound against a hang (the old loader kept the requests in sys.stdin's buffer), not a speed check
                if not select.select([p.stdout], [], [], 120)[0]:
                    self.fail("no answer to the requests sent with the modules: %r" % (lines,))
                lines.append(json.loads(p.stdout.readline()))
            self.assertEqual(lines[0]["ready"], "n0nce")
            self.assertEqual(sorted((d["id"], d["result"]["end"]) for d in lines[1:]), [(1, 1), (2, 2)])
        finally:
            p.stdin.close()
            p.wait(30)
            p.stdout.close()
            p.stderr.close()


class ResidentHelper(HelperCase):
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

    def test_a_small_answer_goes_from_its_child_to_the_channel_and_never_into_a_long_line(self):
        # A small answer of a stateless probe is written on the channel by its child (no hop through the helper);
        # a line the helper writes in pieces holds the channel: small answers made while it is part-way out (held
        # until the test has read its first 64 kB) must land between whole lines, each line one JSON document.
        small = ("import os, time\ndef main(argv):\n    end = time.monotonic() + 60\n"
                 "    while len(argv) > 1 and not os.path.exists(argv[1]) and time.monotonic() < end:\n"
                 "        time.sleep(0.001)\n"
                 "    return {'n': int(argv[0])}\n")
        big = "def main(argv):\n    return {'big': 'x' * (20 << 20)}\n"
        r = self.ask({"id": 1, "op": "probe", "name": "small", "hash": "s1", "src": small, "args": ["1"], "timing": True})
        self.assertEqual(r["result"], {"n": 1})
        self.assertIs(r["timing"]["direct"], True, r["timing"])
        tmp = tempfile.mkdtemp(prefix="kg-release-")
        release = os.path.join(tmp, "release")
        try:
            self.write({"id": 2, "op": "probe", "name": "big", "hash": "b1", "src": big, "args": [], "timing": True})
            head = self.p.stdout.read(65536)
            for i in range(3, 9):
                self.write({"id": i, "op": "probe", "name": "small", "hash": "s1", "args": [str(i), release]})
            open(release, "w").close()
            got = {}
            first = json.loads(head + self.p.stdout.readline())
            got[first["id"]] = first
            for _ in range(6):
                doc = self.read()
                got[doc["id"]] = doc
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self.assertEqual(sorted(got), list(range(2, 9)))
        self.assertEqual(len(got[2]["result"]["big"]), 20 << 20)
        self.assertIs(got[2]["timing"]["direct"], False)
        for i in range(3, 9):
            self.assertEqual(got[i]["result"], {"n": i})

    def test_modules_travel_by_hash_and_import_each_other_in_any_order(self):
        # The probe imports kg_t_a, which imports kg_t_b, which imports kg_t_a back (a cycle, as plain imports allow).
        a = "import kg_t_b\nWHO = 'a1'\ndef both():\n    return WHO + '+' + kg_t_b.WHO\n"
        b = "import kg_t_a\nWHO = 'b1'\n"
        probe = "import kg_t_a\ndef main(argv):\n    return {'got': kg_t_a.both(), 'file': kg_t_a.__file__}\n"
        req = {"op": "probe", "name": "p", "hash": "p1", "src": probe, "args": []}
        r1 = self.ask(dict(req, id=1, modules=[["kg_t_a", "a1", a], ["kg_t_b", "b1", b]]))
        self.assertEqual(r1["result"], {"got": "a1+b1", "file": "kg_t_a.py"}, r1)
        # Known by hash: the sources stay home.
        r2 = self.ask({"id": 2, "op": "probe", "name": "p", "hash": "p1", "args": [], "modules": [["kg_t_a", "a1"], ["kg_t_b", "b1"]]})
        self.assertEqual(r2["result"]["got"], "a1+b1", r2)
        # A module the helper has not seen (changed on the client: a new hash) is asked for...
        r3 = self.ask({"id": 3, "op": "probe", "name": "p", "hash": "p1", "args": [], "modules": [["kg_t_a", "a1"], ["kg_t_b", "b2"]]})
        self.assertEqual(r3["error"]["code"], "need-source")
        # ...and once sent, the new one is what the probe imports.
        r4 = self.ask(dict(req, id=4, modules=[["kg_t_a", "a1"], ["kg_t_b", "b2", b.replace("b1", "b2")]]))
        self.assertEqual(r4["result"]["got"], "a1+b2", r4)
        bad = self.ask(dict(req, id=5, modules=[["kg_t_c", "c1", "def ("]]))
        self.assertEqual(bad["error"]["code"], "bad-request")
        self.assertIn("kg_t_c.py does not compile", bad["error"]["message"])

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
        # The slow one is held until a file exists, which the test makes only once the quick one has answered: no
        # race with how long forking and compiling take here. Held up behind it, the quick one would answer only
        # after the slow one gives up waiting (60 s), second.
        slow = ("import os, time\ndef main(argv):\n    end = time.monotonic() + 60\n"
                "    while argv and not os.path.exists(argv[0]) and time.monotonic() < end:\n        time.sleep(0.01)\n"
                "    return {'held': bool(argv)}\n")
        tmp = tempfile.mkdtemp(prefix="kg-release-")
        release = os.path.join(tmp, "release")
        try:
            self.write({"id": 1, "op": "probe", "name": "slow", "hash": "s", "src": slow, "args": [release]})
            self.write({"id": 2, "op": "probe", "name": "slow", "hash": "s", "src": slow, "args": []})
            first = self.read()
            open(release, "w").close()
            second = self.read()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self.assertEqual([first["id"], second["id"]], [2, 1])

    def test_two_slow_requests_run_at_once(self):
        # Each says when it slept (CLOCK_MONOTONIC is one clock for every process): the two sleeps overlap. A wall
        # clock bound on the pair would fail on a loaded machine for the wrong reason.
        slow = ("import time\ndef main(argv):\n    t0 = time.monotonic()\n    time.sleep(1.0)\n"
                "    return {'from': t0, 'to': time.monotonic()}\n")
        for rid in (1, 2):
            self.write({"id": rid, "op": "probe", "name": "slow", "hash": "s1", "src": slow, "args": []})
        answers = sorted((self.read() for _ in range(2)), key=lambda r: r["id"])
        self.assertEqual([r["id"] for r in answers], [1, 2])
        a, b = (r["result"] for r in answers)
        self.assertLess(max(a["from"], b["from"]), min(a["to"], b["to"]), "the second waited for the first: %r" % answers)


# A probe that says where it runs (its pid, and a tool it started) and then never ends.
SPIN = """import os, subprocess, sys
def main(argv):
    tool = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(argv[0], "w") as f:
        f.write("%d %d" % (os.getpid(), tool.pid))
    while True:
        pass
"""


def wait_status(case, done, guard_s=60):
    """The helper's "status" answer (its pool of spares) once ``done`` says so: asked again until then. The guard
    only ends a helper that never gets there."""
    end = time.monotonic() + guard_s
    rid = 10 ** 6
    while True:
        rid += 1
        r = case.ask({"id": rid, "op": "status"})
        case.assertTrue(r.get("ok"), r)
        if done(r["result"]):
            return r["result"]
        if time.monotonic() >= end:
            case.fail("the helper's pool never got there: %s" % (r["result"],))
        time.sleep(0.02)


def alive(pid):
    """Running (a zombie is not): what ps would show burning CPU."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Isolation(HelperCase):
    """Each request runs in its own child process: killed at its deadline or on cancel, nothing of it kept."""

    def setUp(self):
        HelperCase.setUp(self)
        self.dir = tempfile.mkdtemp(prefix="kg-helper-")

    def tearDown(self):
        HelperCase.tearDown(self)
        shutil.rmtree(self.dir, ignore_errors=True)

    def helper_children(self):
        """(pid, state) of each of the helper's children, or its zygote's (kg_helper.py: the process that forks
        them on Linux), the zygote itself left out."""
        procs = {}
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    with open("/proc/%s/stat" % pid) as f:
                        comm, rest = f.read().split(" (", 1)[1].rsplit(")", 1)
                    fields = rest.split()
                    procs[int(pid)] = (int(fields[1]), fields[0], comm)
                except (OSError, IndexError, ValueError):
                    pass
        zygotes = [pid for pid, (ppid, _, comm) in procs.items() if ppid == self.p.pid and comm == "kg-zygote"]
        return [(pid, st) for pid, (ppid, st, _) in procs.items()
                if (ppid == self.p.pid or ppid in zygotes) and pid not in zygotes]

    def children(self):
        """The processes of the helper's requests but those forked ahead, idle (sleeping): zombies count too."""
        out = self.helper_children()
        idle = [c for c in out if c[1] == "S"]
        return [c for c in out if c[1] != "S"] + idle[SPARES:]

    def lingering_children(self):
        """Children still there once things settle: the helper's spare, forked after a request ends, runs ('R')
        for a moment while it sets itself up, and a killed child can show 'S' before it is reaped, so one sample
        proves nothing; a leaked child stays in every sample for 5 s."""
        end = time.monotonic() + 5
        calm = 0
        while True:
            left = self.children()
            calm = calm + 1 if not left else 0
            if calm >= 3 or time.monotonic() >= end:
                return left
            time.sleep(0.1)

    def threads(self):
        return len(os.listdir("/proc/%d/task" % self.p.pid))

    def wait_gone(self, pids):
        end = time.monotonic() + 30  # fails only if they never go
        while time.monotonic() < end and any(alive(p) for p in pids):
            time.sleep(0.05)
        return [p for p in pids if alive(p)]

    def pids_in(self, path):
        end = time.monotonic() + 30  # fails only if the probe never says
        while time.monotonic() < end:
            try:
                with open(path) as f:
                    text = f.read().split()
                if len(text) == 2:
                    return [int(x) for x in text]
            except OSError:
                pass
            time.sleep(0.02)
        self.fail("the probe never started")

    def test_a_request_past_its_deadline_is_killed_with_the_tools_it_started(self):
        where = os.path.join(self.dir, "pids")
        # The probe never ends by itself: its deadline's own answer (0.7 s named) is the proof it was kept.
        r = self.ask({"id": 1, "op": "probe", "name": "spin", "hash": "spin", "src": SPIN, "args": [where], "timeoutMs": 700})
        self.assertEqual((r["id"], r["ok"], r["error"]["code"]), (1, False, "timeout"), r)
        self.assertIn("timed out after 0.7 s", r["error"]["message"])
        pids = self.pids_in(where)
        self.assertEqual(self.wait_gone(pids), [], "the spinning probe and its tool still run")
        self.assertEqual(self.lingering_children(), [], "a child left unreaped")
        self.assertEqual(self.threads(), 1)
        # The helper lives on.
        self.assertEqual(self.ask({"id": 2, "op": "ping"})["result"], "pong")

    def test_cancel_kills_the_request(self):
        where = os.path.join(self.dir, "pids")
        self.write({"id": 5, "op": "probe", "name": "spin", "hash": "spin", "src": SPIN, "args": [where]})
        pids = self.pids_in(where)
        self.write({"op": "cancel", "id": 5})
        r = self.read()
        self.assertEqual((r["id"], r["error"]["code"]), (5, "cancelled"), r)
        self.assertEqual(self.wait_gone(pids), [])

    def test_a_fifo_read_that_blocks_leaks_nothing(self):
        fifo = os.path.join(self.dir, "train_log.jsonl")
        os.mkfifo(fifo)
        src = "def main(argv):\n    with open(argv[0], 'rb') as f:\n        return {'n': len(f.read())}\n"
        for rid in range(1, 4):
            r = self.ask({"id": rid, "op": "probe", "name": "cat", "hash": "cat", "src": src, "args": [fifo], "timeoutMs": 300})
            self.assertEqual(r["error"]["code"], "timeout", r)
        self.assertEqual(self.lingering_children(), [])
        self.assertEqual(self.threads(), 1)
        # Nothing has the FIFO open to read (the old helper left a thread blocked in open() per attempt).
        with self.assertRaises(OSError) as caught:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        self.assertEqual(caught.exception.errno, errno.ENXIO)

    def test_no_state_survives_from_one_request_to_the_next(self):
        # A module global, a class of the standard library changed by one request: the next sees neither.
        src = (
            "import json\n"
            "SEEN = []\n"
            "def main(argv):\n"
            "    SEEN.append(argv[0])\n"
            "    before = getattr(json.JSONDecoder, 'kg_mutated', None)\n"
            "    json.JSONDecoder.kg_mutated = argv[0]\n"
            "    return {'seen': SEEN, 'mutated': before}\n"
        )
        r1 = self.ask({"id": 1, "op": "probe", "name": "st", "hash": "st", "src": src, "args": ["a"]})
        r2 = self.ask({"id": 2, "op": "probe", "name": "st", "hash": "st", "args": ["b"]})
        self.assertEqual(r1["result"], {"seen": ["a"], "mutated": None})
        self.assertEqual(r2["result"], {"seen": ["b"], "mutated": None})

    def test_a_requests_child_is_never_reused_even_when_prepared_ahead(self):
        # The same probe again and again: each later request is served by a spare that executed the probe's module
        # (and its module kg_t_m) before the request came. Each still runs in a process of its own, and nothing the
        # previous request set (a global of the probe, of its module, of kg_common) is there.
        mod = "import kg_common\nMARK = []\n"
        src = (
            "import os, kg_common, kg_t_m\n"
            "SEEN = []\n"
            "def main(argv):\n"
            "    before = (list(SEEN), list(kg_t_m.MARK), getattr(kg_common, 'kg_t_mark', None))\n"
            "    SEEN.append(argv[0]); kg_t_m.MARK.append(argv[0]); kg_common.kg_t_mark = argv[0]\n"
            "    return {'pid': os.getpid(), 'before': before}\n"
        )
        req = {"op": "probe", "name": "reuse", "hash": "reuse1", "src": src, "timing": True,
               "modules": [["kg_t_m", "m1", mod]]}
        answers = [self.ask(dict(req, id=i, args=[str(i)])) for i in range(1, 6)]
        for r in answers:
            self.assertTrue(r["ok"], r)
            self.assertEqual(r["result"]["before"], [[], [], None], r)
        pids = [r["result"]["pid"] for r in answers]
        self.assertEqual(len(set(pids)), len(pids), pids)
        self.assertNotIn(self.p.pid, pids)
        # What the answers say of where their time went; the later ones found the module executed already.
        for r in answers:
            self.assertIn(r["timing"]["how"], ("prepared", "spare", "fork"))
            for phase in ("handoff", "exec", "run", "frame", "pipe", "total"):
                self.assertGreaterEqual(r["timing"][phase], 0.0)
        self.assertIn("prepared", [r["timing"]["how"] for r in answers[1:]])

    def test_once_idle_the_helper_makes_its_pool_and_a_burst_is_served_from_it(self):
        # On Linux (a zygote). The pool is made once the helper has been idle: waited for by asking the helper until
        # it says its pool is at rest (the wait is a guard: it only ends a helper that never makes its pool), then
        # the first requests of a burst are each served by one of those spares; the rest by spares forked meanwhile,
        # a process each.
        if not sys.platform.startswith("linux"):
            self.skipTest("the zygote and its pool are Linux's")
        req = {"op": "probe", "name": "host_info", "hash": "hi", "src": src("host_info"), "args": [], "timing": True}
        self.assertTrue(self.ask(dict(req, id=1))["ok"])
        pool = wait_status(self, lambda st: st["atRest"])
        self.assertEqual(len(pool["spares"]), SPARES, pool)
        req.pop("src")
        answers = [self.ask(dict(req, id=i)) for i in range(2, 22)]
        # The spares made once the first request had come prepared its probe, and are taken first (one made at
        # start, before any request, had no probe to prepare: it waits for a request no prepared spare is left for).
        self.assertIn(answers[0]["result"]["pid"], pool["spares"])
        self.assertEqual(answers[0]["timing"]["how"], "prepared", answers[0])
        for r in answers:
            self.assertIn(r["timing"]["how"], ("prepared", "spare", "fork"))
        pids = set(r["result"]["pid"] for r in answers)
        self.assertEqual(len(pids), 20, "a spare served two requests")

    def idle_children(self):
        """How many of the helper's (or its zygote's) children wait, sleeping: its spares."""
        return len([c for c in self.helper_children() if c[1] == "S"])

    def test_more_probes_than_the_zygote_keeps_are_each_answered_by_their_own_code(self):
        # The zygote keeps the code of the last 16 probes its spares prepared; going back to an older one after more
        # than that must still run that probe's code (never a spare with none, never another probe's).
        def probe(i):
            return {"op": "probe", "name": "p%d" % i, "hash": "ph%d" % i, "args": [],
                    "src": "def main(argv):\n    return %d\n" % i}
        order = list(range(20)) + [0, 0, 19, 3]
        for rid, i in enumerate(order, 1):
            r = self.ask(dict(probe(i), id=rid))
            self.assertEqual(r.get("result"), i, r)

    def test_state_is_carried_only_as_plain_data(self):
        src = (
            "COUNT = {}\n"
            "def KG_STATE_EXPORT(full=False):\n"
            "    return {'version': 1, 'full': False, 'put': [(('n', 1), [COUNT['n'], b'xxx'])], 'drop': [('gone', 2)]}\n"
            "def KG_STATE_IMPORT(doc):\n"
            "    assert doc['full'] and doc['drop'] == [], doc\n"
            "    for key, entry in doc['put']:\n"
            "        assert key == ('n', 1) and entry[1] == b'xxx', doc\n"
            "        COUNT['n'] = entry[0]\n"
            "def main(argv):\n"
            "    COUNT['n'] = COUNT.get('n', 0) + 1\n"
            "    return {'count': COUNT['n']}\n"
        )
        counts = [self.ask({"id": i, "op": "probe", "name": "counter", "hash": "c", "src": src, "args": []})["result"]["count"]
                  for i in range(1, 4)]
        self.assertEqual(counts, [1, 2, 3])
        # Objects are not plain data: never kept (so never handed to the next request).
        objects = (
            "class Thing(object):\n    pass\n"
            "GOT = []\n"
            "def KG_STATE_EXPORT(full=False):\n    return {'version': 1, 'full': True, 'put': [('k', Thing())], 'drop': []}\n"
            "def KG_STATE_IMPORT(data):\n    GOT.append(repr(data))\n"
            "def main(argv):\n    return {'got': GOT}\n"
        )
        for i in (10, 11):
            r = self.ask({"id": i, "op": "probe", "name": "objects", "hash": "o", "src": objects, "args": []})
            self.assertEqual(r["result"], {"got": []})

    def test_big_integers_are_answered(self):
        digits = "9" * 5000
        line = '{"id": 3, "op": "probe", "name": "x", "hash": "x", "src": "def main(a):\\n    return {}\\n", "args": [%s]}' % digits
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        r = self.read()
        self.assertEqual(r["id"], 3)
        if sys.version_info >= (3, 11):
            self.assertEqual(r["error"]["code"], "bad-request")
        big = "def main(argv):\n    return {'n': 10 ** 5000, 'k': int(argv[0]) if len(argv[0]) < 4000 else len(argv[0])}\n"
        r = self.ask({"id": 4, "op": "probe", "name": "big", "hash": "big", "src": big, "args": ["7" * 5000]})
        self.assertTrue(r["ok"], r)
        self.assertEqual(r["result"]["n"], {"$bigint": {"bits": 16610, "digits": 5001, "negative": False}})
        self.assertEqual(r["result"]["k"], 5000)

    def test_a_child_that_dies_is_answered_with_what_killed_it(self):
        killed = "import os, signal\ndef main(argv):\n    os.kill(os.getpid(), signal.SIGKILL)\n"
        r = self.ask({"id": 1, "op": "probe", "name": "oom", "hash": "k", "src": killed, "args": []})
        self.assertEqual(r["error"]["code"], "killed", r)
        self.assertIn("SIGKILL", r["error"]["message"])
        cpu = "KG_LIMITS = {'cpu': 1}\ndef main(argv):\n    while True:\n        pass\n"
        r = self.ask({"id": 2, "op": "probe", "name": "burn", "hash": "burn", "src": cpu, "args": [], "timeoutMs": 20000})
        self.assertEqual(r["error"]["code"], "limit-cpu", r)
        self.assertIn("CPU-time limit", r["error"]["message"])
        exits = "import os\ndef main(argv):\n    os._exit(9)\n"
        r = self.ask({"id": 3, "op": "probe", "name": "ex", "hash": "ex", "src": exits, "args": []})
        self.assertEqual(r["error"]["code"], "crashed", r)
        self.assertIn("exit status 9", r["error"]["message"])

    def zygote(self):
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    with open("/proc/%s/stat" % pid) as f:
                        comm, rest = f.read().split(" (", 1)[1].rsplit(")", 1)
                    if comm == "kg-zygote" and int(rest.split()[1]) == self.p.pid:
                        return int(pid)
                except (OSError, IndexError, ValueError):
                    pass
        return None

    @unittest.skipUnless(sys.platform.startswith("linux"), "the zygote is Linux only")
    def test_a_zygote_that_dies_takes_its_requests_with_it_and_the_helper_serves_on(self):
        zygote = self.zygote()
        self.assertIsNotNone(zygote, "no kg-zygote below the helper")
        where = os.path.join(self.dir, "pids")
        self.write({"id": 1, "op": "probe", "name": "spin", "hash": "spin", "src": SPIN, "args": [where]})
        pid, tool = self.pids_in(where)  # running: its pid is written
        os.kill(zygote, signal.SIGKILL)
        r = self.read()
        self.assertEqual((r["id"], r["error"]["code"]), (1, "killed"), r)
        self.assertEqual(self.wait_gone([pid, tool]), [], "the request outlived its zygote")
        # Forked by the helper itself from now on.
        ok = self.ask({"id": 2, "op": "probe", "name": "hi", "hash": "hi", "src": "def main(argv):\n    return 1\n",
                       "args": [], "timing": True})
        self.assertEqual(ok["result"], 1, ok)
        self.assertEqual(self.lingering_children(), [])

    def test_answers_carry_the_footprint(self):
        r = self.ask({"id": 1, "op": "probe", "name": "read_file", "hash": "rf", "src": src("read_file"), "args": [__file__]})
        self.assertTrue(r["ok"], r)
        self.assertGreater(r["footprint"]["maxRssKb"], 1000)
        self.assertGreaterEqual(r["footprint"]["cpuS"], 0)

    def test_the_state_of_metrics_reduce_is_kept_between_requests(self):
        path = os.path.join(self.dir, "run.jsonl")
        with open(path, "w") as f:
            for i in range(20000):
                f.write('{"step": %d, "loss": %f}\n' % (i, 1.0 / (i + 1)))
        # Its modules travel beside it, as the extension sends them (defineProbe's modules).
        mods = [[n, n, src(n)] for n in ("metrics_cache", "metrics_lines", "metrics_pass", "metrics_scan", "metrics_tb")]
        req = {"op": "probe", "name": "metrics_reduce", "hash": "mr", "src": src("metrics_reduce"), "args": [path],
               "modules": mods}
        first = self.ask(dict(req, id=1))
        second = self.ask(dict(req, id=2))
        self.assertEqual((first["result"]["source"], second["result"]["source"]), ("read", "cache"))
        self.assertEqual(second["result"]["bytesRead"], 0)


if __name__ == "__main__":
    unittest.main()
