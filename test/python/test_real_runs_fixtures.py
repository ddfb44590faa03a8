"""The real runs (test/fixtures/real/runs/ and regressions/, written on the GPU box by scripts/fixtures/real_runs.py)
agree with their own truth.json: the logs cover the steps it names, the restart is really in them, the checkpoints
and launch records are there, mtimes and git history come back. A check of the fixtures, not of Known Good."""
import csv
import glob
import json
import os
import struct
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import metrics_tb  # noqa: E402
import real_runs_fixture as fx  # noqa: E402
from kg_test_env import needs_git  # noqa: E402

RESTART = 600
STEPS = 1000


def event_steps(path):
    """(wall_time, step, tags) of every event of a TensorBoard file (TFRecord framing, the project's decoder)."""
    out = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos + 12 <= len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        start = pos + 12
        wall, step, values = metrics_tb.decode_event(data, start, start + n, {})
        out.append((wall, step, [t for t, _ in values]))
        pos = start + n + 4
    return out


def all_runs():
    return [(s, r) for s in fx.SETS for r in fx.run_names(s)]


class Truth(unittest.TestCase):
    def test_every_set_under_the_real_fixtures_is_one_these_tests_check(self):
        sets = sorted(n for n in os.listdir(fx.REAL) if os.path.isfile(os.path.join(fx.REAL, n, "mtimes.json")))
        self.assertEqual(sets, sorted(fx.SETS))

    def test_every_run_has_its_truth(self):
        for s in fx.SETS:
            d = fx.set_dir(s)
            folders = sorted(n for n in os.listdir(d) if os.path.isdir(os.path.join(d, n)) and n != "data")
            self.assertEqual(folders, fx.run_names(s), s)
        for s, r in all_runs():
            t = fx.truth(s, r)
            self.assertEqual((t["name"], t["set"], t["steps"]), (r, s, STEPS))
            self.assertIn(t["library"], ("plain", "lightning", "hf"))
            self.assertEqual([x["step"] for x in t["restarts"]], [RESTART])
            l1, l2 = t["launches"]
            self.assertLess(l1["end_unix"], l2["start_unix"] + 1e-3, r)
            self.assertEqual(l2["exit_code"], 0, r)
            sp = t["speed"]
            self.assertIsNotNone(sp["ratio"], r)
            self.assertEqual(t["regression"], sp["ratio"] < 0.9, r)
            before_after = sp[sp["metric"]]
            self.assertAlmostEqual(before_after["after"] / before_after["before"], sp["ratio"], places=3)
            if t["change"] is not None:
                self.assertTrue({"kind", "key", "where", "before", "after"} <= set(t["change"]), r)
            committed = {v: k for k, v in fx.COMMITTED_AS.items()}
            for f in t["files"]:
                self.assertTrue(os.path.isfile(os.path.join(fx.set_dir(s), r, committed.get(f, f))), (r, f))

    def test_the_corpus_is_what_issue_23_asks_for(self):
        runs = [fx.truth("regressions", r) for r in fx.run_names("regressions")]
        self.assertGreaterEqual(len(runs), 12)
        self.assertEqual({t["library"] for t in runs}, {"plain", "lightning", "hf"})
        self.assertGreaterEqual(sum(t["change"] is None for t in runs), 2)
        recorded = sum(t["launch_recorded"] for t in runs)
        self.assertLessEqual(abs(recorded - len(runs) / 2), 0.5)  # half of them, 7 of 13
        kinds = {t["change"]["kind"] for t in runs if t["change"]}
        for k in ("dataset", "num_workers", "precision", "torch.compile", "batch-size", "gradient-checkpointing",
                  "launch-env", "host-sync", "comment-only", "run-name"):
            self.assertIn(k, kinds)

    def test_the_whole_runs_set_has_each_library_and_a_steady_run(self):
        runs = [fx.truth("runs", r) for r in fx.run_names("runs")]
        self.assertEqual({t["library"] for t in runs}, {"plain", "lightning", "hf"})
        self.assertTrue(any(not t["regression"] and t["change"] is None for t in runs))
        self.assertTrue(any(t["regression"] for t in runs))


