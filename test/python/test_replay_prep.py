"""replay_prep.py rundir: the empty folder a replay run starts in, only ever inside ~/.known-good/replays."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PREP = os.path.join(HERE, "..", "..", "python", "replay_prep.py")


class RunDir(unittest.TestCase):
    def setUp(self):
        self.home = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.home)
        self.replay = os.path.join(os.path.realpath(self.home), ".known-good", "replays", "run-1234", "20261205-000000")

    def prep(self, *args):
        env = dict(os.environ, HOME=self.home)
        r = subprocess.run([sys.executable, PREP] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=env, timeout=60)
        if r.returncode:
            return r.returncode, r.stderr.decode()
        return r.returncode, json.loads(r.stdout.decode())

    def test_makes_runs_n_cwd_empty_and_refuses_it_twice(self):
        rc, out = self.prep("rundir", "--replay", self.replay, "--run", "3")
        self.assertEqual(rc, 0, out)
        dest = os.path.join(self.replay, "runs", "3", "cwd")
        self.assertEqual(out["dir"], dest)
        self.assertEqual(os.listdir(dest), [])
        rc, out = self.prep("rundir", "--replay", self.replay, "--run", "3")
        self.assertNotEqual(rc, 0)
        self.assertIn("exists already", out)

    def test_refuses_a_folder_outside_the_replays_and_a_run_that_is_no_number(self):
        outside = os.path.join(self.home, "run-folder")
        for args, why in ((["--replay", outside, "--run", "1"], "a replay writes only inside"),
                          (["--replay", self.replay, "--run", "../../x"], "a run's number is digits")):
            rc, out = self.prep("rundir", *args)
            self.assertNotEqual(rc, 0)
            self.assertIn(why, out)
        self.assertFalse(os.path.exists(outside))
        self.assertFalse(os.path.exists(os.path.join(self.replay, "runs")))


if __name__ == "__main__":
    unittest.main()
