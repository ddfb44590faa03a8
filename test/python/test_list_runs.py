"""Tests of python/list_runs.py on real temp trees (real permissions, real odd names)."""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.join(HERE, "..", "..", "python")
sys.path.insert(0, PYDIR)

import list_runs  # noqa: E402

NOBODY = 65534


def write(path, data=b"x"):
    d = os.path.dirname(path)
    if d and not os.path.isdir(d):
        os.makedirs(d)
    with open(path, "wb") as f:
        f.write(data)


def find(entry, rel):
    """The entry at relative path `rel` (a '/'-joined string) below a root entry."""
    if rel == "":
        return entry
    for c in entry.get("children") or ():
        if c["path"] == rel:
            return c
        if rel.startswith(c["path"] + "/"):
            return find(c, rel)
    raise AssertionError("%r not listed; have %r" % (rel, [c["path"] for c in entry.get("children") or ()]))


def names(entry):
    return [c["name"] for c in entry.get("children") or ()]


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kg-list-runs-")
        # Readable by the unprivileged user of the permission tests.
        os.chmod(self.tmp, 0o755)
        self.root = os.path.join(self.tmp, "ckpts")
        os.mkdir(self.root)

    def tearDown(self):
        for dirpath, dirnames, _ in os.walk(self.tmp):
            for d in dirnames:
                try:
                    os.chmod(os.path.join(dirpath, d), 0o755)
                except OSError:
                    pass
        shutil.rmtree(self.tmp)

    def p(self, *parts):
        return os.path.join(self.root, *parts)

    def listing(self, *extra, **kw):
        roots = kw.get("roots") or [self.root]
        return list_runs.main(list(roots) + list(extra))

    def one(self, *extra):
        res = self.listing(*extra)["roots"][0]
        return res


class StepParsing(unittest.TestCase):
    def test_names(self):
        cases = {
            "step_690": (690, None),
            "step-9": (9, None),
            "step10": (10, None),
            "checkpoint-500": (500, None),
            "global_step500": (500, None),
            "epoch=3-step=1200.ckpt": (1200, 3),
            "iter_0000500": (500, None),
            "ckpt_1000.pt": (1000, None),
            "000200": (200, None),
            "checkpoint.pt": (None, None),
            "model-00001-of-00002.safetensors": (None, None),
            "train_log.jsonl": (None, None),
            "epoch_7": (None, 7),
        }
        for name, want in cases.items():
            self.assertEqual(list_runs.parse_step(name), want, name)

    def test_natural_order(self):
        got = sorted(["step_100", "step_10", "step_9", "step_1000", "step_2"], key=list_runs.natural_key)
        self.assertEqual(got, ["step_2", "step_9", "step_10", "step_100", "step_1000"])


