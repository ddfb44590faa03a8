"""scripts/fixtures/real_runs.py, the writer of the real runs, checked here on the CPU: its stripping keeps where each
tensor was stored (cpu, cuda:0) and the optimizer state, and a --smoke set of regressions2's runs (tiny, on the CPU)
comes out packed, with the uncommitted edit, the two commits, the mtimes, the launch records and the truth that the
set written on the GPU box will have. The same checks run on that set once it is committed (CommittedRegressions2).
A check of the fixtures' writer, not of Known Good."""
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
SCRIPT = os.path.join(REPO, "scripts", "fixtures", "real_runs.py")
sys.path.insert(0, HERE)

import real_runs_fixture as fx  # noqa: E402
from kg_test_env import TORCH_PY, needs_git, needs_torch  # noqa: E402

SMOKE_RUNS = ("plain-uncommitted-autocast", "plain-docs-beside-code")
ALL_RUNS = ("plain-uncommitted-autocast", "plain-docs-beside-code", "plain-lr-inert", "plain-resume-gpu",
            "plain-resume-cpu", "plain-lr-gpu-resume")


def git(run, *args):
    return subprocess.run(["git", "-C", run] + list(args), stdout=subprocess.PIPE, check=True).stdout.decode()


def tensors(obj, path=""):
    """(path, StoredTensor) of every tensor in a checkpoint's tree."""
    if isinstance(obj, fx.StoredTensor):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            for x in tensors(v, "%s/%s" % (path, k)):
                yield x
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            for x in tensors(v, "%s/%d" % (path, i)):
                yield x


# A checkpoint as a GPU run writes it: the model and AdamW's moments in CUDA storages, param 0's step counter on the
# GPU (resumed with map_location="cuda"), param 1's on the CPU. Written on the CPU: a storage registered below is
# recorded as cuda:0, the very record torch writes for a CUDA tensor.
WRITE_GPU_CHECKPOINT = textwrap.dedent("""
    import argparse, sys
    import torch
    cuda = {}
    torch.serialization.register_package(2, lambda s: cuda.get(s._cdata), lambda s, loc: None)
    def on_gpu(t):
        s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()._storage
        cuda[s._cdata] = "cuda:0"
        return t
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for _ in range(7):
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
    sd = opt.state_dict()
    for st in sd["state"].values():
        on_gpu(st["exp_avg"]); on_gpu(st["exp_avg_sq"])
    sd["state"][0]["step"] = on_gpu(sd["state"][0]["step"].clone())
    torch.save({"step": 7, "args": argparse.Namespace(lr=3e-4),
                "model": {k: on_gpu(v) for k, v in model.state_dict().items()}, "optimizer": sd}, sys.argv[1])
""")


@needs_torch
class Stripping(unittest.TestCase):
    def test_a_stripped_checkpoint_keeps_each_location_the_optimizer_state_and_the_step_counters(self):
        d = tempfile.mkdtemp(prefix="kg-strip-")
        self.addCleanup(shutil.rmtree, d)
        p = os.path.join(d, "ckpt", "step_7.pt")
        os.makedirs(os.path.dirname(p))
        subprocess.run([TORCH_PY, "-c", WRITE_GPU_CHECKPOINT, p], check=True)
        before, _ = fx.read_checkpoint(p)
        size = os.path.getsize(p)
        strip = ("import sys; sys.path.insert(0, sys.argv[1]); import real_runs; "
                 "real_runs.strip_checkpoints(sys.argv[2])")
        subprocess.run([TORCH_PY, "-c", strip, os.path.dirname(SCRIPT), d], check=True)
        after, value = fx.read_checkpoint(p)

        where = {path: (t.location, t.storage_type) for path, t in tensors(before)}
        self.assertEqual({path: (t.location, t.storage_type) for path, t in tensors(after)}, where)
        self.assertEqual(where["/optimizer/state/0/step"], ("cuda:0", "FloatStorage"))
        self.assertEqual(where["/optimizer/state/1/step"], ("cpu", "FloatStorage"))
        self.assertEqual(where["/model/weight"][0], "cuda:0")
        state = after["optimizer"]["state"]
        self.assertEqual(sorted(state), [0, 1])
        self.assertEqual([sorted(s) for s in state.values()], [["exp_avg", "exp_avg_sq", "step"]] * 2)
        self.assertEqual([value(s["step"]) for s in state.values()], [7.0, 7.0])
        self.assertEqual(after["optimizer"]["param_groups"], before["optimizer"]["param_groups"])
        self.assertEqual((after["step"], after["args"].state), (7, {"lr": 3e-4}))
        for path, t in tensors(after):
            if t.size != ():
                self.assertEqual((t.size, t.numel), ((0,), 0), path)
        self.assertLess(os.path.getsize(p), size)


