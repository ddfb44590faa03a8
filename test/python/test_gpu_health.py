"""kg_gpu.py and gpu_health.py against a fake nvidia-smi answering from test/fixtures/nvidia-smi/.

No GPU here: the fixtures are nvidia-smi's output WRITTEN in the format NVIDIA documents (`--format=csv,noheader,
nounits`, `--help-query-gpu`), not recorded (test/fixtures/nvidia-smi/README.md); the real box's outputs are to be
recorded beside them.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PY_DIR = os.path.join(HERE, "..", "..", "python")
sys.path.insert(0, PY_DIR)
sys.path.insert(0, HERE)

import gpu_health  # noqa: E402
import kg_gpu  # noqa: E402
from fake_smi import fake_smi  # noqa: E402


def probe(folder, *args):
    env = dict(os.environ, PATH=folder + os.pathsep + "/usr/bin:/bin")
    r = subprocess.run([sys.executable, os.path.join(PY_DIR, "gpu_health.py")] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=env, timeout=120)
    return r.returncode, r.stdout.decode(), r.stderr.decode()


class Values(unittest.TestCase):
    def test_every_no_value_answer_is_null(self):
        for text in ("[N/A]", "N/A", "[Not Supported]", "[Unknown Error]", "[Insufficient Permissions]", "", "  "):
            for kind in ("num", "int", "str", "active", "yes"):
                self.assertIsNone(kg_gpu.value_of(kind, text), (kind, text))

    def test_numbers_flags_and_a_unit_left_in(self):
        self.assertEqual(kg_gpu.value_of("num", "612.45"), 612.45)
        self.assertEqual(kg_gpu.value_of("num", "250.00 W"), 250.0)
        self.assertEqual(kg_gpu.value_of("int", "16"), 16)
        self.assertIs(kg_gpu.value_of("active", "Active"), True)
        self.assertIs(kg_gpu.value_of("active", "Not Active"), False)
        self.assertIs(kg_gpu.value_of("yes", "Yes"), True)
        self.assertIs(kg_gpu.value_of("yes", "No"), False)
        self.assertIsNone(kg_gpu.value_of("num", "fast"))


class FromFixtures(unittest.TestCase):
    def setUp(self):
        self.d = tempfile.mkdtemp()

    def read(self, state):
        smi, _ = fake_smi(self.d, state)
        reader = kg_gpu.Reader(smi)
        return reader, reader.sample()

    def test_a_current_driver_h200_box_with_faults(self):
        reader, s = self.read({"driver": "r580", "gpu": "r580-h200x8-faults.gpu.csv",
                               "apps": "r580-h200x8.apps.csv"})
        self.assertEqual(len(s["gpus"]), 8)
        g = dict((x["index"], x) for x in s["gpus"])
        self.assertEqual(g[5]["reasons"], ["hw_thermal_slowdown", "sw_thermal_slowdown"])
        self.assertEqual((g[5]["smClock"], g[5]["smClockMax"], g[5]["temp"]), (1215, 1980, 87))
        self.assertEqual((g[2]["pcieGen"], g[2]["pcieGenMax"], g[2]["pcieWidth"], g[2]["pcieWidthMax"]), (3, 5, 8, 16))
        self.assertEqual((g[6]["eccUncorrected"], g[6]["remappedUncorrectable"], g[6]["remappedPending"]), (2, 1, True))
        # Hopper remaps rows and retires no pages: nvidia-smi answers [N/A]
        self.assertIsNone(g[0]["retiredSbe"])
        self.assertEqual(g[0]["reasons"], [])
        # power.draw.instant where the driver has it
        self.assertEqual(reader.fields()["power"], "power.draw.instant")
        self.assertEqual(g[0]["power"], 600.0)
        self.assertEqual(g[0]["powerLimit"], 700.0)
        self.assertEqual(g[0]["name"], "NVIDIA H200")
        procs = s["processes"]
        self.assertEqual([p["pid"] for p in procs], [51234, 51235, 60001, 60002])
        self.assertEqual(procs[2]["name"], "/opt/conda/envs/eval, run 2/bin/python")  # a comma in the last column
        self.assertEqual(procs[2]["gpu"], 1)
        self.assertIsNone(procs[3]["memMiB"])
        self.assertIsNone(procs[3]["name"])  # [Not Found]
        self.assertFalse(procs[0]["seen"])  # no such PID here

    def test_an_older_driver_throttle_names_and_power_draw(self):
        reader, s = self.read({"driver": "r470", "gpu": "r470-a100x2.gpu.csv", "apps": {"rows": []}})
        f = reader.fields()
        self.assertEqual(f["reason:sw_power_cap"], "clocks_throttle_reasons.sw_power_cap")
        self.assertEqual(f["power"], "power.draw")
        self.assertEqual([g["reasons"] for g in s["gpus"]], [[], ["sw_power_cap"]])
        self.assertEqual(s["gpus"][1]["smClock"], 1095)
        self.assertEqual(s["gpus"][0]["power"], 398.51)
        self.assertIsNone(s["gpus"][0]["retiredSbe"])  # [Not Supported]
        self.assertEqual(s["processes"], [])

    def test_without_its_help_the_refusals_pick_the_names(self):
        # an nvidia-smi whose --help-query-gpu says nothing: each "is not a valid field" swaps in the older name
        calls = os.path.join(self.d, "calls")
        reader, s = self.read({"driver": "r470", "gpu": "r470-a100x2.gpu.csv", "apps": {"rows": []},
                               "helpFails": True, "calls": calls})
        self.assertEqual(reader.fields()["reason:hw_slowdown"], "clocks_throttle_reasons.hw_slowdown")
        self.assertEqual([g["reasons"] for g in s["gpus"]], [[], ["sw_power_cap"]])
        self.assertEqual(s["gpus"][0]["power"], 398.51)
        with open(calls) as f:
            n = len(f.read().splitlines())
        # help, then one refusal per renamed field (8 reasons, power.draw.instant), the answer, the processes
        self.assertEqual(n, 1 + 9 + 1 + 1)

    def test_a_real_process_has_its_user_and_parents(self):
        me = os.getpid()
        rows = ["GPU-5f8e2c1a-3b4d-4e6f-8a9b-0c1d2e3f4a50, %d, 1024, %s" % (me, sys.executable)]
        _, s = self.read({"driver": "r580", "gpu": "r580-h200x8-steady.gpu.csv", "apps": {"rows": rows}})
        p = s["processes"][0]
        self.assertTrue(p["seen"])
        import pwd
        self.assertEqual(p["user"], pwd.getpwuid(os.getuid()).pw_name)
        self.assertEqual(p["ancestors"][0], os.getppid())

    def test_a_hung_nvidia_smi_is_killed_at_the_timeout(self):
        smi = os.path.join(self.d, "nvidia-smi")
        fifo = os.path.join(self.d, "never")
        os.mkfifo(fifo)
        with open(smi, "w") as f:
            f.write("#!/bin/sh\nexec cat %s\n" % fifo)  # blocks: nobody writes the FIFO
        os.chmod(smi, 0o755)
        with self.assertRaises(kg_gpu.SmiError) as e:
            kg_gpu.run_smi(smi, ["--help-query-gpu"], timeout=0.5)
        self.assertIn("did not answer within 0.5 s", str(e.exception))

    def test_an_endless_answer_is_cut_at_the_cap(self):
        smi = os.path.join(self.d, "nvidia-smi")
        with open(smi, "w") as f:
            f.write("#!/bin/sh\nexec yes 0\n")
        os.chmod(smi, 0o755)
        with self.assertRaises(kg_gpu.SmiError) as e:
            kg_gpu.run_smi(smi, ["--query-gpu=index"], cap=4096)
        self.assertIn("more than 4096 bytes", str(e.exception))


class Probe(unittest.TestCase):
    def test_without_nvidia_smi_it_says_so_once_and_reads_nothing(self):
        d = tempfile.mkdtemp()
        code, out, err = probe(d)
        self.assertEqual(code, 0, err)
        doc = json.loads(out)
        self.assertEqual(doc["said"], "no nvidia-smi on this host")
        self.assertIsNone(doc["now"])
        self.assertEqual(err.count("no nvidia-smi"), 1)

    def test_the_probe_reads_now(self):
        d = tempfile.mkdtemp()
        fake_smi(d, {"driver": "r580", "gpu": "r580-h200x8-faults.gpu.csv", "apps": "r580-h200x8.apps.csv"})
        code, out, err = probe(d)
        self.assertEqual(code, 0, err)
        doc = json.loads(out)
        self.assertEqual(len(doc["now"]["gpus"]), 8)
        self.assertIn("GPU 5 NVIDIA H200: 100% SM 1215/1980 MHz", err)


def sample(t, pids=(), reasons=()):
    g = {"index": 0, "util": 100, "smClock": 1980, "reasons": list(reasons), "pcieGen": 5, "pcieWidth": 16}
    return {"kind": "sample", "t": t, "gpus": [g],
            "processes": [{"gpu": 0, "pid": p, "ancestors": [], "seen": True} for p in pids]}


class Timeline(unittest.TestCase):
    def write(self, lines):
        run = tempfile.mkdtemp()
        os.mkdir(os.path.join(run, ".known-good"))
        with open(os.path.join(run, ".known-good", "gpu-timeline.jsonl"), "w") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")
        return run

    def test_a_long_timeline_keeps_its_changes_and_launch_edges_within_the_budget(self):
        lines = [{"kind": "header", "t": 0, "pid": 10}]
        lines += [sample(1000 + i, pids=(10,)) for i in range(3000)]
        lines += [{"kind": "end", "t": 4000, "pid": 10, "why": "the launch ended", "samples": 3000}]
        lines += [{"kind": "header", "t": 5000, "pid": 11}]
        # a neighbour from the 1500th sample of the second launch on
        lines += [sample(5001 + i, pids=(11,) if i < 1500 else (11, 99)) for i in range(3000)]
        run = self.write(lines)
        tl = gpu_health.read_timeline(run, 100)
        self.assertEqual(tl["total"], 6000)
        self.assertLessEqual(tl["kept"], 100)
        ts = [s["t"] for s in tl["samples"]]
        self.assertEqual(ts, sorted(ts))
        # the sample before the neighbour and its first: the change's window is exact
        self.assertIn(5001 + 1499, ts)
        self.assertIn(5001 + 1500, ts)
        # each launch's first and last
        for t in (1000, 3999, 5001, 8000):
            self.assertIn(t, ts)
        self.assertEqual(len(tl["headers"]), 2)
        self.assertEqual(len(tl["ends"]), 1)
        self.assertIn("of 6000 samples kept", tl["truncated"])

    def test_the_line_being_written_and_a_broken_line_are_skipped(self):
        run = self.write([{"kind": "header", "t": 0, "pid": 10}, sample(1)])
        with open(os.path.join(run, ".known-good", "gpu-timeline.jsonl"), "a") as f:
            f.write("{not json\n")
            f.write('{"kind": "sample", "t": 2, "gpus": [')  # no newline yet: the sampler is writing it
        tl = gpu_health.read_timeline(run, 100)
        self.assertEqual(tl["total"], 1)
        self.assertEqual(tl["skipped"], 2)

    def test_a_fifo_planted_as_the_timeline_is_not_read(self):
        run = tempfile.mkdtemp()
        os.mkdir(os.path.join(run, ".known-good"))
        os.mkfifo(os.path.join(run, ".known-good", "gpu-timeline.jsonl"))
        tl = gpu_health.read_timeline(run, 100)
        self.assertEqual(tl["samples"], [])
        self.assertIn("not a regular file", tl["errors"][0])


if __name__ == "__main__":
    unittest.main()