class Layouts(Base):
    def test_step_folders_with_checkpoint_pt_sort_numerically(self):
        for s in (100, 9, 10, 1000, 2):
            write(self.p("run1", "step_%d" % s, "checkpoint.pt"), b"w" * s)
        res = self.one()
        self.assertEqual(res["status"], "ok")
        run = find(res["entry"], "run1")
        self.assertEqual(run["role"], "dir")
        self.assertEqual(names(run), ["step_2", "step_9", "step_10", "step_100", "step_1000"])
        ck = find(res["entry"], "run1/step_690".replace("690", "100"))
        self.assertEqual((ck["kind"], ck["role"], ck["step"], ck["format"], ck["size"]), ("dir", "checkpoint", 100, "step", 100))
        f = find(res["entry"], "run1/step_100/checkpoint.pt")
        self.assertEqual((f["kind"], f["role"], f["size"]), ("file", "weights", 100))
        self.assertEqual(res["counts"]["checkpoints"], 5)
        self.assertEqual(run["size"], 100 + 9 + 10 + 1000 + 2)

    def test_hugging_face_checkpoint(self):
        ck = self.p("hf-run", "checkpoint-500")
        write(os.path.join(ck, "config.json"), b"{}")
        write(os.path.join(ck, "trainer_state.json"), b'{"global_step": 500}')
        write(os.path.join(ck, "training_args.bin"), b"a" * 7)
        write(os.path.join(ck, "model.safetensors"), b"m" * 100)
        write(os.path.join(ck, "optimizer.pt"), b"o" * 50)
        e = find(self.one()["entry"], "hf-run/checkpoint-500")
        self.assertEqual((e["role"], e["format"], e["step"]), ("checkpoint", "hf", 500))
        self.assertEqual(e["size"], 2 + 20 + 7 + 100 + 50)
        roles = dict((c["name"], c["role"]) for c in e["children"])
        self.assertEqual(roles["model.safetensors"], "weights")
        self.assertEqual(roles["training_args.bin"], "weights")
        # The Trainer's log_history: a metrics log the dashboard reads (issue: real training stacks).
        self.assertEqual(roles["trainer_state.json"], "metrics")

    def test_hf_output_dir_with_final_model_is_a_run(self):
        out = self.p("hf-out")
        write(os.path.join(out, "config.json"), b"{}")
        write(os.path.join(out, "model.safetensors"), b"final")
        write(os.path.join(out, "checkpoint-100", "model.safetensors"), b"a")
        write(os.path.join(out, "checkpoint-100", "trainer_state.json"), b"{}")
        write(os.path.join(out, "checkpoint-200", "model.safetensors"), b"b")
        write(os.path.join(out, "checkpoint-200", "trainer_state.json"), b"{}")
        entry = self.one()["entry"]
        self.assertEqual(find(entry, "hf-out")["role"], "dir")
        self.assertEqual(find(entry, "hf-out/checkpoint-200")["role"], "checkpoint")
        self.assertEqual(find(entry, "hf-out/model.safetensors")["role"], "checkpoint")

    def test_hf_with_deepspeed_inside_is_one_checkpoint(self):
        ck = self.p("run", "checkpoint-500")
        write(os.path.join(ck, "trainer_state.json"), b"{}")
        write(os.path.join(ck, "global_step500", "mp_rank_00_model_states.pt"), b"m" * 10)
        write(os.path.join(ck, "global_step500", "zero_pp_rank_0_mp_rank_00_optim_states.pt"), b"o" * 20)
        res = self.one()
        e = find(res["entry"], "run/checkpoint-500")
        self.assertEqual(e["role"], "checkpoint")
        self.assertEqual(e["size"], 2 + 30)
        inner = find(res["entry"], "run/checkpoint-500/global_step500")
        self.assertEqual(inner["role"], "dir")
        self.assertEqual(res["counts"]["checkpoints"], 1)

    def test_deepspeed(self):
        write(self.p("ds", "global_step500", "mp_rank_00_model_states.pt"), b"m" * 10)
        write(self.p("ds", "global_step500", "zero_pp_rank_0_mp_rank_00_optim_states.pt"), b"o" * 20)
        write(self.p("ds", "latest"), b"global_step500")
        write(self.p("ds", "zero_to_fp32.py"), b"#")
        entry = self.one()["entry"]
        e = find(entry, "ds/global_step500")
        self.assertEqual((e["role"], e["format"], e["step"], e["size"]), ("checkpoint", "deepspeed", 500, 30))
        self.assertEqual(find(entry, "ds/latest")["role"], "other")

    def test_lightning_and_flat_files(self):
        for n in ("epoch=3-step=1200.ckpt", "last.ckpt", "model_step_50.pt", "weights.pth", "pytorch_model.bin",
                  "model.safetensors"):
            write(self.p("lit", n), b"x" * 3)
        entry = self.one()["entry"]
        lit = find(entry, "lit")
        self.assertEqual(lit["role"], "dir")
        for c in lit["children"]:
            self.assertEqual((c["kind"], c["role"]), ("file", "checkpoint"), c["name"])
        e = find(entry, "lit/epoch=3-step=1200.ckpt")
        self.assertEqual((e["step"], e["epoch"], e["format"]), (1200, 3, "lightning"))
        self.assertEqual(find(entry, "lit/model_step_50.pt")["step"], 50)
        self.assertEqual(find(entry, "lit/model.safetensors")["format"], "safetensors")

    def test_torch_distributed_checkpoint(self):
        write(self.p("dcp-run", "step_1000", ".metadata"), b"meta")
        write(self.p("dcp-run", "step_1000", "__0_0.distcp"), b"a" * 10)
        write(self.p("dcp-run", "step_1000", "__1_0.distcp"), b"b" * 10)
        # An unnamed folder is recognised by its content.
        write(self.p("dcp-run", "export", ".metadata"), b"meta")
        write(self.p("dcp-run", "export", "__0_0.distcp"), b"a")
        entry = self.one()["entry"]
        e = find(entry, "dcp-run/step_1000")
        self.assertEqual((e["role"], e["format"], e["size"]), ("checkpoint", "dcp", 24))
        self.assertEqual(find(entry, "dcp-run/step_1000/__1_0.distcp")["role"], "weights")
        self.assertEqual(find(entry, "dcp-run/export")["format"], "dcp")

    def test_step_folder_with_model_and_optim_subfolders(self):
        write(self.p("r", "step_1000", "model", ".metadata"), b"m")
        write(self.p("r", "step_1000", "model", "__0_0.distcp"), b"a" * 10)
        write(self.p("r", "step_1000", "optim", "__0_0.distcp"), b"b" * 20)
        res = self.one()
        e = find(res["entry"], "r/step_1000")
        self.assertEqual(e["role"], "checkpoint")
        self.assertEqual(find(res["entry"], "r/step_1000/model")["role"], "dir")
        self.assertEqual(e["size"], 31)
        self.assertEqual(res["counts"]["checkpoints"], 1)

    def test_folder_named_with_steps_holding_checkpoints_is_a_run(self):
        write(self.p("lr3e-4_steps10000", "step_500", "checkpoint.pt"))
        write(self.p("lr3e-4_steps10000", "step_1000", "checkpoint.pt"))
        entry = self.one()["entry"]
        self.assertEqual(find(entry, "lr3e-4_steps10000")["role"], "dir")
        self.assertEqual(find(entry, "lr3e-4_steps10000/step_500")["role"], "checkpoint")

    def test_logs_and_configs(self):
        for n in ("train_log.jsonl", "train_log_rank0.jsonl", "metrics.jsonl", "train_stdout.log", "stdout.log",
                  "run.log", "slurm-123.out", "config.json", "args.yaml", "notes.txt"):
            write(self.p("run", n))
        write(self.p("run", "step_1", "checkpoint.pt"))
        run = find(self.one()["entry"], "run")
        roles = dict((c["name"], c["role"]) for c in run["children"])
        self.assertEqual(roles["train_log.jsonl"], "train-log")
        self.assertEqual(roles["train_log_rank0.jsonl"], "train-log")
        self.assertEqual(roles["metrics.jsonl"], "metrics")
        self.assertEqual(roles["train_stdout.log"], "stdout")
        self.assertEqual(roles["stdout.log"], "stdout")
        self.assertEqual(roles["run.log"], "log")
        self.assertEqual(roles["slurm-123.out"], "log")
        self.assertEqual(roles["config.json"], "config")
        self.assertEqual(roles["args.yaml"], "config")
        self.assertEqual(roles["notes.txt"], "other")

    def test_steps_directly_in_root(self):
        for s in (1, 20, 3):
            write(self.p("step_%d" % s, "checkpoint.pt"))
        res = self.one()
        self.assertEqual(names(res["entry"]), ["step_1", "step_3", "step_20"])
        self.assertEqual(res["counts"]["checkpoints"], 3)

    def test_checkpoints_one_folder_deeper_than_depth_are_still_listed(self):
        # root -> run -> group -> step_42 -> files: the files sit at level 4, one past --depth 3.
        write(self.p("run7", "ckpts", "step_42", "checkpoint.pt"), b"z" * 9)
        write(self.p("run7", "ckpts", "step_42", "sub", "extra.bin"), b"e" * 4)
        write(self.p("run7", "ckpts", "notes", "a.txt"))
        entry = self.one("--depth", "3")["entry"]
        self.assertIs(find(entry, "run7/ckpts/notes")["listed"], False)
        ck = find(entry, "run7/ckpts/step_42")
        self.assertEqual((ck["role"], ck["size"]), ("checkpoint", 13))
        self.assertEqual(names(ck), ["checkpoint.pt", "sub"])
        sub = find(entry, "run7/ckpts/step_42/sub")
        self.assertEqual((sub["listed"], sub["size"]), (False, 4))

    def test_depth_limits_listing(self):
        write(self.p("run", "step_1", "checkpoint.pt"))
        write(self.p("run", "notes", "a.txt"))
        entry = self.one("--depth", "1")["entry"]
        run = find(entry, "run")
        self.assertIs(run["listed"], False)
        self.assertNotIn("children", run)
        self.assertIs(entry["sizeComplete"], False)

    def test_symlinks_are_reported_not_followed(self):
        write(self.p("run", "step_10", "checkpoint.pt"), b"c" * 8)
        os.symlink("step_10", self.p("run", "latest"))
        os.symlink("step_10/checkpoint.pt", self.p("run", "best.pt"))
        os.symlink("nowhere", self.p("run", "broken"))
        os.symlink("..", self.p("run", "loop"))
        res = self.one()
        latest = find(res["entry"], "run/latest")
        self.assertEqual((latest["kind"], latest["role"], latest["targetKind"], latest["target"]),
                         ("symlink", "link", "dir", "step_10"))
        best = find(res["entry"], "run/best.pt")
        self.assertEqual((best["kind"], best["role"], best["size"]), ("symlink", "checkpoint", 8))
        self.assertEqual(find(res["entry"], "run/broken")["targetKind"], "missing")
        self.assertEqual(find(res["entry"], "run/loop")["role"], "link")


