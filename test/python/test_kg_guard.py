"""python/kg_guard.py: the guard every action runs under (issue 31: bounded, owned, data never a command).

Every state a test asserts on is made certain first: a command says it is ready by writing to a FIFO the test reads
(so its TERM trap is set before the test acts), and the test waits for a process to be gone by polling /proc under
the test's own generous bound — never a sleep followed by an assert.
"""
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
GUARD = os.path.join(HERE, "..", "..", "python", "kg_guard.py")
FRAME = re.compile(r"\n@@KNOWN-GOOD-BEGIN (\w+)@@\n(.*?)\n@@KNOWN-GOOD-END \1@@\n", re.S)
# How long a test waits for a state that must come (a process gone): a bound for a hung test, not a speed.
PATIENCE_S = 120


def report_of(stderr):
    m = FRAME.search(stderr.decode("utf-8", "replace"))
    assert m, "no report in %r" % stderr[-2000:]
    return json.loads(m.group(2))


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2:][:1] not in (b"Z", b"X")


def wait_gone(pid):
    end = time.monotonic() + PATIENCE_S
    while alive(pid):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def guard(args, command, **kw):
    return subprocess.run(
        [sys.executable, GUARD] + args + ["--"] + command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw
    )


class GuardTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kg-guard-")
        self.fifo = os.path.join(self.dir, "ready")
        os.mkfifo(self.fifo)

    def tearDown(self):
        subprocess.run(["rm", "-rf", self.dir])

    def read_ready(self):
        """Blocks until the command wrote its line (it has set its traps by then): its PIDs."""
        with open(self.fifo) as f:
            return [int(w) for w in f.read().split()]

    def test_exit_code_and_output_pass_through(self):
        r = guard(["--report", "n1"], ["sh", "-c", "echo out; echo err >&2; exit 7"])
        self.assertEqual(r.returncode, 7)
        self.assertEqual(r.stdout, b"out\n")
        rep = report_of(r.stderr)
        self.assertEqual((rep["ended"], rep["exitCode"], rep["stops"]), ("exited", 7, []))

    def test_environment_map_applied_as_data(self):
        env = {"set": {"KG_A": "$(touch %s/x); `id`\nB" % self.dir, "KG_B": "-S/bin/sh"}, "unset": ["HOME"]}
        r = guard(["--env", json.dumps(env)], ["sh", "-c", 'printf "%s|%s|%s" "$KG_A" "$KG_B" "${HOME-unset}"'])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.decode(), "%s|-S/bin/sh|unset" % env["set"]["KG_A"])
        self.assertFalse(os.path.exists(os.path.join(self.dir, "x")), "a value is never run")

    def test_names_that_are_not_variables_are_refused_and_nothing_runs(self):
        marker = os.path.join(self.dir, "ran")
        for name in ['-S/bin/sh -c "touch %s" #' % marker, "--chdir=/", "PATH=/evil:/usr/bin", "1X", "A B", ""]:
            r = guard(["--report", "n", "--env", json.dumps({"set": {name: "v"}})], ["touch", marker])
            self.assertEqual(r.returncode, 2, name)
            rep = report_of(r.stderr)
            self.assertEqual((rep["ok"], rep["error"]["code"]), (False, "bad-args"), name)
            self.assertFalse(os.path.exists(marker), name)
        r = guard(["--env", json.dumps({"set": {"A": "x\u0000y"}})], ["touch", marker])
        self.assertEqual(r.returncode, 2)
        self.assertFalse(os.path.exists(marker))

    def test_an_unknown_option_before_the_command_runs_nothing(self):
        marker = os.path.join(self.dir, "ran")
        r = guard(["--exec", "x"], ["touch", marker])
        self.assertEqual(r.returncode, 2)
        self.assertIn(b"unknown option", r.stderr)
        self.assertFalse(os.path.exists(marker))

    def test_words_after_the_separator_are_the_command_not_options(self):
        r = guard([], ["printf", "%s,", "--timeout", "--env", "-c"])
        self.assertEqual(r.stdout, b"--timeout,--env,-c,")

    def test_time_limit_sends_term_and_the_report_says_so(self):
        r = guard(["--timeout", "0.3", "--grace", "30", "--report", "n"], ["sleep", "1000"])
        rep = report_of(r.stderr)
        self.assertEqual(rep["ended"], "timeout")
        self.assertEqual([s["signal"] for s in rep["stops"]], ["TERM"])
        self.assertEqual(rep["signal"], "TERM")
        self.assertEqual(r.returncode, -signal.SIGTERM, "ended by the same signal as the command")

    def test_a_command_that_ignores_term_gets_kill_after_the_grace(self):
        p = subprocess.Popen(
            [sys.executable, GUARD, "--grace", "0.2", "--report", "n", "--"]
            + ["sh", "-c", 'trap "" TERM; sleep 1000 & echo $$ $! > %s; wait' % self.fifo],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        pids = self.read_ready()
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=PATIENCE_S)
        rep = report_of(err)
        self.assertEqual(rep["ended"], "stopped")
        self.assertEqual([s["signal"] for s in rep["stops"]][:2], ["TERM", "KILL"])
        for pid in pids:
            self.assertTrue(wait_gone(pid), "pid %d still running" % pid)

    def test_ctrl_c_is_passed_on_as_sigint(self):
        got = os.path.join(self.dir, "got")
        p = subprocess.Popen(
            [sys.executable, GUARD, "--report", "n", "--"]
            + ["sh", "-c", 'trap "echo INT > %s; exit 130" INT; echo $$ > %s; while :; do sleep 0.05; done'
               % (got, self.fifo)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.read_ready()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=PATIENCE_S)
        rep = report_of(err)
        self.assertEqual((rep["ended"], rep["exitCode"]), ("stopped", 130))
        self.assertEqual([s["signal"] for s in rep["stops"]], ["INT"])
        with open(got) as f:
            self.assertEqual(f.read(), "INT\n")

    def test_caller_gone_stops_the_command_and_what_it_started(self):
        r_out, w_out = os.pipe()
        p = subprocess.Popen(
            [sys.executable, GUARD, "--grace", "0.2", "--"]
            + ["sh", "-c", 'trap "" TERM; sleep 1000 & echo $$ $! > %s; wait' % self.fifo],
            stdout=w_out,
            stderr=subprocess.DEVNULL,
        )
        os.close(w_out)
        pids = self.read_ready()
        os.close(r_out)  # the caller is gone: nobody reads the guard's stdout any more
        p.wait(timeout=PATIENCE_S)
        for pid in pids:
            self.assertTrue(wait_gone(pid), "pid %d still running" % pid)

    def test_the_command_dies_with_a_killed_guard(self):
        p = subprocess.Popen(
            [sys.executable, GUARD, "--"] + ["sh", "-c", "echo $$ > %s; exec sleep 1000" % self.fifo],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        (pid,) = self.read_ready()
        p.kill()
        p.wait()
        self.assertTrue(wait_gone(pid))

    def test_background_processes_left_behind_are_stopped(self):
        pidfile = os.path.join(self.dir, "bg")
        r = guard(["--grace", "0.2", "--report", "n"], ["sh", "-c", "sleep 1000 & echo $! > %s" % pidfile])
        rep = report_of(r.stderr)
        self.assertEqual(rep["ended"], "exited")
        self.assertGreaterEqual(rep["leftover"], 1)
        with open(pidfile) as f:
            self.assertTrue(wait_gone(int(f.read())))

    def test_output_past_the_cap_keeps_only_its_tail(self):
        size = 12 * 1024 * 1024
        script = "import sys; sys.stdout.buffer.write(b'x' * %d + b'THE-END')" % size
        r = guard(["--cap", str(1 << 20), "--tail", "4096", "--report", "n"], [sys.executable, "-c", script])
        rep = report_of(r.stderr)
        self.assertEqual(rep["bytes"]["stdout"], size + 7)
        self.assertEqual(rep["leftOut"]["stdout"], size + 7 - (1 << 20))
        self.assertEqual(len(r.stdout), (1 << 20) + 4096)
        self.assertTrue(r.stdout.endswith(b"THE-END"))
        self.assertIn(b"left out", r.stderr)

    def test_without_a_cap_bytes_pass_unchanged(self):
        data = os.urandom(1_000_000) + b"\xff\xfe\x00\x80"
        r = subprocess.run([sys.executable, GUARD, "--", "cat"], input=data, stdout=subprocess.PIPE)
        self.assertEqual(hashlib.sha256(r.stdout).hexdigest(), hashlib.sha256(data).hexdigest())

    def test_a_missing_command_is_reported(self):
        r = guard(["--report", "n"], [os.path.join(self.dir, "no-such-program")])
        self.assertEqual(r.returncode, 127)
        self.assertIn(b"could not start", r.stderr)


if __name__ == "__main__":
    unittest.main()