class Regressions2Checks(object):
    """What every regressions2 set holds, read from its runs' truth (schedule, launches) so that a --smoke set and the
    set written on the GPU box are held to the same."""

    set_dir = ""
    runs = ()

    def truth(self, run):
        with open(os.path.join(self.set_dir, run, "truth.json")) as f:
            return json.load(f)

    def test_each_run_has_its_truth_and_the_measured_regression(self):
        found = sorted(n for n in os.listdir(self.set_dir) if os.path.isfile(os.path.join(self.set_dir, n,
                                                                                           "truth.json")))
        self.assertEqual(found, sorted(self.runs))
        for r in self.runs:
            t = self.truth(r)
            self.assertEqual((t["name"], t["set"], t["library"]), (r, "regressions2", "plain"))
            self.assertEqual(len(t["restarts"]), 1, r)
            self.assertEqual(t["restarts"][0]["resumed_from"], "ckpt/step_%d.pt" % t["restarts"][0]["step"], r)
            sp = t["speed"]
            self.assertEqual(t["regression"], sp["ratio"] < 0.9, r)
            self.assertAlmostEqual(sp["tok_s"]["after"] / sp["tok_s"]["before"], sp["ratio"], places=3)
            for c in t["changes"]:
                self.assertTrue({"kind", "key", "where", "before", "after", "role"} <= set(c), (r, c))
            self.assertEqual(t["changes"][:1], [t["change"]] if t["change"] else [], r)
            self.assertEqual(t["resume"]["before"]["checkpoint"], t["restarts"][0]["resumed_from"], r)

    def test_the_uncommitted_edit_is_in_the_working_tree_dated_between_the_launches(self):
        r = "plain-uncommitted-autocast"
        t = self.truth(r)
        run = os.path.join(self.set_dir, r)
        self.assertEqual((t["change"]["key"], t["change"]["committed"], t["change"]["role"]), ("train.py", False,
                                                                                               "cause"))
        self.assertEqual((t["git"]["launch1"], t["git"]["commits"], t["git"]["uncommitted_at_launch2"]),
                         (t["git"]["launch2"], 1, ["train.py"]))
        self.assertEqual(git(run, "rev-parse", "HEAD").strip(), t["git"]["launch2"])
        self.assertEqual(git(run, "status", "--porcelain", "--untracked-files=no"), " M train.py\n")
        diff = git(run, "diff", "--", "train.py")
        self.assertIn("-    with torch.autocast(", diff)
        self.assertIn("+    logits = model(x)", diff)
        mtime = os.path.getmtime(os.path.join(run, "train.py"))
        l1, l2 = t["launches"]
        self.assertLess(l1["end_unix"], mtime)
        self.assertLess(mtime, l2["start_unix"])
        self.assertEqual(t["resume"]["map_location"], "cpu")
        with open(os.path.join(run, ".known-good", "launches.jsonl")) as f:
            recorded = [json.loads(x)["git"] for x in f]
        self.assertEqual([(g["dirty"], g["changedFiles"], g["head"]) for g in recorded],
                         [(False, [], t["git"]["launch1"]), (True, ["train.py"], t["git"]["launch1"])])

    def test_the_docs_commit_and_the_model_commit_are_two_commits_of_one_file_each(self):
        r = "plain-docs-beside-code"
        t = self.truth(r)
        run = os.path.join(self.set_dir, r)
        self.assertEqual(git(run, "status", "--porcelain", "--untracked-files=no"), "")
        self.assertEqual(git(run, "log", "--format=%s").splitlines(), [
            "README: how to resume a run", "Use the explicit attention (to look at the weights)",
            "Train a small GPT on owt samples"])
        self.assertEqual(t["git"]["commits_at_restart"], git(run, "rev-list", "--reverse", "HEAD~2..HEAD").split())
        self.assertEqual(git(run, "diff", "--numstat", "HEAD~1", "HEAD").split(), ["6", "0", "README.md"])
        self.assertEqual(git(run, "diff", "--numstat", "HEAD~2", "HEAD~1").split(), ["1", "1", "model.py"])
        self.assertIn("+        y = (q @ k.transpose(-2, -1)", git(run, "diff", "HEAD~2", "HEAD~1"))
        self.assertIn("from model import GPT\n", git(run, "show", "HEAD~2:train.py"))
        self.assertEqual([(c["key"], c["role"]) for c in t["changes"]], [("model.py", "cause"),
                                                                        ("README.md", "cosmetic")])
        for c in t["changes"]:
            committed_at = int(git(run, "log", "-1", "--format=%ct", "--", c["key"]))
            self.assertLess(t["launches"][0]["end_unix"], committed_at + 1)

    def test_checkpoints_are_stripped_and_say_where_the_step_counters_were(self):
        for r in self.runs:
            t = self.truth(r)
            save = t["schedule"]["save_every"]
            for side, step in (("before", t["restarts"][0]["step"]), ("after", t["restarts"][0]["step"] + save)):
                p = os.path.join(self.set_dir, r, "ckpt", "step_%d.pt" % step)
                self.assertLess(os.path.getsize(p), 16 * 1024, p)
                obj, value = fx.read_checkpoint(p)
                steps = [s["step"] for s in obj["optimizer"]["state"].values()]
                self.assertEqual(sorted({s.location for s in steps}), t["resume"][side]["optimizer_step"], (r, side))
                self.assertEqual({value(s) for s in steps}, {float(step)}, (r, side))
                self.assertEqual(sorted({x.location for _, x in tensors(obj["model"])}), t["resume"][side]["model"])
            if t["change"] and t["change"]["where"] == "restart":
                self.assertEqual((t["change"]["before"], t["change"]["after"]),
                                 tuple(", ".join(t["resume"][s]["optimizer_step"]) for s in ("before", "after")))

    def test_logs_restart_once_and_records_name_each_launch(self):
        for r in self.runs:
            t = self.truth(r)
            run = os.path.join(self.set_dir, r)
            every, restart = t["schedule"]["log_every"], t["restarts"][0]["step"]
            with open(os.path.join(run, "train_log.jsonl")) as f:
                train = [x["step"] for x in map(json.loads, f) if "tok_s" in x]
            back = [i for i in range(1, len(train)) if train[i] <= train[i - 1]]
            self.assertEqual(len(back), 1, r)
            self.assertGreater(train[back[0] - 1], restart, r)
            self.assertEqual(train[back[0]:], list(range(restart + every, t["steps"] + 1, every)), r)
            p = os.path.join(run, ".known-good", "launches.jsonl")
            self.assertEqual(os.path.exists(p), t["launch_recorded"], r)
            if t["launch_recorded"]:
                with open(p) as f:
                    recs = [json.loads(x) for x in f]
                self.assertEqual([x["argv"] for x in recs],
                                 [x["argv"][x["argv"].index("--") + 1:] for x in t["launches"]], r)