class NastyNames(Base):
    NAMES = [
        "with space", "it's", 'say "hi"', "$(touch x)", "`touch y`", "semi;colon", "new\nline", "tab\there",
        "\u00fcnic\u00f6de \u6f22\u5b57 \U0001f600", "-dash-first", "back\\slash",
    ]

    def test_names_come_through_intact(self):
        cwd = os.getcwd()
        os.chdir(self.tmp)
        try:
            for n in self.NAMES:
                write(self.p("run", "step_1", n), b"data")
            bad = os.fsencode(self.root) + b"/run/step_1/bad\xff\xfename.pt"
            with open(bad, "wb") as f:
                f.write(b"12345")
            os.mkdir(os.fsencode(self.root) + b"/run/dir\xe9")
            write(os.fsdecode(os.fsencode(self.root) + b"/run/dir\xe9/step_3.pt"), b"1")
            doc = json.loads(list_runs.kg_common.dumps(self.listing()))
        finally:
            os.chdir(cwd)
        entry = doc["roots"][0]["entry"]
        ck = find(entry, "run/step_1")
        got = names(ck)
        for n in self.NAMES:
            self.assertIn(n, got)
            e = find(entry, "run/step_1/" + n)
            self.assertNotIn("escaped", e)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "x")))
        badent = [c for c in ck["children"] if c["name"].startswith("bad")][0]
        self.assertTrue(badent["escaped"])
        self.assertEqual(badent["name"], "bad\ufffd\ufffdname.pt")
        self.assertEqual(base64.b64decode(badent["nameB64"]), b"bad\xff\xfename.pt")
        self.assertEqual(base64.b64decode(badent["pathB64"]), b"run/step_1/bad\xff\xfename.pt")
        self.assertEqual((badent["size"], badent["role"]), (5, "weights"))
        # A file with a plain name below a folder with a bad one: its path is escaped, its name is not.
        below = find(entry, "run/dir\ufffd/step_3.pt")
        self.assertTrue(below["escaped"])
        self.assertNotIn("nameB64", below)
        self.assertEqual(base64.b64decode(below["pathB64"]), b"run/dir\xe9/step_3.pt")
        self.assertEqual(below["step"], 3)

    def test_root_with_odd_name(self):
        odd = os.path.join(self.tmp, "my ckpts $(x) 'q'\n")
        write(os.path.join(odd, "step_5", "checkpoint.pt"))
        res = list_runs.main([odd])["roots"][0]
        self.assertEqual(res["status"], "ok")
        self.assertEqual(res["path"], odd)


