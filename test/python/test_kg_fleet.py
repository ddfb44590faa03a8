"""python/kg_fleet.py as srun runs it on a node: the program on stdin, tagged compressed lines on stdout."""
import base64
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
PY_DIR = os.path.join(HERE, "..", "..", "python")
LINE = re.compile(r"^@@KG-FLEET(-END|-BEAT)? (\S+) (\S+) (\d+)(?: (.*))?$")


def run(program, timeout_s=30, beat_s=5, node="n7"):
    with open(os.path.join(PY_DIR, "kg_fleet.py")) as f:
        src = f.read()
    src += "\nfleet_main(%s, 'NONCE', %r, %r)\n" % (json.dumps(program), timeout_s, beat_s)
    env = dict(os.environ, SLURMD_NODENAME=node)
    # timeout=60 is a guard only (a hang fails the test); what the program says proves how it ended, never how long
    # it took.
    return subprocess.run([sys.executable, "-", "a1", "a2"], input=src.encode(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=env, timeout=60)


def decode(stdout):
    chunks, end, beats = {}, None, 0
    for line in stdout.decode().splitlines():
        m = LINE.match(line)
        assert m, "untagged line: %r" % line
        if m.group(1) == "-BEAT":
            beats += 1
        elif m.group(1) == "-END":
            end = (m.group(3), int(m.group(4)), m.group(5))
        else:
            assert len(line) < 1000, "a line srun could split: %d bytes" % len(line)
            chunks[int(m.group(4))] = m.group(5)
    payload = "".join(chunks[i] for i in range(len(chunks)))
    return json.loads(zlib.decompress(base64.b64decode(payload))), end, beats


class Fleet(unittest.TestCase):
    def test_output_and_argv_come_back_whole_in_short_tagged_lines(self):
        r = run("import sys, random\nprint(sys.argv[1:])\nprint(''.join(random.choice('ab') for _ in range(200000)))")
        doc, end, beats = decode(r.stdout)
        self.assertEqual(end[0], "n7")
        self.assertEqual(end[2], "exit=0")
        self.assertGreaterEqual(beats, 1)
        self.assertTrue(doc["out"].startswith("['a1', 'a2']\n"))
        self.assertEqual(len(doc["out"]), len("['a1', 'a2']\n") + 200001)

    def test_exit_status_and_stderr_tail_are_reported(self):
        r = run("import sys\nsys.stderr.write('x' * 50000 + 'the end\\n')\nsys.exit(3)")
        doc, end, _ = decode(r.stdout)
        self.assertEqual(end[2], "exit=3")
        self.assertTrue(doc["err"].endswith("the end\n"))
        self.assertLessEqual(len(doc["err"]), 4000)

    def test_a_hung_probe_is_stopped_at_its_deadline_with_what_it_had(self):
        r = run("import time\nprint('started', flush=True)\ntime.sleep(60)", timeout_s=1.5, beat_s=0.3)
        doc, end, beats = decode(r.stdout)
        self.assertEqual(end[2], "timeout")
        self.assertEqual(r.returncode, 124)
        self.assertEqual(doc["out"], "started\n")

    def test_heartbeats_come_while_the_probe_works(self):
        # The probe waits on a FIFO that this test opens only after it has read three heartbeats: the beats are
        # certain to come while the probe works, however fast or slow the machine (no count over a time span).
        with tempfile.TemporaryDirectory() as tmp:
            fifo = os.path.join(tmp, "go")
            os.mkfifo(fifo)
            with open(os.path.join(PY_DIR, "kg_fleet.py")) as f:
                src = f.read()
            program = "print(open(%r).read(), flush=True)" % fifo
            src += "\nfleet_main(%s, 'NONCE', 60, 0.05)\n" % json.dumps(program)
            p = subprocess.Popen([sys.executable, "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 env=dict(os.environ, SLURMD_NODENAME="n7"))
            assert p.stdin is not None and p.stdout is not None
            p.stdin.write(src.encode())
            p.stdin.close()
            p.stdin = None  # closed: communicate() below must not flush it
            lines = []
            try:
                while sum(1 for line in lines if line.startswith(b"@@KG-FLEET-BEAT ")) < 3:
                    line = p.stdout.readline()
                    self.assertTrue(line, "the program ended before three heartbeats: %r" % lines)
                    lines.append(line)
                with open(fifo, "w") as w:
                    w.write("released")
                rest, _ = p.communicate(timeout=60)  # a guard only: a hang fails the test
            finally:
                if p.poll() is None:
                    p.kill()
            doc, end, beats = decode(b"".join(lines) + rest)
            self.assertGreaterEqual(beats, 3)
            self.assertEqual(end[2], "exit=0")
            self.assertEqual(doc["out"], "released\n")


if __name__ == "__main__":
    unittest.main()
