import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.join(HERE, "..", "..", "python")
sys.path.insert(0, PYDIR)

import kg_common  # noqa: E402
import throughput_bench  # noqa: E402

# Debian's python3-torch (1.13), or KG_TORCH_PYTHON on a GPU box whose torch lives in another interpreter. This test
# never skips: without torch there it fails and says why.
TORCH_PYTHON = os.environ.get("KG_TORCH_PYTHON", "/usr/bin/python3")


class ThroughputBenchTest(unittest.TestCase):
    def test_cpu_run_produces_the_documented_json(self):
        check = subprocess.run([TORCH_PYTHON, "-c", "import torch; print(torch.__version__)"], capture_output=True)
        self.assertEqual(
            check.returncode, 0, "torch must be importable by %s for this test: %s" % (TORCH_PYTHON, check.stderr)
        )
        run = subprocess.run(
            [TORCH_PYTHON, os.path.join(PYDIR, "throughput_bench.py"), "--steps", "3", "--warmup", "1",
             "--layers", "1", "--device", "cpu"],
            capture_output=True,
            timeout=300,
        )
        self.assertEqual(run.returncode, 0, run.stderr.decode(errors="replace"))
        doc = json.loads(run.stdout)
        for key in ("tokensPerSec", "stepMs", "stepTimesMs", "tflops", "flopsPerToken", "params", "peakMemoryBytes",
                    "firstStepMs", "compileS", "loss", "config", "fingerprint", "warnings"):
            self.assertIn(key, doc)
        tps = doc["tokensPerSec"]
        self.assertGreater(tps["median"], 0)
        self.assertLessEqual(tps["min"], tps["median"])
        self.assertLessEqual(tps["median"], tps["max"])
        self.assertEqual(len(doc["stepTimesMs"]), 3)
        # tokens per CPU-second of the process: a CPU host's step costs at least its wall time in CPU (one thread)
        # or is left out when the clock's resolution read 0 ms
        cpu = doc["cpuTokensPerSec"]
        if cpu is not None:
            self.assertLessEqual(cpu["min"], cpu["median"])
            self.assertLessEqual(cpu["median"], cpu["max"])
        cfg = doc["config"]
        self.assertEqual((cfg["layers"], cfg["device"], cfg["dtype"], cfg["steps"], cfg["warmup"]),
                         (1, "cpu", "fp32", 3, 1))
        tokens = cfg["batch"] * cfg["seq"]
        self.assertAlmostEqual(tps["median"], tokens * 1000.0 / doc["stepMs"]["median"], places=6)
        self.assertAlmostEqual(doc["tflops"], doc["flopsPerToken"] * tps["median"] / 1e12, places=12)
        self.assertEqual(doc["fingerprint"]["torch"].split(".")[:2], check.stdout.decode().strip().split(".")[:2])
        self.assertIsNone(doc["compileS"])
        self.assertGreater(doc["loss"], 0)
        if cfg["attentionUsed"] == "manual":
            self.assertTrue(any("scaled_dot_product_attention" in w for w in doc["warnings"]))
        # Progress went to stderr, one line per step (first step, warm-up, measured).
        steps = [l for l in run.stderr.decode().splitlines() if l.startswith("step ")]
        self.assertEqual(len(steps), 5)
        self.assertRegex(steps[-1], r"^step 5/5  [0-9.]+ ms  [0-9.]+[KMG]? tok/s$")

    def test_missing_torch_is_a_clear_probe_error(self):
        saved = sys.modules.get("torch", False)
        sys.modules["torch"] = None  # makes `import torch` raise ImportError
        try:
            with self.assertRaises(kg_common.ProbeError) as ctx:
                throughput_bench.main([])
        finally:
            if saved is False:
                del sys.modules["torch"]
            else:
                sys.modules["torch"] = saved
        self.assertIn("torch is not installed for %s" % sys.executable, str(ctx.exception))
        # the way forward, not a dead end: the command and the setting that pick another interpreter
        self.assertIn('"Known Good: Select Remote Python"', str(ctx.exception))
        self.assertIn("knownGood.hosts", str(ctx.exception))
        self.assertIn("knownGood.localPython", str(ctx.exception))
        self.assertEqual(ctx.exception.code, "no-torch")

    def test_bad_arguments(self):
        with self.assertRaises(kg_common.ProbeError):
            throughput_bench.main(["--dtype", "int8"])
        with self.assertRaises(kg_common.ProbeError):
            throughput_bench.parse_args(["--layers", "x"])

    def test_human_numbers(self):
        self.assertEqual(throughput_bench.human(12800), "12.8K")
        self.assertEqual(throughput_bench.human(4321000), "4.3M")
        self.assertEqual(throughput_bench.human(512), "512")


if __name__ == "__main__":
    unittest.main()