class RootStates(Base):
    def test_missing(self):
        res = list_runs.main([os.path.join(self.tmp, "nope")])["roots"][0]
        self.assertEqual(res["status"], "missing")
        self.assertIn("does not exist", res["message"])
        self.assertIsNone(res["entry"])

    def test_missing_below_a_file(self):
        write(os.path.join(self.tmp, "afile"))
        res = list_runs.main([os.path.join(self.tmp, "afile", "sub")])["roots"][0]
        self.assertEqual(res["status"], "missing")

    def test_not_a_directory(self):
        write(os.path.join(self.tmp, "afile"))
        res = list_runs.main([os.path.join(self.tmp, "afile")])["roots"][0]
        self.assertEqual(res["status"], "not-a-directory")

    def test_empty(self):
        res = self.one()
        self.assertEqual(res["status"], "empty")
        self.assertIn("empty", res["message"])

    def test_known_good_own_folder_is_not_listed(self):
        write(self.p(".known-good", "env-2026-11-29T11-37-05Z.json"))
        write(self.p("run-a", "step_1", "checkpoint.pt"))
        res = self.one()
        self.assertEqual(res["status"], "ok")
        names = [c["name"] for c in res["entry"]["children"]]
        self.assertEqual(names, ["run-a"])
        only_ours = tempfile.mkdtemp(dir=self.tmp)
        write(os.path.join(only_ours, ".known-good", "cache-1.tar.gz"))
        self.assertEqual(list_runs.main([only_ours])["roots"][0]["status"], "empty")

    def test_dot_folders_and_pycache_are_never_runs(self):
        write(self.p(".git", "objects", "12", "3456"))
        write(self.p(".git", "HEAD"))
        write(self.p(".hydra", "config.yaml"))
        write(self.p("__pycache__", "train.cpython-311.pyc"))
        write(self.p(".gitignore"))
        write(self.p("run-a", "step_1", "checkpoint.pt"))
        write(self.p("run-a", ".cache", "x"))
        res = self.one()
        names = [c["name"] for c in res["entry"]["children"]]
        # A dot file is still a file of the root; the folders are not listed at all.
        self.assertEqual(names, [".gitignore", "run-a"])
        run = [c for c in res["entry"]["children"] if c["name"] == "run-a"][0]
        self.assertEqual([c["name"] for c in run["children"]], ["step_1"])

    def test_no_checkpoints_counts_other_files(self):
        write(self.p("README.md"))
        write(self.p("logs", "train_stdout.log"))
        write(self.p("logs", "metrics.jsonl"))
        res = self.one()
        self.assertEqual(res["status"], "no-checkpoints")
        self.assertEqual(res["message"], "no checkpoints found; 3 other files, 1 folder")
        self.assertEqual(len(res["entry"]["children"]), 2)

    def test_several_roots_in_one_call(self):
        write(self.p("step_1", "checkpoint.pt"))
        doc = list_runs.main([self.root, os.path.join(self.tmp, "nope"), self.root + "/step_1"])
        self.assertEqual([r["status"] for r in doc["roots"]], ["ok", "missing", "ok"])
        self.assertEqual(doc["roots"][2]["entry"]["role"], "checkpoint")
        self.assertIsInstance(doc["now"], float)

    def _as_nobody(self, argv):
        """Runs main() in a forked child that dropped root, so permission bits really apply."""
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            try:
                os.close(r)
                if os.geteuid() == 0:
                    os.setgroups([])
                    os.setgid(NOBODY)
                    os.setuid(NOBODY)
                data = list_runs.kg_common.dumps(list_runs.main(argv)).encode()
                os.write(w, data)
            finally:
                os._exit(0)
        os.close(w)
        chunks = []
        while True:
            b = os.read(r, 65536)
            if not b:
                break
            chunks.append(b)
        os.close(r)
        os.waitpid(pid, 0)
        return json.loads(b"".join(chunks).decode())

    def test_permission_denied_root(self):
        write(self.p("step_1", "checkpoint.pt"))
        os.chmod(self.root, 0)
        doc = self._as_nobody([self.root])
        res = doc["roots"][0]
        self.assertEqual(res["status"], "denied")
        self.assertIn("permission denied", res["message"])
        self.assertNotEqual(doc["user"], "root")

    def test_permission_denied_below_a_closed_parent(self):
        closed = os.path.join(self.tmp, "closed")
        write(os.path.join(closed, "ckpts", "step_1", "checkpoint.pt"))
        os.chmod(closed, 0)
        res = self._as_nobody([os.path.join(closed, "ckpts")])["roots"][0]
        self.assertEqual(res["status"], "denied")

    def test_permission_denied_run_folder_inside_an_ok_root(self):
        write(self.p("open", "step_1", "checkpoint.pt"))
        write(self.p("private", "step_2", "checkpoint.pt"))
        os.chmod(self.p("private"), 0)
        res = self._as_nobody([self.root])["roots"][0]
        self.assertEqual(res["status"], "ok")
        priv = find(res["entry"], "private")
        self.assertEqual((priv["error"], priv["listed"]), ("permission denied", False))
        self.assertEqual(find(res["entry"], "open/step_1")["role"], "checkpoint")


