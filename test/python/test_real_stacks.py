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


import metrics_reduce  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import shutil  # noqa: E402

WRITER = os.path.join(HERE, "..", "..", "scripts", "fixtures", "tfevents_writer.py")


def reduce(path, *args):
    return metrics_reduce.main([os.path.join(REAL, path)] + list(args))


def series(doc):
    """key -> [(x, last value)] of a reduction whose buckets each hold one point."""
    return {s["key"]: list(zip(s["x"], s["last"])) for s in doc["series"]}


def close(a, b, rel=1e-6):
    return abs(a - b) <= rel * max(1.0, abs(b))


class MetricsFormatsTest(unittest.TestCase):
    def test_lightning_csv_logger(self):
        for vdir, v in TRUTH["lightning"]["versions"].items():
            doc = reduce(vdir + "/metrics.csv")
            self.assertEqual(doc["format"], "csv")
            got = series(doc)
            rows = v["metrics_csv_rows"]
            self.assertEqual(doc["lines"], len(rows))
            for key in rows[0]:
                if key == "step":
                    continue
                want = [(float(r["step"]), float(r[key])) for r in rows if r.get(key) not in (None, "")]
                self.assertEqual(len(got[key]), len(want), key)
                for (x, y), (wx, wy) in zip(got[key], want):
                    self.assertEqual(x, wx)
                    self.assertTrue(close(y, wy), (key, y, wy))

    def test_hf_trainer_state_log_history(self):
        for ck, v in TRUTH["hf_trainer"]["checkpoints"].items():
            doc = reduce(ck + "/trainer_state.json")
            self.assertEqual(doc["format"], "hf-trainer-state")
            got = series(doc)
            for key in ("loss", "learning_rate", "grad_norm"):
                want = [(float(e["step"]), float(e[key])) for e in v["log_history"] if key in e]
                self.assertEqual([x for x, _ in got[key]], [x for x, _ in want], key)
                self.assertTrue(all(close(a[1], b[1]) for a, b in zip(got[key], want)), key)

    def test_tensorboard_matches_event_accumulator(self):
        # Every event file the libraries wrote: torch's SummaryWriter (with histograms and text between the
        # scalars), TF2-style tensor summaries, Lightning's and the HF Trainer's loggers.
        for rel, v in TRUTH["tensorboard"].items():
            doc = reduce(rel, "--verify")
            self.assertEqual(doc["format"], "tensorboard")
            self.assertEqual(doc["tensorboard"]["crcFailed"], 0)
            self.assertEqual(doc["nextOffset"], v["size"])
            want = dict(v["scalars"])
            want.update(v.get("tensors") or {})
            got = series(doc)
            self.assertEqual(set(got), set(want), rel)
            for tag, points in want.items():
                # Points at the same step are one bucket: the last one written wins, as in the jsonl reduction.
                last = {}
                for _wall, step, value in points:
                    last[float(step)] = value
                self.assertEqual([x for x, _ in got[tag]], sorted(last), (rel, tag))
                for x, y in got[tag]:
                    self.assertTrue(close(y, last[x]), (rel, tag, x, y, last[x]))

    def test_tensorboard_follow_and_a_record_being_written(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, True)
        path = os.path.join(tmp, "events.out.tfevents.1.host")
        subprocess.run([sys.executable, WRITER, path, "--steps", "100"], check=True)
        with open(path, "rb") as f:
            whole = f.read()
        cut = len(whole) - 30  # the last record half written
        with open(path, "wb") as f:
            f.write(whole[:cut])
        first = metrics_reduce.main([path])
        self.assertLess(first["nextOffset"], cut)
        with open(path, "wb") as f:
            f.write(whole)
        more = metrics_reduce.main([path, "--offset", str(first["nextOffset"])])
        self.assertEqual(more["nextOffset"], len(whole))
        self.assertEqual(first["lines"] + more["lines"], 400)
        # A flipped byte inside a record: counted, the rest still read.
        bad = bytearray(whole)
        bad[len(whole) // 2] ^= 0xFF
        with open(path, "wb") as f:
            f.write(bad)
        doc = metrics_reduce.main([path, "--verify"])
        self.assertGreaterEqual(doc["tensorboard"]["corrupt"] + doc["tensorboard"]["crcFailed"], 1)
        self.assertGreaterEqual(doc["lines"], 390)

    def test_tensorboard_preview_samples_a_large_file(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, True)
        path = os.path.join(tmp, "events.out.tfevents.2.host")
        subprocess.run([sys.executable, WRITER, path, "--steps", "20000", "--drop-at", "12000"], check=True)
        doc = metrics_reduce.main([path, "--preview-bytes", "65536"])
        self.assertIsNotNone(doc["sample"])
        self.assertLess(doc["bytesRead"], os.path.getsize(path) // 4)
        tok = series(doc)["train/tok_per_s"]
        self.assertLess(tok[0][0], 2000)
        self.assertGreater(tok[-1][0], 18000)
        self.assertGreater(tok[0][1], 12000)
        self.assertLess(tok[-1][1], 5000)

    def test_a_file_of_another_kind_is_named_not_plotted_empty(self):
        with self.assertRaises(metrics_reduce.kg_common.ProbeError) as e:
            reduce("torch/run-plain/step_100.pt", "--format", "jsonl")
        self.assertIn("zip archive", str(e.exception))
        with self.assertRaises(metrics_reduce.kg_common.ProbeError) as e:
            reduce("hf/run-hf/checkpoint-4/config.json", "--format", "hf-trainer-state")
        self.assertIn("without a log_history", str(e.exception))