class Logs(unittest.TestCase):
    def test_plain_loops_log_every_step_window_with_the_restart_going_back(self):
        for s, r in all_runs():
            t = fx.truth(s, r)
            if t["library"] != "plain":
                continue
            d = os.path.join(fx.set_dir(s), r)
            with open(os.path.join(d, "train_log.jsonl")) as f:
                rows = [json.loads(x) for x in f]
            train = [x["step"] for x in rows if "tok_s" in x]
            back = [i for i in range(1, len(train)) if train[i] <= train[i - 1]]
            self.assertEqual(len(back), 1, r)  # one restart: the step goes back once
            first, second = train[:back[0]], train[back[0]:]
            self.assertEqual(first, list(range(10, first[-1] + 1, 10)), r)
            self.assertGreaterEqual(first[-1], RESTART + 10, r)  # killed past the checkpoint it resumes from
            self.assertEqual(second, list(range(RESTART + 10, STEPS + 1, 10)), r)
            evals = sorted({x["step"] for x in rows if "eval_loss" in x})
            self.assertEqual(evals, [250, 500, 750, 1000], r)
            ckpts = sorted(int(os.path.basename(p)[5:-3]) for p in glob.glob(os.path.join(d, "ckpt", "step_*.pt")))
            self.assertEqual(ckpts, list(range(100, STEPS + 1, 100)), r)

    def test_lightning_runs_have_version_0_to_the_restart_and_version_1_after(self):
        for s, r in all_runs():
            if fx.truth(s, r)["library"] != "lightning":
                continue
            d = os.path.join(fx.set_dir(s), r, "lightning_logs")
            steps = []
            for v in ("version_0", "version_1"):
                with open(os.path.join(d, v, "metrics.csv")) as f:
                    steps.append(sorted({int(row["step"]) for row in csv.DictReader(f) if row.get("train_loss")}))
                self.assertTrue(os.path.isfile(os.path.join(d, v, "hparams.yaml")))
            self.assertEqual(steps[0], list(range(9, RESTART, 10)), r)
            self.assertEqual(steps[1], list(range(RESTART + 9, STEPS, 10)), r)
            ck = [sorted(int(p.rsplit("step=", 1)[1][:-5]) for p in glob.glob(os.path.join(d, v, "checkpoints", "*")))
                  for v in ("version_0", "version_1")]
            self.assertEqual(ck, [list(range(100, RESTART + 1, 100)), list(range(RESTART + 100, STEPS + 1, 100))])

    def test_hf_runs_have_one_event_file_a_launch_and_no_speed_column(self):
        for s, r in all_runs():
            if fx.truth(s, r)["library"] != "hf":
                continue
            d = os.path.join(fx.set_dir(s), r)
            files = sorted(glob.glob(os.path.join(d, "runs", "*", "events.out.tfevents.*")))
            self.assertEqual(len(files), 2, r)
            halves = [[e for e in event_steps(p) if "train/loss" in e[2]] for p in files]
            self.assertEqual([e[1] for e in halves[0]], list(range(10, RESTART + 1, 10)), r)
            self.assertEqual([e[1] for e in halves[1]], list(range(RESTART + 10, STEPS + 1, 10)), r)
            self.assertGreater(halves[1][0][0], halves[0][-1][0])
            tags = {t for p in files for e in event_steps(p) for t in e[2]}
            self.assertFalse([t for t in tags if "per_second" in t and not t.startswith("train/train_")
                              and not t.startswith("eval/")], r)
            with open(os.path.join(d, "checkpoint-1000", "trainer_state.json")) as f:
                state = json.load(f)
            logged = [h["step"] for h in state["log_history"] if "loss" in h]
            self.assertEqual(logged, list(range(10, STEPS + 1, 10)), r)


class Records(unittest.TestCase):
    def test_recorded_runs_have_one_record_a_launch_and_the_others_none(self):
        for s, r in all_runs():
            t = fx.truth(s, r)
            p = os.path.join(fx.set_dir(s), r, ".known-good", "launches.jsonl")
            if not t["launch_recorded"]:
                self.assertFalse(os.path.exists(p), r)
                continue
            with open(p) as f:
                recs = [json.loads(x) for x in f]
            self.assertEqual(len(recs), 2, r)
            for rec, launch in zip(recs, t["launches"]):
                self.assertEqual(rec["argv"], launch["argv"][launch["argv"].index("--") + 1:], r)
                self.assertEqual(rec["errors"], [], r)
                self.assertEqual(rec["gpus"]["gpus"][0]["name"], "NVIDIA H200")
            if t["change"] and t["change"]["where"] == "env":
                key = t["change"]["key"]
                self.assertEqual([rec["env"].get(key) for rec in recs], [None, t["change"]["after"]], r)

    def test_checkpoints_are_stripped(self):
        for s in fx.SETS:
            for p in glob.glob(os.path.join(fx.set_dir(s), "*", "**", "*"), recursive=True):
                if p.endswith((".pt", ".ckpt", ".pth", ".safetensors")):
                    self.assertLess(os.path.getsize(p), 64 * 1024, p)


class Restored(unittest.TestCase):
    def test_mtimes_come_back_in_the_order_the_run_wrote_them(self):
        d = fx.materialize("regressions")
        with open(os.path.join(d, "mtimes.json")) as f:
            manifest = json.load(f)
        for rel, ns in manifest.items():
            p = os.path.join(d, *fx.real_path(rel).split("/"))
            self.assertEqual(os.lstat(p).st_mtime_ns, ns, rel)
        for r in fx.run_names("regressions"):
            t = fx.truth("regressions", r)
            if t["library"] != "plain":
                continue
            times = [os.path.getmtime(os.path.join(d, r, "ckpt", "step_%d.pt" % s)) for s in range(100, 1001, 100)]
            self.assertEqual(times, sorted(times), r)
            self.assertLess(times[5], t["launches"][0]["end_unix"])  # step 600: written by the first launch
            self.assertGreater(times[6], t["launches"][1]["start_unix"])

    @needs_git
    def test_each_run_is_its_own_git_checkout_with_a_commit_per_changed_launch(self):
        d = fx.materialize("regressions")
        for r in fx.run_names("regressions"):
            t = fx.truth("regressions", r)
            run = os.path.join(d, r)
            head = subprocess.run(["git", "-C", run, "rev-parse", "HEAD"], stdout=subprocess.PIPE,
                                  check=True).stdout.decode().strip()
            count = subprocess.run(["git", "-C", run, "rev-list", "--count", "HEAD"], stdout=subprocess.PIPE,
                                   check=True).stdout.decode().strip()
            status = subprocess.run(["git", "-C", run, "status", "--porcelain", "--untracked-files=no"],
                                    stdout=subprocess.PIPE, check=True).stdout
            self.assertEqual((head, int(count), status), (t["git"]["launch2"], t["git"]["commits"], b""), r)
            self.assertEqual(int(count), 2 if t["change"] and t["change"]["where"] == "code" else 1, r)


if __name__ == "__main__":
    unittest.main()