class Truncation(Base):
    def test_huge_folder_keeps_newest_steps_and_plain_files(self):
        for s in range(1, 51):
            os.makedirs(self.p("run", "step_%d" % s))
        for n in ("config.yaml", "train_log.jsonl", "train_stdout.log"):
            write(self.p("run", n))
        res = self.one("--max-entries", "10")
        run = find(res["entry"], "run")
        self.assertEqual(run["omitted"], 43)
        self.assertEqual(len(run["children"]), 10)
        got = names(run)
        for n in ("config.yaml", "train_log.jsonl", "train_stdout.log"):
            self.assertIn(n, got)
        steps = sorted(c["step"] for c in run["children"] if c.get("step") is not None)
        self.assertEqual(steps, list(range(44, 51)))
        self.assertEqual(res["counts"]["omitted"], 43)
        self.assertIs(run["sizeComplete"], False)

    def test_under_the_limit_nothing_is_cut(self):
        for s in range(5):
            os.makedirs(self.p("step_%d" % s))
        res = self.one("--max-entries", "5")
        self.assertNotIn("omitted", res["entry"])
        self.assertEqual(len(res["entry"]["children"]), 5)


class Signature(Base):
    def test_changes_when_a_checkpoint_appears(self):
        write(self.p("run", "step_1", "checkpoint.pt"))
        os.utime(self.p("run"), (1000, 1000))
        os.utime(self.root, (1000, 1000))
        a = self.one("--signature-only")
        self.assertIsNone(a["entry"])
        self.assertEqual(a["signature"], self.one()["signature"])
        os.mkdir(self.p("run", "step_2"))
        os.utime(self.p("run"), (2000, 2000))
        b = self.one("--signature-only")
        self.assertNotEqual(a["signature"], b["signature"])
        write(self.p("run2", "x"))
        c = self.one("--signature-only")
        self.assertNotEqual(b["signature"], c["signature"])

    def test_missing_root_has_no_signature(self):
        res = list_runs.main([os.path.join(self.tmp, "nope"), "--signature-only"])["roots"][0]
        self.assertEqual((res["status"], res["signature"]), ("missing", None))


