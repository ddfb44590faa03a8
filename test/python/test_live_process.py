"""python/live_process.py on real processes: found by their working folder or an open file of the run, facts read
from /proc, secrets redacted, bounded."""
import os
import subprocess
import sys
import tempfile
import time
import shutil
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import live_process  # noqa: E402

FAKE_TOKEN = "hf_FAKEliveTOKEN0000000000000000000000"


@unittest.skipUnless(os.path.isdir("/proc/self/fd"), "needs /proc")
class LiveProcessTest(unittest.TestCase):
    def setUp(self):
        self.d = os.path.realpath(tempfile.mkdtemp())
        self.run_dir = os.path.join(self.d, "run")
        os.makedirs(self.run_dir)
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            p.kill()
            p.wait()
            if p.stdout is not None:
                p.stdout.close()
        shutil.rmtree(self.d, ignore_errors=True)

    def spawn(self, argv, cwd, env=None):
        # stdout is read until the process says it is ready: the scan runs on a process that has its files open
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        self.procs.append(p)
        assert p.stdout is not None
        self.assertEqual(p.stdout.readline().strip(), b"ready")
        return p

    def wait_exec(self, p, name):
        # "ready" is printed before the shell's `exec`: wait until the process IS the program (a state, not a time;
        # the loop's bound only stops a hang)
        for _ in range(60000):
            try:
                if os.path.basename(os.readlink("/proc/%d/exe" % p.pid)) == name:
                    return
            except OSError:
                pass
            time.sleep(0.001)
        self.fail("pid %d never became %s" % (p.pid, name))

    def test_a_process_working_in_the_run_is_found_with_its_launch_facts_and_secrets_redacted(self):
        env = dict(os.environ, HF_TOKEN=FAKE_TOKEN, CUDA_LAUNCH_BLOCKING="1")
        p = self.spawn(["sh", "-c", "echo ready; exec sleep 600", "--token", FAKE_TOKEN], self.run_dir, env)
        self.wait_exec(p, "sleep")
        got = live_process.scan(self.run_dir)
        self.assertIsNone(got["error"])
        procs = [x for x in got["processes"] if x["pid"] == p.pid]
        self.assertEqual(len(procs), 1, got["processes"])
        x = procs[0]
        self.assertEqual((x["matchedBy"], x["cwd"]), ("cwd", self.run_dir))
        self.assertEqual(x["argv"][:2], ["sleep", "600"])  # exec: the command line of what runs now
        self.assertEqual(x["env"]["CUDA_LAUNCH_BLOCKING"], "1")
        self.assertNotIn(FAKE_TOKEN, repr(x))
        self.assertTrue(x["exe"].endswith("sleep"), x["exe"])
        self.assertIsNotNone(x["startTime"])

    def test_a_process_elsewhere_holding_a_file_of_the_run_open_is_found_and_others_are_not(self):
        log = os.path.join(self.run_dir, "train_log.jsonl")
        writer = self.spawn(["sh", "-c", 'exec 3>>"$0"; echo ready; exec sleep 600', log], self.d)
        other = self.spawn(["sh", "-c", "echo ready; exec sleep 600"], self.d)
        got = live_process.scan(self.run_dir)
        pids = dict((x["pid"], x) for x in got["processes"])
        self.assertIn(writer.pid, pids)
        self.assertEqual((pids[writer.pid]["matchedBy"], pids[writer.pid]["matchPath"]), ("open-file", log))
        self.assertNotIn(other.pid, pids)
        # a run whose name starts like another's is not it
        self.assertEqual(live_process.scan(self.run_dir + "-other")["processes"], [])

    def test_a_launchers_workers_are_its_children_not_launches_of_their_own(self):
        script = ("import subprocess, sys, time; c = subprocess.Popen(['sleep', '600']); print('ready', flush=True); "
                  "print(c.pid, flush=True); time.sleep(600)")
        p = self.spawn([sys.executable, "-c", script], self.run_dir)
        assert p.stdout is not None
        child = int(p.stdout.readline())
        got = live_process.scan(self.run_dir)
        roots = [x for x in got["processes"] if x["pid"] == p.pid]
        self.assertEqual(len(roots), 1, got["processes"])
        self.assertEqual(roots[0]["children"], 1)
        self.assertFalse(any(x["ppid"] == p.pid for x in got["processes"]))
        os.kill(child, 9)  # the launcher's worker, by its id

    def test_several_runs_share_one_pass_over_proc(self):
        other_run = os.path.join(self.d, "run2")
        os.makedirs(other_run)
        a = self.spawn(["sh", "-c", "echo ready; exec sleep 600"], self.run_dir)
        log = os.path.join(other_run, "train_log.jsonl")
        b = self.spawn(["sh", "-c", 'exec 3>>"$0"; echo ready; exec sleep 600', log], self.d)
        first, second = live_process.scan_runs([self.run_dir, other_run])
        self.assertEqual([x["pid"] for x in first["processes"]], [a.pid])
        self.assertEqual([(x["pid"], x["matchPath"]) for x in second["processes"]], [(b.pid, log)])
        self.assertEqual(first["scanned"], second["scanned"])  # one pass: the same processes looked at

    def test_a_poll_looks_again_only_when_the_log_changed(self):
        import what_changed
        log = os.path.join(self.run_dir, "train_log.jsonl")
        with open(log, "w") as f:
            f.write('{"step": 1}\n')
        p = self.spawn(["sh", "-c", "echo ready; exec sleep 600"], self.run_dir)
        [got] = what_changed.live_poll([self.run_dir], [log], [""])
        self.assertFalse(got["unchanged"])
        self.assertEqual([r["pid"] for r in got["records"]], [p.pid])
        self.assertGreater(got["scanned"], 0)
        [again] = what_changed.live_poll([self.run_dir], [log], [got["logState"]])
        self.assertTrue(again["unchanged"])
        self.assertEqual((again["scanned"], again["records"]), (0, []))  # no /proc pass at all
        with open(log, "a") as f:
            f.write('{"step": 2}\n')
        [grown] = what_changed.live_poll([self.run_dir], [log], [got["logState"]])
        self.assertFalse(grown["unchanged"])
        self.assertEqual([r["pid"] for r in grown["records"]], [p.pid])
        self.assertNotEqual(grown["logState"], got["logState"])

    def test_the_scan_is_bounded(self):
        self.spawn(["sh", "-c", "echo ready; exec sleep 600"], self.run_dir)
        got = live_process.scan(self.run_dir, max_procs=1)
        self.assertLessEqual(got["scanned"], 1)
        self.assertTrue(got["truncated"])

    def test_cuda_libraries_are_named_with_the_version_their_file_says(self):
        self.assertTrue(live_process.LIB_NAMES.match("libcudnn.so.9.1.0"))
        self.assertTrue(live_process.LIB_NAMES.match("libtorch_cuda.so"))
        self.assertTrue(live_process.LIB_NAMES.match("libnccl.so.2"))
        self.assertFalse(live_process.LIB_NAMES.match("libc.so.6"))
        self.assertEqual(live_process._SO_VERSION.search("libcudnn.so.9.1.0").group(1), "9.1.0")
        self.assertIsInstance(live_process._libs(os.getpid()), dict)


if __name__ == "__main__":
    unittest.main()