@needs_torch
@needs_git
class SmokeRegressions2(Regressions2Checks, unittest.TestCase):
    runs = SMOKE_RUNS

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kg-gen-")
        out = os.path.join(cls.tmp, "out")
        cls.pack = os.path.join(out, "regressions2.tar.gz")
        r = subprocess.run([TORCH_PY, SCRIPT, "--only", ",".join(SMOKE_RUNS), "--smoke", "--device", "cpu", "--root",
                            os.path.join(cls.tmp, "root"), "--pack", cls.pack], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        if r.returncode != 0:
            raise AssertionError("real_runs.py --smoke exited %d:\n%s" % (r.returncode, r.stdout.decode()[-4000:]))
        cls.out = out
        unpacked = os.path.join(cls.tmp, "unpacked")
        with tarfile.open(cls.pack) as tar:
            tar.extractall(unpacked)
        cls.set_dir = fx.materialize("regressions2", os.path.join(cls.tmp, "materialized"),
                                     os.path.join(unpacked, "regressions2"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_the_pack_holds_the_set_as_committed_and_the_logs_beside_it(self):
        self.assertEqual(sorted(os.listdir(self.out)), ["regressions2-logs.tar.gz", "regressions2.tar.gz"])
        with tarfile.open(self.pack) as tar:
            names = tar.getnames()
        self.assertTrue(all(n == "regressions2" or n.startswith("regressions2/") for n in names), names)
        self.assertFalse([n for n in names if "/.git" in n or ".." in n.split("/")])
        for r in SMOKE_RUNS:
            self.assertIn("regressions2/%s/truth.json" % r, names)
            self.assertIn("regressions2/%s/dot-git/HEAD" % r, names)
        self.assertIn("regressions2/mtimes.json", names)
        self.assertEqual(sorted(n.split("/")[2] for n in names if n.count("/") == 2 and "/data/" in n),
                         ["owt-128", "owt-256", "owt-512"])
        with tarfile.open(os.path.join(self.out, "regressions2-logs.tar.gz")) as tar:
            summary = json.load(tar.extractfile("stdout/summary.json"))
        self.assertEqual(sorted(summary["runs"]), sorted(SMOKE_RUNS))
        self.assertEqual([summary["runs"][r]["ok"] for r in SMOKE_RUNS], [True, True])

    def test_every_mtime_of_the_manifest_comes_back(self):
        with open(os.path.join(self.set_dir, "mtimes.json")) as f:
            manifest = json.load(f)
        self.assertIn("plain-uncommitted-autocast/train.py", manifest)
        for rel, ns in manifest.items():
            self.assertEqual(os.lstat(os.path.join(self.set_dir, *fx.real_path(rel).split("/"))).st_mtime_ns, ns, rel)


if "regressions2" in fx.SETS:
    @needs_git
    class CommittedRegressions2(Regressions2Checks, unittest.TestCase):
        runs = ALL_RUNS

        @classmethod
        def setUpClass(cls):
            cls.set_dir = fx.materialize("regressions2")

        def test_the_set_is_what_issue_32_asks_for(self):
            t = {r: self.truth(r) for r in ALL_RUNS}
            self.assertEqual(t["plain-resume-gpu"]["change"]["after"], "cuda:0")
            self.assertEqual(t["plain-lr-gpu-resume"]["change"]["after"], "cuda:0")
            for r in ("plain-lr-inert", "plain-resume-cpu", "plain-uncommitted-autocast", "plain-docs-beside-code"):
                self.assertEqual(t[r]["resume"]["after"]["optimizer_step"], ["cpu"], r)


if __name__ == "__main__":
    unittest.main()