class Cli(Base):
    def run_script(self, *args):
        return subprocess.run([sys.executable, os.path.join(PYDIR, "list_runs.py")] + list(args),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def test_by_hand_prints_one_json_document(self):
        write(self.p("run", "step_3", "checkpoint.pt"))
        r = self.run_script(self.root, "--depth", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout.decode())
        self.assertEqual(doc["depth"], 2)
        self.assertEqual(doc["roots"][0]["status"], "ok")

    def test_bad_arguments(self):
        self.assertEqual(self.run_script().returncode, 2)
        r = self.run_script(self.root, "--depth", "x")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--depth", r.stderr.decode())
        self.assertEqual(self.run_script(self.root, "--bogus").returncode, 2)


class Speed(Base):
    def test_thousand_checkpoint_folders(self):
        for s in range(1000):
            write(self.p("run", "step_%d" % s, "checkpoint.pt"), b"c" * 10)
        write(self.p("run", "train_log.jsonl"))
        list_runs.main([self.root])  # warm the dentry cache, as a second listing would be
        best = None
        for _ in range(3):
            t = time.perf_counter()
            res = list_runs.main([self.root])["roots"][0]
            ms = (time.perf_counter() - t) * 1000
            best = ms if best is None else min(best, ms)
        self.assertEqual(res["counts"]["checkpoints"], 1000)
        self.assertEqual(find(res["entry"], "run")["size"], 10000 + 1)
        # Printed, not asserted: a timed bound measures the machine (npm run bench holds the listing's targets).
        sys.stderr.write("\nlist_runs: 1,000 checkpoint folders in %.1f ms\n" % best)


if __name__ == "__main__":
    unittest.main()
