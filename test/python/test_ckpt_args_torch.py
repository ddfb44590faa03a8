"""Tests of python/ckpt_args_torch.py (the knownGood.allowTorchLoad fallback) and of ckpt_args.py --stat.

The torch fallback runs under a torch interpreter (Debian's /usr/bin/python3, or KG_TORCH_PYTHON on a GPU box) as a
subprocess, the way the extension runs it one-shot; --stat runs in-process (stdlib).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PY_DIR = os.path.join(HERE, "..", "..", "python")
sys.path.insert(0, PY_DIR)

import ckpt_args  # noqa: E402
import kg_common  # noqa: E402

from kg_test_env import TORCH_PY, needs_torch  # noqa: E402


def _run_torch_probe(*argv):
    env = dict(os.environ, PYTHONPATH=PY_DIR)
    r = subprocess.run([TORCH_PY, os.path.join(PY_DIR, "ckpt_args_torch.py")] + list(argv),
                       capture_output=True, text=True, env=env, timeout=300)
    return r.returncode, r.stdout, r.stderr


class StatTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_file_size_and_mtime(self):
        p = os.path.join(self.tmp, "step_1.pt")
        with open(p, "wb") as f:
            f.write(b"x" * 123)
        os.utime(p, (1000.5, 1000.5))
        self.assertEqual(ckpt_args.main([p, "--stat"]), {"path": p, "bytes": 123, "mtime": 1000.5, "dir": False})

    def test_folder_takes_the_newest_file_it_reads(self):
        d = os.path.join(self.tmp, "checkpoint-600")
        os.mkdir(d)
        for name, t in (("trainer_state.json", 2000.0), ("config.json", 1500.0), ("model.safetensors", 9000.0)):
            with open(os.path.join(d, name), "w") as f:
                f.write("{}")
            os.utime(os.path.join(d, name), (t, t))
        os.utime(d, (100.0, 100.0))
        r = ckpt_args.main([d, "--stat"])
        # the weights file is not what the args come from: its newer mtime does not count
        self.assertEqual((r["mtime"], r["bytes"], r["dir"]), (2000.0, 4, True))
        os.utime(os.path.join(d, "config.json"), (3000.0, 3000.0))
        self.assertEqual(ckpt_args.main([d, "--stat"])["mtime"], 3000.0)

    def test_missing(self):
        with self.assertRaises(kg_common.ProbeError) as cm:
            ckpt_args.main([os.path.join(self.tmp, "nope.pt"), "--stat"])
        self.assertEqual(cm.exception.code, "not-found")


@needs_torch
class TorchFallbackTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.ns = os.path.join(cls.tmp, "ns.pt")
        cls.plain = os.path.join(cls.tmp, "plain.pt")
        cls.marker = os.path.join(cls.tmp, "MARKER")
        cls.hostile = os.path.join(cls.tmp, "hostile.pt")
        script = (
            "import argparse, os, sys, torch\n"
            "d = sys.argv[1]\n"
            "torch.save({'args': argparse.Namespace(lr=0.1, bs=8), 'model': torch.nn.Linear(2, 3).state_dict(),"
            " 'step': 7}, os.path.join(d, 'ns.pt'))\n"
            # no floats: torch 1.13's weights_only unpickler has no BINFLOAT (torch 2.x reads floats too)
            "torch.save({'config': {'layers': 12, 'name': 'x'}, 'w': torch.zeros(10), 'global_step': 9},"
            " os.path.join(d, 'plain.pt'))\n"
            "class Evil:\n"
            "    def __reduce__(self):\n"
            "        return (os.system, ('touch ' + os.path.join(d, 'MARKER'),))\n"
            "torch.save({'args': {'lr': 1}, 'evil': Evil()}, os.path.join(d, 'hostile.pt'))\n"
        )
        r = subprocess.run([TORCH_PY, "-c", script, cls.tmp], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_weights_only_reads_plain_args(self):
        rc, out, err = _run_torch_probe(self.plain)
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        self.assertEqual(doc["format"], "torch-load")
        self.assertEqual(doc["key"], "config")
        self.assertEqual(doc["args"], {"layers": 12, "name": "x"})
        self.assertEqual(doc["step"], 9)
        self.assertEqual(doc["tensors"], {"count": 1, "bytes": 40})
        self.assertIn("weights_only=True", doc["warnings"][0])

    def test_weights_only_refuses_a_namespace_then_unsafe_reads_it(self):
        rc, out, err = _run_torch_probe(self.ns)
        self.assertEqual(rc, 2)
        self.assertIn("weights_only=True) refused", err)
        self.assertEqual(len(err.strip().splitlines()), 1)
        rc, out, err = _run_torch_probe(self.ns, "--unsafe")
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        self.assertEqual(doc["args"], {"lr": 0.1, "bs": 8})
        self.assertEqual(doc["argsType"], "argparse.Namespace")
        self.assertEqual(doc["tensors"], {"count": 2, "bytes": 36})
        self.assertIn("weights_only=False", doc["warnings"][0])

    def test_hostile_file_is_refused_without_unsafe_and_nothing_runs(self):
        rc, _out, err = _run_torch_probe(self.hostile)
        self.assertEqual(rc, 2)
        self.assertIn("refused", err)
        # The probe has exited (rc above) and started nothing: nothing of it can write the marker later.
        self.assertFalse(os.path.exists(self.marker))

    def test_missing_key(self):
        rc, _out, err = _run_torch_probe(self.plain, "--key", "nope")
        self.assertEqual(rc, 2)
        self.assertIn("no key nope", err)


if __name__ == "__main__":
    unittest.main()
