"""The probes against artifacts written by the real libraries (test/fixtures/real/, ground truth from the libraries
themselves: scripts/fixtures/real_artifacts.py, run on the GPU box)."""
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.join(HERE, "..", "..", "python")
REAL = os.path.join(HERE, "..", "fixtures", "real")
sys.path.insert(0, PYDIR)

import list_runs  # noqa: E402

with open(os.path.join(REAL, "ground_truth.json")) as _f:
    TRUTH = json.load(_f)


def find(entry, rel):
    """The entry at '/'-joined rel below entry."""
    for c in entry.get("children") or ():
        if c["path"] == rel:
            return c
        if rel.startswith(c["path"] + "/"):
            return find(c, rel)
    raise AssertionError("%s not listed" % rel)


def listing(sub, **kw):
    root = list_runs.list_root(os.path.join(REAL, sub), kw.get("depth", list_runs.DEFAULT_DEPTH),
                               list_runs.DEFAULT_MAX_ENTRIES, False)
    return root


class ListingTest(unittest.TestCase):
    def test_lightning_checkpoints_found_at_the_default_depth(self):
        # Was "no checkpoints found; 4 other files, 5 folders": Lightning writes version_N/checkpoints/*.ckpt.
        for sub in ("lightning", "lightning/lightning_logs", "."):
            res = listing(sub)
            self.assertEqual(res["status"], "ok", (sub, res["message"]))
        res = listing("lightning")
        truth = TRUTH["lightning"]["versions"]
        for vdir, v in truth.items():
            rel = os.path.relpath(os.path.join(REAL, vdir), os.path.join(REAL, "lightning"))
            version = find(res["entry"], rel)
            self.assertEqual(version.get("layout"), "lightning-version")
            ckpts = [c for c in find(version, rel + "/checkpoints")["children"] if c["role"] == "checkpoint"]
            want = sorted(v["checkpoints"].items(), key=lambda kv: kv[1]["global_step"])
            self.assertEqual([c["step"] for c in ckpts], [w["global_step"] for _, w in want])
            self.assertEqual({c["format"] for c in ckpts}, {"lightning"})
            logs = {c["name"]: c.get("format") for c in version["children"] if c["role"] == "metrics"}
            self.assertEqual(logs["metrics.csv"], "csv")
            self.assertIn("tensorboard", logs.values())
        self.assertEqual(res["counts"]["checkpoints"], 6)

    def test_each_stack_named_for_what_it_is(self):
        res = listing(".")
        want = {
            "accelerate/run-auto/checkpoints/checkpoint_0": ("accelerate", 0),
            "accelerate/run-named/step_100": ("accelerate", 100),
            "peft/run-lora/checkpoint-20": ("peft", 20),
            "hf/run-hf/checkpoint-4": ("hf", 4),
            "dcp/run-dcp/step_20": ("dcp", 20),
            "torch/run-plain/step_200.pt": ("torch", 200),
        }
        for rel, (fmt, step) in want.items():
            e = find(res["entry"], rel)
            self.assertEqual((e["role"], e.get("format"), e.get("step")), ("checkpoint", fmt, step), rel)
        self.assertTrue(find(res["entry"], "accelerate/run-auto/checkpoints/checkpoint_1").get("stepIsIndex"))
        self.assertNotIn("stepIsIndex", find(res["entry"], "accelerate/run-named/step_100"))
        # The HF Trainer's TensorBoard log sits in runs/<date>_<host>/ below the run: found with the run's parent
        # as the root.
        hf_tb = [os.path.relpath(p, "hf") for p in TRUTH["hf_trainer"]["tensorboard_files"]]
        self.assertEqual(len(hf_tb), 1)
        self.assertEqual(find(listing("hf")["entry"], hf_tb[0])["format"], "tensorboard")
        self.assertEqual(find(res["entry"], "hf/run-hf/checkpoint-4/trainer_state.json")["format"], "hf-trainer-state")


if __name__ == "__main__":
    unittest.main()
