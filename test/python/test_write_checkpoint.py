"""scripts/demo/write_checkpoint.py writes checkpoints that real torch.load reads (Debian torch via /usr/bin/python3)."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts", "demo"))
sys.path.insert(0, os.path.join(ROOT, "python"))

import ckpt_args  # noqa: E402
import write_checkpoint as wc  # noqa: E402

from kg_test_env import TORCH_PY, needs_torch  # noqa: E402

# Loads each file with real torch and prints what it found, as JSON.
LOADER = r'''
import json, math, sys, torch
out = {}
def plain(v):
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, torch.Tensor):
        return {"dtype": str(v.dtype), "shape": list(v.shape), "sum": float(v.double().sum())}
    if hasattr(v, "__dict__") and type(v).__name__ == "Namespace":
        return {"Namespace": plain(vars(v))}
    return v
def wo_supports_floats(tmp):
    # torch 1.13's weights_only unpickler lacks BINFLOAT even for what torch itself writes
    p = tmp + "/probe-float.pt"
    torch.save({"x": 0.5}, p)
    try:
        torch.load(p, weights_only=True)
        return True
    except Exception:
        return False
tmp = sys.argv[1]
out["torch"] = torch.__version__
out["woFloats"] = wo_supports_floats(tmp)
for path in sys.argv[2:]:
    r = {}
    try:
        c = torch.load(path, map_location="cpu", weights_only=False)
        r["full"] = {"args": plain(c.get("args")), "step": c.get("step"), "model": plain(c["model"]),
                     "metadata": plain(getattr(c["model"], "_metadata", None)),
                     "optimizer": plain(c.get("optimizer"))}
    except Exception as e:
        r["fullError"] = "%s: %s" % (type(e).__name__, e)
    try:
        c = torch.load(path, map_location="cpu", weights_only=True)
        r["weightsOnly"] = {"args": plain(c.get("args")), "model": plain(c["model"])}
    except Exception as e:
        r["weightsOnlyError"] = "%s: %s" % (type(e).__name__, str(e)[-200:])
    out[path] = r
print(json.dumps(out))
'''


@needs_torch
class RealTorchReadsIt(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kg-write-ckpt-")
        p = lambda n: os.path.join(cls.tmp, n)  # noqa: E731
        cls.files = {
            "dict": wc.write_checkpoint(p("dict.pt"), args={"lr": 0.01, "batch_size": 32, "name": "a"}, step=600),
            "ns": wc.write_checkpoint(p("ns.pt"), args=argparse.Namespace(lr=3e-4, name="b"), step=690),
            # dict args of ints and strings, no optimizer floats: what torch 1.13's weights_only can read
            "wo": wc.write_checkpoint(p("wo.pt"), args={"batch_size": 32, "name": "c", "flags": [True, False]},
                                      step=5, optimizer=False,
                                      tensors={"w": wc.Tensor((2, 3), data=[1, 2, 3, 4, 5, 6]),
                                               "i": wc.Tensor((4,), "int64", data=[1, 2, 3, 4]),
                                               "h": wc.Tensor((2,), "float16", data=[0.5, 1.5])}),
            "big": wc.write_checkpoint(p("big.pt"), args={"lr": 0.5},
                                       tensors={"blob": wc.Tensor((3 * (1 << 20) // 4,))}, step=1),
        }
        loader = p("load.py")
        with open(loader, "w") as f:
            f.write(LOADER)
        r = subprocess.run([TORCH_PY, loader, cls.tmp] + list(cls.files.values()), capture_output=True, text=True,
                           timeout=300)
        if r.returncode != 0:
            raise RuntimeError(r.stderr[-2000:])
        cls.out = json.loads(r.stdout)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def loaded(self, name):
        return self.out[self.files[name]]

    def test_zip_layout(self):
        with zipfile.ZipFile(self.files["dict"]) as zf:
            names = zf.namelist()
            self.assertIn("dict/data.pkl", names)
            self.assertEqual(zf.read("dict/version"), b"3\n")
            self.assertEqual(zf.read("dict/byteorder"), b"little")
            self.assertTrue(any(n.startswith("dict/data/") for n in names))
            for info in zf.infolist():  # members aligned to 64 bytes as torch writes them
                header_len = 30 + len(info.filename.encode()) + len(info.extra)
                self.assertEqual((info.header_offset + header_len) % 64, 0, info.filename)

    def test_full_load_dict_args(self):
        r = self.loaded("dict")
        self.assertNotIn("fullError", r)
        full = r["full"]
        self.assertEqual(full["args"], {"lr": 0.01, "batch_size": 32, "name": "a"})
        self.assertEqual(full["step"], 600)
        self.assertEqual(full["model"]["encoder.weight"]["shape"], [8, 4])
        self.assertEqual(full["model"]["encoder.weight"]["dtype"], "torch.float32")
        self.assertEqual(full["metadata"], {"": {"version": 1}})
        self.assertEqual(full["optimizer"]["param_groups"][0]["lr"], 0.01)
        self.assertEqual(full["optimizer"]["state"]["0"]["exp_avg"]["shape"], [8, 4])

    def test_full_load_namespace_args(self):
        full = self.loaded("ns")["full"]
        self.assertEqual(full["args"], {"Namespace": {"lr": 3e-4, "name": "b"}})
        self.assertEqual(full["step"], 690)

    def test_values_round_trip(self):
        full = self.loaded("wo")["full"]
        self.assertEqual(full["model"]["w"], {"dtype": "torch.float32", "shape": [2, 3], "sum": 21.0})
        self.assertEqual(full["model"]["i"], {"dtype": "torch.int64", "shape": [4], "sum": 10.0})
        self.assertEqual(full["model"]["h"], {"dtype": "torch.float16", "shape": [2], "sum": 2.0})

    def test_weights_only(self):
        r = self.loaded("wo")
        self.assertNotIn("weightsOnlyError", r)
        self.assertEqual(r["weightsOnly"]["args"], {"batch_size": 32, "name": "c", "flags": [True, False]})
        self.assertEqual(r["weightsOnly"]["model"]["w"]["sum"], 21.0)
        if self.out["woFloats"]:
            # this torch reads floats with weights_only: so must the dict-args checkpoint with its optimizer
            self.assertNotIn("weightsOnlyError", self.loaded("dict"))
            self.assertEqual(self.loaded("dict")["weightsOnly"]["args"]["lr"], 0.01)
        # an argparse.Namespace is refused by weights_only: the reason Known Good reads args without torch
        self.assertIn("weightsOnlyError", self.loaded("ns"))

    def test_big_tensor_streamed(self):
        full = self.loaded("big")["full"]
        self.assertEqual(full["model"]["blob"]["shape"], [3 * (1 << 20) // 4])
        self.assertEqual(full["model"]["blob"]["sum"], 0.0)
        self.assertGreater(os.path.getsize(self.files["big"]), 3 * (1 << 20))

    def test_probe_reads_it(self):
        doc = ckpt_args.main([self.files["ns"]])
        self.assertEqual(doc["args"], {"lr": 3e-4, "name": "b"})
        self.assertEqual(doc["argsType"], "argparse.Namespace")
        self.assertEqual(doc["step"], 690)


class WithoutTorch(unittest.TestCase):
    def test_script_and_errors(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "step_600.pt")
            r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "demo", "write_checkpoint.py"), path,
                                "--step", "600", "--lr", "0.05", "--namespace"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            doc = ckpt_args.main([path])
            self.assertEqual(doc["args"]["lr"], 0.05)
            self.assertEqual(doc["argsType"], "argparse.Namespace")
            self.assertEqual(doc["step"], 600)
            self.assertEqual(doc["tensors"]["count"], 4 + 8)
            self.assertEqual(sorted(os.listdir(d)), ["step_600.pt"])  # no temp file left
        with self.assertRaises(ValueError):
            wc.Tensor((2,), data=[1.0]).chunks().__next__()
        with self.assertRaises(ValueError):
            wc.Tensor((2,), "complex7")


if __name__ == "__main__":
    unittest.main()
