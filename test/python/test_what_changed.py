"""python/what_changed.py run by hand: data fingerprints, git state and stats, every failure named."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from kg_test_env import needs_git  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PROBE = os.path.join(HERE, "..", "..", "python", "what_changed.py")
PYDIR = os.path.join(HERE, "..", "..", "python")


def run(*args, env=None):
    r = subprocess.run([sys.executable, PROBE] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env, timeout=60)
    if r.returncode != 0:
        raise AssertionError(r.stderr.decode())
    return json.loads(r.stdout.decode())


def git(cwd, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@x", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@x")
    subprocess.run(["git", "-C", cwd] + list(args), check=True, stdout=subprocess.PIPE, env=env)


class Fingerprints(unittest.TestCase):
    def setUp(self):
        self.d = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.d, ignore_errors=True)

    def test_fifos_named_like_data_or_launch_records_are_refused_not_opened_to_block(self):
        # A FIFO nobody writes blocks whoever opens it: the old probe hung on both (run() gives up after 60 s)
        data = os.path.join(self.d, "data")
        os.makedirs(os.path.join(self.d, "run", ".known-good"))
        os.makedirs(data)
        os.mkfifo(os.path.join(self.d, "run", ".known-good", "launches.jsonl"))
        os.mkfifo(os.path.join(data, "train.jsonl"))
        with open(os.path.join(data, "val.jsonl"), "w") as f:
            f.write('{"text": "abc"}\n' * 3)
        doc = run("--launches", os.path.join(self.d, "run"), "--path", data)
        launch = doc["launches"][0]
        self.assertIn("FIFO", launch["error"])
        self.assertEqual(launch["records"], [])
        samples = doc["paths"][0]["samples"]
        self.assertEqual([(s["file"], s["rows"]) for s in samples], [("val.jsonl", 3)])

    def test_a_file_changed_in_its_last_mib_gets_another_hash_at_the_same_size(self):
        p = os.path.join(self.d, "data.bin")
        with open(p, "wb") as f:
            f.write(b"a" * (5 << 20))
        first = run("--path", p)["paths"][0]
        with open(p, "r+b") as f:
            f.seek((5 << 20) - 10)
            f.write(b"b" * 10)
        second = run("--path", p)["paths"][0]
        self.assertEqual(first["size"], second["size"])
        self.assertEqual(first["kind"], "file")
        self.assertNotEqual(first["hash"], second["hash"])

    def test_a_change_in_the_middle_of_a_large_file_is_not_hashed_but_its_mtime_says_so(self):
        p = os.path.join(self.d, "data.bin")
        with open(p, "wb") as f:
            f.write(b"a" * (5 << 20))
        os.utime(p, (1000, 1000))
        first = run("--path", p)["paths"][0]
        with open(p, "r+b") as f:
            f.seek(3 << 20)
            f.write(b"b")
        second = run("--path", p)["paths"][0]
        self.assertEqual(first["hash"], second["hash"])
        self.assertGreater(second["mtime"], first["mtime"])

    def test_a_folder_counts_files_and_a_new_file_changes_its_hash(self):
        sub = os.path.join(self.d, "ds")
        os.makedirs(os.path.join(sub, "shards"))
        for i in range(3):
            with open(os.path.join(sub, "shards", "%d.arrow" % i), "wb") as f:
                f.write(b"x" * (i + 1))
        first = run("--path", sub)["paths"][0]
        self.assertEqual((first["kind"], first["files"], first["size"]), ("dir", 3, 6))
        with open(os.path.join(sub, "shards", "9.arrow"), "wb") as f:
            f.write(b"y")
        second = run("--path", sub)["paths"][0]
        self.assertEqual(second["files"], 4)
        self.assertNotEqual(first["hash"], second["hash"])

    def test_a_folder_nested_1500_levels_deep_costs_its_own_fingerprint_only(self):
        # os.walk recursed: RecursionError on Python < 3.12 failed the whole probe (every fact lost)
        deep = os.path.join(self.d, "deep")
        level = deep
        os.mkdir(level)
        for _ in range(1500):  # os.makedirs recurses as well
            level = os.path.join(level, "d")
            os.mkdir(level)
        with open(os.path.join(deep, "top.txt"), "w") as f:
            f.write("x")
        plain = os.path.join(self.d, "plain")
        os.mkdir(plain)
        with open(os.path.join(plain, "a.txt"), "w") as f:
            f.write("x")
        try:
            out = run("--path", deep, "--path", plain, "--stat", plain)
        finally:
            # shutil.rmtree recurses too: take the chain down from its bottom
            bottom = os.path.join(deep, *(["d"] * 1500))
            while len(bottom) > len(deep):
                os.rmdir(bottom)
                bottom = os.path.dirname(bottom)
        d, p = out["paths"]
        self.assertEqual(d["kind"], "dir")
        self.assertEqual(d["files"], 1)
        self.assertTrue(d["truncated"])
        self.assertIn("nested deeper than 256 levels", d["error"])
        self.assertEqual((p["files"], p["error"]), (1, None))
        self.assertTrue(out["stats"][0]["exists"])

    def test_a_failing_fact_is_that_facts_error_only(self):
        sys.path.insert(0, PYDIR)
        import what_changed

        def boom(path):
            raise RecursionError("maximum recursion depth exceeded")
        saved = what_changed.fingerprint
        what_changed.fingerprint = boom
        try:
            out = what_changed.main(["--path", self.d, "--stat", self.d])
        finally:
            what_changed.fingerprint = saved
        self.assertEqual(out["paths"][0]["error"], "not gathered: RecursionError: maximum recursion depth exceeded")
        self.assertTrue(out["stats"][0]["exists"])

    def test_a_stat_under_tilde_is_the_home_folder(self):
        # a restored env's interpreter is named "~/.known-good/envs/<label>/bin/python": the caller has no home path
        with open(os.path.join(self.d, "there"), "w") as f:
            f.write("x")
        out = run("--stat", "~/there", "--stat", "~/gone", env=dict(os.environ, HOME=self.d))
        self.assertEqual([(s["path"], s["exists"]) for s in out["stats"]], [("~/there", True), ("~/gone", False)])

    def test_a_missing_path_is_reported_not_found_never_left_out(self):
        doc = run("--path", os.path.join(self.d, "gone"), "--stat", os.path.join(self.d, "gone2"))
        self.assertEqual(doc["paths"][0]["exists"], False)
        self.assertEqual(doc["paths"][0]["error"], "not found")
        self.assertEqual(doc["stats"][0]["error"], "not found")


@needs_git
class Git(unittest.TestCase):
    def setUp(self):
        self.d = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.d, ignore_errors=True)

    def first_commit(self, text):
        """A checkout whose train.py (text) was committed long ago (2001); its path."""
        git(self.d, "init", "-q", "-b", "main")
        train = os.path.join(self.d, "train.py")
        with open(train, "w") as f:
            f.write(text)
        git(self.d, "add", ".")
        os.environ["GIT_COMMITTER_DATE"] = "@1000000000"
        try:
            git(self.d, "commit", "-q", "-m", "one", "--date=@1000000000")
        finally:
            del os.environ["GIT_COMMITTER_DATE"]
        return train

    def test_head_branch_dirty_and_files_changed_since_a_time(self):
        train = self.first_commit("print(1)\n")
        with open(os.path.join(self.d, "data.py"), "w") as f:
            f.write("x = 1\n")
        git(self.d, "add", ".")
        git(self.d, "commit", "-q", "-m", "two")
        with open(train, "w") as f:
            f.write("print(2)\n")
        g = run("--git", train, "--since", "1500000000")["git"][0]
        self.assertEqual(os.path.realpath(g["repo"]), os.path.realpath(self.d))
        self.assertEqual(g["branch"], "main")
        self.assertEqual(len(g["head"]), 40)
        self.assertTrue(g["dirty"])
        self.assertEqual(g["dirtyFiles"], ["train.py"])
        self.assertEqual(g["commitsSince"], 1)
        self.assertEqual(g["changedSince"], ["data.py"])

    def test_commits_since_a_time_compared_token_by_token_with_the_parent_of_the_oldest(self):
        loop = "def main():\n    for s in range(3):\n        loss = s\n"
        train = self.first_commit(loop)
        with open(train, "w") as f:
            f.write("# the loop\n" + loop)
        git(self.d, "commit", "-q", "-am", "Explain the loop")
        g = run("--git", self.d, "--since", "1500000000")["git"][0]
        self.assertEqual([c["subject"] for c in g["commits"]], ["Explain the loop"])
        self.assertEqual(len(g["base"]), 40)
        self.assertEqual([(c["file"], c["cosmetic"]) for c in g["codeChanges"]], [("train.py", True)])
        with open(train, "w") as f:
            f.write(loop + "        last = loss.item()\n")
        git(self.d, "commit", "-q", "-am", "Keep the loss")
        g = run("--git", self.d, "--since", "1500000000")["git"][0]
        c = g["codeChanges"][0]
        self.assertFalse(c["cosmetic"])
        self.assertEqual(c["functions"], ["main"])
        self.assertIn("        last = loss.item()", c["hunks"][-1]["new"])

    def test_uncommitted_files_compared_with_head_token_by_token_with_their_mtimes(self):
        loop = "def main():\n    with torch.autocast('cuda'):\n        loss = step()\n"
        train = self.first_commit(loop)
        for name, text in (("README.md", "# loop\n"), ("util.py", "x = 1\n"), ("old.py", "y = 1\n")):
            with open(os.path.join(self.d, name), "w") as f:
                f.write(text)
        git(self.d, "add", ".")
        git(self.d, "commit", "-q", "-m", "more")
        with open(train, "w") as f:
            f.write(loop.replace("'cuda')", "'cuda', enabled=False)"))
        os.utime(train, (1700000000, 1700000000))
        with open(os.path.join(self.d, "README.md"), "w") as f:
            f.write("# the loop\n")
        os.remove(os.path.join(self.d, "util.py"))
        git(self.d, "mv", "old.py", "new.py")
        g = run("--git", self.d)["git"][0]
        by = dict((c["file"], c) for c in g["dirtyChanges"])
        self.assertEqual(sorted(by), ["README.md", "new.py", "train.py", "util.py"])
        c = by["train.py"]
        self.assertEqual((c["status"], c["mtime"], c["functions"], c["cosmetic"]), ("modified", 1700000000, ["main"],
                                                                                   False))
        self.assertEqual(c["hunks"][0]["added"], ["with torch.autocast('cuda', enabled=False):"])
        self.assertEqual((by["util.py"]["status"], by["util.py"]["mtime"]), ("deleted", None))
        self.assertEqual(by["util.py"]["hunks"][0]["removed"], ["x = 1"])
        self.assertEqual((by["new.py"]["status"], by["new.py"]["from"], by["new.py"]["hunks"]), ("renamed", "old.py", []))
        self.assertEqual(by["README.md"]["hunks"][0]["new"], ["# the loop"])
        # Python first: what is compared when more files changed than the limit
        self.assertEqual(g["dirtyChanges"][0]["file"], "new.py")
        self.assertEqual(g["dirtyNotCompared"], 0)

    def test_an_uncommitted_file_that_is_binary_huge_a_link_or_a_fifo_is_named_not_read(self):
        self.first_commit("print(1)\n")
        names = ("blob.py", "huge.py", "link.py", "fifo.py")
        for name in names:
            with open(os.path.join(self.d, name), "w") as f:
                f.write("x = 1\n")
        git(self.d, "add", ".")
        git(self.d, "commit", "-q", "-m", "more")
        with open(os.path.join(self.d, "blob.py"), "wb") as f:
            f.write(b"x = 1\n\0\1")
        with open(os.path.join(self.d, "huge.py"), "w") as f:
            f.write("x = 2\n" * 200000)  # 1.2 MB
        os.remove(os.path.join(self.d, "link.py"))
        os.symlink("/dev/zero", os.path.join(self.d, "link.py"))
        os.remove(os.path.join(self.d, "fifo.py"))
        os.mkfifo(os.path.join(self.d, "fifo.py"))  # nobody writes it: opened, it would block the probe
        g = run("--git", self.d)["git"][0]
        why = dict((c["file"], c["error"]) for c in g["dirtyChanges"])
        self.assertEqual(why, {"blob.py": "binary: not compared", "huge.py": "larger than 1.0 MB: not compared",
                               "link.py": "a symbolic link, not a regular file: not compared",
                               "fifo.py": "a FIFO (named pipe), not a regular file: not compared"})

    def test_more_uncommitted_files_than_the_limit_are_counted_and_each_commit_lists_its_files(self):
        self.first_commit("print(1)\n")
        for i in range(25):
            with open(os.path.join(self.d, "m%02d.py" % i), "w") as f:
                f.write("x = 1\n")
        with open(os.path.join(self.d, "NOTES.md"), "w") as f:
            f.write("n\n")
        git(self.d, "add", ".")
        git(self.d, "commit", "-q", "-m", "many")
        for i in range(25):
            with open(os.path.join(self.d, "m%02d.py" % i), "w") as f:
                f.write("x = 2\n")
        g = run("--git", self.d, "--since", "1500000000")["git"][0]
        self.assertEqual((len(g["dirtyChanges"]), g["dirtyNotCompared"], len(g["dirtyFiles"])), (20, 5, 25))
        self.assertEqual([c["subject"] for c in g["commits"]], ["many"])
        self.assertEqual(len(g["commits"][0]["files"]), 26)
        # the documentation is compared last: past the limit it is the one left out
        self.assertNotIn("NOTES.md", [c["file"] for c in g["codeChanges"]])

    def test_launch_records_of_a_run_oldest_first_slimmed_and_bounded(self):
        kg = os.path.join(self.d, ".known-good")
        os.makedirs(kg)
        recs = [{"unixTime": 1.0 + i, "argv": ["python3", "train.py", "--precision", p], "env": {"A": str(i)},
                 "executable": {"realpath": "/usr/bin/python3.12"}, "git": {"head": "h", "diffSha256": None},
                 "torch": {"version": "2.11.0+cu130"}, "gpus": {"driver": "580"},
                 "packages": {"packages": {"torch": "2.11.0"}}, "python": {"version": "3.12.3 (main)"},
                 "accelerate": {"path": "/h/default_config.yaml", "config": {"mixed_precision": p[:4]}}}
                for i, p in enumerate(["bf16-mixed", "32-true"])]
        with open(os.path.join(kg, "launches.jsonl"), "w") as f:
            f.write("\n".join(json.dumps(r) for r in recs) + "\nnot json\n")
        got = run("--launches", self.d, "--launches", os.path.join(self.d, "nothing"))["launches"]
        self.assertTrue(got[0]["exists"])
        self.assertEqual([r["argv"][-1] for r in got[0]["records"]], ["bf16-mixed", "32-true"])
        self.assertEqual(got[0]["records"][1]["env"], {"A": "1"})
        self.assertEqual(got[0]["records"][1]["torch"], "2.11.0+cu130")
        self.assertEqual(got[0]["records"][1]["packages"], {"torch": "2.11.0"})
        self.assertEqual(got[0]["records"][1]["config"], {"accelerate.mixed_precision": "32-t"})
        self.assertEqual((got[1]["exists"], got[1]["records"], got[1]["error"]), (False, [], None))

    def test_a_huge_git_answer_is_cut_at_its_limit_in_whole_lines(self):
        # GIT_MAX_OUTPUT bounds what one git command may answer (here 4 KiB: 300 files changed since the time)
        git(self.d, "init", "-q", "-b", "main")
        for i in range(300):
            with open(os.path.join(self.d, "file_%04d_with_a_long_name_to_fill_the_log.py" % i), "w") as f:
                f.write("x = %d\n" % i)
        git(self.d, "add", ".")
        git(self.d, "commit", "-q", "-m", "many")
        sys.path.insert(0, PYDIR)
        import kg_git
        saved = kg_git.MAX_OUTPUT
        kg_git.MAX_OUTPUT = 4096
        try:
            out = kg_git.git(self.d, "log", "--format=@%H", "--name-only")
        finally:
            kg_git.MAX_OUTPUT = saved
        self.assertLessEqual(len(out.encode()), 4096)
        self.assertTrue(out.endswith("\n"))
        lines = out.splitlines()
        self.assertGreater(len(lines), 10)
        self.assertTrue(all(line.startswith("@") or line.endswith("_log.py") for line in lines if line), lines[-3:])

    def test_a_repository_that_configures_commands_gets_none_of_them_run(self):
        git(self.d, "init", "-q")
        marker = os.path.join(self.d, "..", os.path.basename(self.d) + "-PWNED")
        with open(os.path.join(self.d, ".gitattributes"), "w") as f:
            f.write("*.py filter=evil\n")
        with open(os.path.join(self.d, "train.py"), "w") as f:
            f.write("print(1)\n")
        git(self.d, "add", ".")
        git(self.d, "commit", "-q", "-m", "one")
        git(self.d, "config", "filter.evil.clean", "touch %s; cat" % marker)
        git(self.d, "config", "core.fsmonitor", "touch %s; false" % marker)
        os.utime(os.path.join(self.d, "train.py"), (1, 1))  # stale stat info: status would have to re-clean it
        try:
            g = run("--git", self.d)["git"][0]
            self.assertFalse(os.path.exists(marker), "a command of the repository ran")
            self.assertEqual(len(g["head"]), 40)
            self.assertIsNone(g["dirty"])
            self.assertIn("filter.evil.clean", g["error"])
        finally:
            if os.path.exists(marker):
                os.remove(marker)

    def _marker_script(self, marker):
        prog = self.d + "-prog.sh"
        with open(prog, "w") as f:
            f.write("#!/bin/sh\necho \"$0 $*\" >> %s\ncat\n" % marker)
        os.chmod(prog, 0o755)
        self.addCleanup(os.remove, prog)
        return prog

    def test_no_program_a_repository_names_runs_for_any_key(self):
        # Each key git knows that names a program, set in the repository's own config to a marker program; HEAD is
        # a signed commit (so log.showSignature would run gpg.program) and a submodule configures its own filter.
        marker = self.d + "-PWNED"
        self.addCleanup(lambda: os.path.exists(marker) and os.remove(marker))
        prog = self._marker_script(marker)
        git(self.d, "init", "-q", "-b", "main")
        with open(os.path.join(self.d, "train.py"), "w") as f:
            f.write("print(1)\n")
        git(self.d, "add", ".")
        git(self.d, "commit", "-q", "-m", "one")
        tree = subprocess.run(["git", "-C", self.d, "rev-parse", "HEAD^{tree}"], stdout=subprocess.PIPE,
                              check=True).stdout.decode().strip()
        parent = subprocess.run(["git", "-C", self.d, "rev-parse", "HEAD"], stdout=subprocess.PIPE,
                                check=True).stdout.decode().strip()
        signed = ("tree %s\nparent %s\nauthor t <t@x> 1600000000 +0000\ncommitter t <t@x> 1600000000 +0000\n"
                  "gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----\n\nsigned\n"
                  % (tree, parent))
        sha = subprocess.run(["git", "-C", self.d, "hash-object", "-t", "commit", "-w", "--stdin"],
                             input=signed.encode(), stdout=subprocess.PIPE, check=True).stdout.decode().strip()
        git(self.d, "update-ref", "refs/heads/main", sha)
        sub = os.path.join(self.d, "sub")
        os.mkdir(sub)
        git(sub, "init", "-q")
        with open(os.path.join(sub, ".gitattributes"), "w") as f:
            f.write("* filter=subevil\n")
        with open(os.path.join(sub, "x.py"), "w") as f:
            f.write("x\n")
        git(sub, "add", ".")
        git(sub, "commit", "-q", "-m", "sub")
        git(sub, "config", "filter.subevil.clean", prog)
        git(sub, "config", "core.fsmonitor", prog)
        os.utime(os.path.join(sub, "x.py"), (1, 1))
        git(self.d, "-c", "protocol.file.allow=always", "submodule", "add", "-q", "./sub", "sub")
        git(self.d, "commit", "-q", "-m", "with sub")
        for key in ("core.fsmonitor", "core.hooksPath", "core.pager", "core.sshCommand", "core.askPass",
                    "core.gitProxy", "core.editor", "core.alternateRefsCommand", "gpg.program",
                    "gpg.openpgp.program", "gpg.x509.program", "gpg.ssh.program", "gpg.ssh.defaultKeyCommand",
                    "diff.external", "diff.py.textconv", "diff.py.command", "credential.helper",
                    "uploadpack.packObjectsHook", "pager.log", "pager.status"):
            git(self.d, "config", key, prog if key != "core.hooksPath" else os.path.dirname(prog))
        git(self.d, "config", "log.showSignature", "true")
        git(self.d, "config", "status.submoduleSummary", "true")
        git(self.d, "config", "submodule.recurse", "true")
        with open(os.path.join(self.d, ".gitattributes"), "w") as f:
            f.write("*.py diff=py\n")
        for hook in ("post-index-change", "post-checkout", "reference-transaction"):
            shutil.copy(prog, os.path.join(self.d, ".git", "hooks", hook))
        g = run("--git", os.path.join(self.d, "train.py"), "--since", "1500000000")["git"][0]
        self.assertFalse(os.path.exists(marker), open(marker).read() if os.path.exists(marker) else "")
        self.assertEqual(len(g["head"]), 40)
        self.assertEqual(g["branch"], "main")
        self.assertIsNone(g["error"])
        self.assertEqual(g["commitsSince"], 3, g)

    @unittest.skipUnless(os.geteuid() == 0, "needs root to make a repository of another user (CI runs as root)")
    def test_a_repository_of_another_user_is_a_plain_fact_never_the_advice_to_trust_it(self):
        # git refuses a checkout another user owns ("dubious ownership", root included) and advises `git config
        # --global --add safe.directory …`: that advice, to trust a repository that may be hostile, was the error
        # shown. HOME is an empty folder: no safe.directory of the machine's account can let git read it.
        train = self.first_commit("print(1)\n")
        for top, dirs, files in os.walk(self.d):
            for n in dirs + files + ["."]:
                os.lchown(os.path.join(top, n), 65534, 65534)
        home = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, home, True)
        r = subprocess.run([sys.executable, PROBE, "--git", train], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=dict(os.environ, HOME=home), timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(b"safe.directory", r.stdout + r.stderr)
        g = json.loads(r.stdout.decode())["git"][0]
        self.assertRegex(g["error"], r"^the repository at \S*%s is owned by another user \((nobody, )?uid 65534\): "
                         r"git refuses to read it, and Known Good does not override that$" % re.escape(self.d))
        self.assertIsNone(g["head"])

    def test_outside_a_checkout_and_without_git_the_reason_is_given(self):
        g = run("--git", self.d)["git"][0]
        self.assertEqual(g["error"], "not in a git checkout")
        env = dict(os.environ, PATH="/nonexistent")
        g = run("--git", self.d, env=env)["git"][0]
        self.assertEqual(g["error"], "git is not installed")


if __name__ == "__main__":
    unittest.main()
