"""kg_record.py's GPU timeline (kg_gpu_sampler.py): a sampler of its own for the life of the launch, never longer.

No GPU here: `nvidia-smi` is the fake of test/fixtures/nvidia-smi/, answering with output WRITTEN in the format NVIDIA
documents, not recorded. Each test holds the launched command on a FIFO until it has seen what it checks (samples in
the file, the sampler's process), then lets it end; waits are for states, with a deadline reached only when the state
never comes.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PY_DIR = os.path.join(HERE, "..", "..", "python")
RECORD = os.path.join(PY_DIR, "kg_record.py")
sys.path.insert(0, HERE)

from fake_smi import fake_smi, set_state  # noqa: E402

DEADLINE_S = 60
STEADY = {"driver": "r580", "gpu": "r580-h200x8-steady.gpu.csv", "apps": "r580-h200x8.apps.csv"}


def wait_until(check, what):
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end:
        v = check()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("never happened within %d s: %s" % (DEADLINE_S, what))


def lines(path):
    try:
        with open(path) as f:
            return [json.loads(x) for x in f.read().splitlines() if x.endswith("}")]
    except OSError:
        return []


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def ppid_of(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


class Sampler(unittest.TestCase):
    def setUp(self):
        self.d = tempfile.mkdtemp()
        self.bin = os.path.join(self.d, "bin")
        os.mkdir(self.bin)
        self.run_dir = os.path.join(self.d, "run")
        os.mkdir(self.run_dir)
        self.timeline = os.path.join(self.run_dir, ".known-good", "gpu-timeline.jsonl")
        self.held = []

    def tearDown(self):
        for fifo in self.held:  # a test that failed half-way still lets its launches end
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                os.close(fd)
            except OSError:
                pass

    def launch(self, extra=(), path=None, run_dir=None):
        """kg_record on a command held until release(); returns (process, release)."""
        fifo = os.path.join(self.d, "hold-%d" % len(self.held))
        os.mkfifo(fifo)
        self.held.append(fifo)
        env = dict(os.environ, PATH=(path if path is not None else self.bin + os.pathsep + "/usr/bin:/bin"))
        cmd = [sys.executable, "-c", "open(%r).read(); print('done')" % fifo]
        p = subprocess.Popen([sys.executable, RECORD, "--run", run_dir or self.run_dir] + list(extra) + ["--"] + cmd,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)

        def release():
            with open(fifo, "w"):
                pass
            out, err = p.communicate(timeout=DEADLINE_S)
            return p.returncode, out, err

        return p, release

    def record(self, run_dir=None):
        with open(os.path.join(run_dir or self.run_dir, ".known-good", "launches.jsonl")) as f:
            return [json.loads(x) for x in f][-1]

    def samples(self):
        return [x for x in lines(self.timeline) if x["kind"] == "sample"]

    def test_it_samples_while_the_launch_runs_and_ends_with_it(self):
        fake_smi(self.bin, STEADY)
        p, release = self.launch(["--gpu-interval", "0.1"])
        wait_until(lambda: len(self.samples()) >= 3, "3 samples")
        header = lines(self.timeline)[0]
        self.assertEqual(header["kind"], "header")
        self.assertEqual(header["pid"], p.pid)  # kg_record's PID, which the command keeps (exec)
        self.assertEqual([g["name"] for g in header["gpus"]], ["NVIDIA H200"] * 8)
        sampler = header["samplerPid"]
        self.assertTrue(alive(sampler))
        # nobody's child of the launch's, in a session of its own, holding none of its files
        self.assertNotEqual(ppid_of(sampler), p.pid)
        self.assertNotEqual(os.getsid(sampler), os.getsid(p.pid))
        for fd in ("0", "1", "2"):
            self.assertEqual(os.readlink("/proc/%d/fd/%s" % (sampler, fd)), "/dev/null")
        s = self.samples()[0]
        self.assertEqual(len(s["gpus"]), 8)
        self.assertNotIn("uuid", s["gpus"][0])  # said once, in the header
        self.assertEqual(s["gpus"][3]["reasons"], ["sw_power_cap"])
        self.assertEqual(self.record()["gpuTimeline"]["path"], self.timeline)
        rc, out, err = release()
        self.assertEqual((rc, out, err), (0, b"done\n", b""))
        wait_until(lambda: not alive(sampler), "the sampler gone after the launch")
        end = lines(self.timeline)[-1]
        self.assertEqual(end["kind"], "end")
        self.assertEqual(end["why"], "the launch (PID %d) ended" % p.pid)
        self.assertEqual(end["samples"], len(self.samples()))
        self.assertIsInstance(end["cpuS"], float)

    def test_without_nvidia_smi_nothing_starts_and_the_record_says_so(self):
        p, release = self.launch(path="/usr/bin:/bin")
        rc, out, err = release()
        self.assertEqual((rc, err), (0, b""))
        self.assertEqual(self.record()["gpuTimeline"], {"path": None, "why": "no nvidia-smi on this host"})
        self.assertFalse(os.path.exists(self.timeline))

    def test_a_link_planted_as_the_timeline_is_not_followed_and_the_launch_runs(self):
        fake_smi(self.bin, STEADY)
        os.mkdir(os.path.join(self.run_dir, ".known-good"), 0o700)
        victim = os.path.join(self.d, "victim")
        with open(victim, "w") as f:
            f.write("keep\n")
        os.symlink(victim, self.timeline)
        p, release = self.launch(["--gpu-interval", "0.1"])
        rc, out, err = release()
        self.assertEqual((rc, out), (0, b"done\n"))
        self.assertEqual(err.decode().count("\n"), 1, err)
        self.assertIn("GPU timeline not recorded: %s is a symbolic link: not followed" % self.timeline, err.decode())
        with open(victim) as f:
            self.assertEqual(f.read(), "keep\n")
        self.assertIsNone(self.record()["gpuTimeline"]["path"])

    def test_a_second_launch_of_the_run_beside_the_first_samples_nothing(self):
        fake_smi(self.bin, STEADY)
        first, release_first = self.launch(["--gpu-interval", "0.1"])
        wait_until(lambda: self.samples(), "the first launch's samples")
        second, release_second = self.launch(["--gpu-interval", "0.1"])
        rc, _, err = release_second()
        self.assertEqual((rc, err), (0, b""))
        self.assertEqual(self.record()["gpuTimeline"]["why"],
                         "another launch's sampler is recording this run's GPU timeline on this host")
        self.assertEqual({x["pid"] for x in lines(self.timeline) if x["kind"] == "header"}, {first.pid})
        release_first()

    def test_past_half_the_cap_the_file_is_rotated_each_part_with_its_header(self):
        fake_smi(self.bin, STEADY)
        p, release = self.launch(["--gpu-interval", "0.1", "--gpu-cap", "64K"])
        rotated = os.path.join(self.run_dir, ".known-good", "gpu-timeline.1.jsonl")
        wait_until(lambda: os.path.exists(rotated) and self.samples(), "a rotation and a sample after it")
        release()
        wait_until(lambda: lines(self.timeline)[-1]["kind"] == "end", "the end line")
        for f in (rotated, self.timeline):
            self.assertLessEqual(os.path.getsize(f), 32 * 1024)
            self.assertEqual(lines(f)[0]["kind"], "header")

    def test_an_nvidia_smi_that_keeps_failing_ends_the_sampler_not_the_launch(self):
        state = dict(STEADY, gpu="no-such-fixture.gpu.csv")  # the fake fails every query, answers its help
        fake_smi(self.bin, state)
        p, release = self.launch(["--gpu-interval", "0.1"])
        wait_until(lambda: any(x["kind"] == "end" for x in lines(self.timeline)), "the sampler giving up")
        end = lines(self.timeline)[-1]
        self.assertRegex(end["why"], r"^nvidia-smi failed 5 times in a row: ")
        self.assertEqual(len([x for x in lines(self.timeline) if x.get("error")]), 5)
        self.assertIsNone(p.poll())  # the launch runs on
        rc, out, err = release()
        self.assertEqual((rc, out, err), (0, b"done\n", b""))

    def test_the_processes_on_the_gpus_change_between_samples(self):
        _, state_file = fake_smi(self.bin, dict(STEADY, apps={"rows": []}))
        p, release = self.launch(["--gpu-interval", "0.1"])
        wait_until(lambda: self.samples(), "a sample without processes")
        rows = ["GPU-5f8e2c1a-3b4d-4e6f-8a9b-0c1d2e3f4a50, %d, 1024, python3" % p.pid]
        set_state(state_file, dict(STEADY, apps={"rows": rows}))
        wait_until(lambda: any(s["processes"] for s in self.samples()), "a sample with the launch on GPU 0")
        first = [s for s in self.samples() if s["processes"]][0]["processes"][0]
        self.assertEqual((first["gpu"], first["pid"], first["seen"]), (0, p.pid, True))
        release()


if __name__ == "__main__":
    unittest.main()
