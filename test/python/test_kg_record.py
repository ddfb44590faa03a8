"""kg_record.py: one launch record appended, then the command itself runs in the same process (exec)."""
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(HERE, "..", "..", "python")
RECORD = os.path.join(PYTHON_DIR, "kg_record.py")
sys.path.insert(0, HERE)
sys.path.insert(0, PYTHON_DIR)

import kg_record  # noqa: E402
from kg_test_env import needs_git  # noqa: E402

NOBODY = 65534

FAKE_TOKEN = "hf_FAKErecordTOKEN000000000000000000000"


def launches(run_dir):
    with open(os.path.join(run_dir, ".known-good", "launches.jsonl")) as f:
        return [json.loads(line) for line in f]


class KgRecord(unittest.TestCase):
    def setUp(self):
        self.d = tempfile.mkdtemp()

    def record(self, *command, env=None, stdin=None, extra=()):
        return subprocess.run([sys.executable, RECORD, "--run", self.d] + list(extra) + ["--"] + list(command),
                              input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=60)

    def test_the_command_runs_in_the_recorders_process_with_its_exit_code_and_stdin(self):
        script = "import os, sys; data = sys.stdin.read(); print(os.getpid(), len(data)); sys.exit(7)"
        r = self.record(sys.executable, "-c", script, stdin=b"x" * 100000)
        self.assertEqual(r.returncode, 7, r.stderr)
        pid, size = r.stdout.decode().split()
        self.assertEqual(int(size), 100000)
        rec = launches(self.d)[0]
        # Same PID: exec, not a child, so signals sent to the launch reach the command.
        self.assertEqual(rec["pid"], int(pid))
        self.assertEqual(rec["argv"], [sys.executable, "-c", script])
        self.assertEqual(r.stderr, b"")

    def test_a_signal_kills_the_command_as_it_would_a_bare_launch(self):
        r = self.record("sh", "-c", "kill -TERM $$")
        self.assertEqual(r.returncode, -15)

    @unittest.skipUnless(os.path.exists("/proc/self/status"), "needs /proc")
    def test_signal_dispositions_are_those_of_a_bare_launch(self):
        # Python ignores SIGPIPE for itself; an ignored signal stays ignored across exec unless reset.
        bare = subprocess.run(["grep", "SigIgn", "/proc/self/status"], stdout=subprocess.PIPE).stdout
        r = self.record("grep", "SigIgn", "/proc/self/status")
        self.assertEqual(r.stdout, bare)

    def test_a_command_that_is_not_there_exits_127_after_the_record(self):
        r = self.record("no-such-command-kg-record")
        self.assertEqual(r.returncode, 127)
        self.assertIn(b"no-such-command-kg-record", r.stderr)
        self.assertEqual(len(launches(self.d)), 1)

    def test_accelerate_launch_records_the_config_it_reads(self):
        # accelerate's own files (test/fixtures/real/accelerate-config); the `accelerate` run here is a stand-in
        # program on PATH: the record is written before the exec, whatever the command is
        real = os.path.join(HERE, "..", "fixtures", "real", "accelerate-config")
        bin_dir = os.path.join(self.d, "bin")
        hf_home = os.path.join(self.d, "hf")
        os.makedirs(bin_dir)
        os.makedirs(os.path.join(hf_home, "accelerate"))
        with open(os.path.join(real, "bf16_config.yaml")) as f, \
                open(os.path.join(hf_home, "accelerate", "default_config.yaml"), "w") as g:
            g.write(f.read())
        stub = os.path.join(bin_dir, "accelerate")
        with open(stub, "w") as f:
            f.write("#!/bin/sh\nexit 3\n")
        os.chmod(stub, 0o755)
        env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""), HF_HOME=hf_home)
        r = self.record("accelerate", "launch", "train.py", "--lr", "1", env=env)
        self.assertEqual(r.returncode, 3, r.stderr)
        multi = os.path.join(real, "multi_gpu_config.yaml")
        self.record("accelerate", "launch", "--config_file", multi, "train.py", env=env)
        self.record("python3", "-c", "pass", env=env)
        recs = launches(self.d)
        self.assertEqual(recs[0]["accelerate"]["path"], os.path.join(hf_home, "accelerate", "default_config.yaml"))
        self.assertEqual(recs[0]["accelerate"]["config"]["mixed_precision"], "bf16")
        got = recs[1]["accelerate"]["config"]
        self.assertEqual((got["mixed_precision"], got["num_processes"], got["distributed_type"]),
                         ("fp16", "4", "MULTI_GPU"))
        self.assertEqual(got["dynamo_config.dynamo_backend"], "INDUCTOR")
        self.assertNotIn("accelerate", recs[2])

    def test_home_keeps_the_records_out_of_the_run_folder_and_what_changed_finds_them(self):
        home = os.path.join(self.d, "home")
        os.makedirs(home)
        env = dict(os.environ, HOME=home)
        r = self.record("true", env=env, extra=("--home",))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.d, ".known-good")))
        found = []
        for top, _, files in os.walk(os.path.join(home, ".known-good", "runs")):
            found += [os.path.join(top, f) for f in files]
        self.assertEqual(len(found), 1, found)
        with open(found[0]) as f:
            self.assertEqual(json.loads(f.readline())["run"], os.path.realpath(self.d))
        wc = os.path.join(HERE, "..", "..", "python", "what_changed.py")
        out = subprocess.run([sys.executable, wc, "--launches", self.d], stdout=subprocess.PIPE, env=env,
                             timeout=60).stdout.decode()
        doc = json.loads(out[out.index("{"):out.rindex("}") + 1])
        self.assertEqual((doc["launches"][0]["exists"], doc["launches"][0]["path"]), (True, found[0]))
        self.assertEqual(doc["launches"][0]["records"][0]["argv"], ["true"])

    def test_each_launch_appends_one_line(self):
        for _ in range(3):
            self.assertEqual(self.record("true").returncode, 0)
        self.assertEqual(len(launches(self.d)), 3)

    def test_secrets_in_the_environment_and_the_command_line_are_redacted(self):
        env = dict(os.environ, HF_TOKEN=FAKE_TOKEN, WANDB_API_KEY="FAKEwandbKEY0123456789", CUDA_LAUNCH_BLOCKING="1")
        r = self.record("true", "--hub_token", "FAKEsecretVALUE42", "--data_url=https://u:FAKEpass@example.com/x",
                        env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.d, ".known-good", "launches.jsonl")) as f:
            text = f.read()
        for secret in (FAKE_TOKEN, "FAKEwandbKEY0123456789", "FAKEsecretVALUE42", "FAKEpass"):
            self.assertNotIn(secret, text)
        rec = json.loads(text)
        self.assertEqual(rec["env"]["CUDA_LAUNCH_BLOCKING"], "1")
        self.assertTrue(rec["env"]["HF_TOKEN"].startswith("<redacted sha256:"))
        self.assertEqual(rec["argv"][:2], ["true", "--hub_token"])
        self.assertTrue(rec["argv"][2].startswith("<redacted sha256:"))

    def test_record_holds_interpreter_packages_and_torch_build(self):
        self.record("true")
        rec = launches(self.d)[0]
        self.assertEqual(rec["python"]["executable"], sys.executable)
        self.assertEqual(rec["python"]["version"], sys.version.replace("\n", " "))
        self.assertGreater(rec["packages"]["count"], 0)
        self.assertIn("found", rec["torch"])
        self.assertEqual(rec["cwd"], os.getcwd())
        self.assertIsInstance(rec["tookMs"], float)

    def test_a_failing_fact_is_named_and_costs_that_fact_only(self):
        # An nvidia-smi that fails: the GPU fact is an error, the rest is recorded and the command still runs.
        bin_dir = tempfile.mkdtemp()
        smi = os.path.join(bin_dir, "nvidia-smi")
        with open(smi, "w") as f:
            f.write("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
        os.chmod(smi, stat.S_IRWXU)
        env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
        r = self.record(sys.executable, "-c", "print('ran')", env=env)
        self.assertEqual(r.stdout.strip(), b"ran")
        rec = launches(self.d)[0]
        self.assertIsNone(rec["gpus"])
        self.assertEqual([e["fact"] for e in rec["errors"]], ["gpus"])
        self.assertIn("exit 9", rec["errors"][0]["message"])
        self.assertGreater(rec["packages"]["count"], 0)

    def test_a_fact_past_the_timeout_is_named_and_the_launch_goes_on(self):
        bin_dir = tempfile.mkdtemp()
        smi = os.path.join(bin_dir, "nvidia-smi")
        fifo = os.path.join(bin_dir, "never")
        os.mkfifo(fifo)
        with open(smi, "w") as f:
            f.write("#!/bin/sh\nexec cat %s\n" % fifo)  # blocks until a writer comes: none ever does
        os.chmod(smi, stat.S_IRWXU)
        env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
        r = self.record("true", env=env, extra=["--timeout", "0.5"])
        self.assertEqual(r.returncode, 0, r.stderr)
        rec = launches(self.d)[0]
        self.assertIn("gpus", [e["fact"] for e in rec["errors"]])

    def test_an_unwritable_run_folder_costs_the_record_not_the_launch(self):
        blocker = os.path.join(self.d, ".known-good")
        with open(blocker, "w") as f:
            f.write("a file where the folder should be")
        r = self.record(sys.executable, "-c", "print('ran')")
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.stdout.strip(), b"ran")
        self.assertIn(b"launch not recorded", r.stderr)


class KgRecordSharedFolder(unittest.TestCase):
    """A run folder may be shared: whatever another user planted as .known-good or launches.jsonl, the record goes
    only to a regular file of the user's own, nothing else is written to, and the command runs all the same."""

    def setUp(self):
        self.d = tempfile.mkdtemp()
        self.folder = os.path.join(self.d, ".known-good")
        self.path = os.path.join(self.folder, "launches.jsonl")
        os.mkdir(self.folder, 0o700)

    def launch(self):
        r = subprocess.run([sys.executable, RECORD, "--run", self.d, "--", sys.executable, "-c", "print('ran')"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        self.assertEqual((r.returncode, r.stdout), (0, b"ran\n"), r.stderr)
        self.assertEqual(r.stderr.count(b"launch not recorded"), 1, r.stderr)
        return r.stderr.decode()

    def other_file(self, uid=None):
        fd, path = tempfile.mkstemp()
        os.write(fd, b"before\n")
        os.close(fd)
        if uid is not None:
            os.chown(path, uid, uid)
        return path

    def unchanged(self, path):
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"before\n")

    def test_a_link_planted_as_launches_jsonl_is_not_followed(self):
        target = self.other_file()
        os.symlink(target, self.path)
        self.assertIn("is a symbolic link: not followed", self.launch())
        self.unchanged(target)
        self.assertTrue(os.path.islink(self.path))

    @unittest.skipUnless(os.geteuid() == 0, "needs root to make a file of another user (CI runs as root)")
    def test_a_link_to_another_users_file_is_not_followed(self):
        # root can write anywhere: a link another user planted must not lead root's record into their file (nor into
        # a root-only one: the previous test's file is root's own when run as root)
        target = self.other_file(NOBODY)
        os.chmod(target, 0o600)
        os.symlink(target, self.path)
        self.assertIn("symbolic link", self.launch())
        self.unchanged(target)

    def test_a_link_planted_as_the_known_good_folder_is_not_followed(self):
        elsewhere = tempfile.mkdtemp()
        os.rmdir(self.folder)
        os.symlink(elsewhere, self.folder)
        self.assertIn(".known-good is a symbolic link: not followed", self.launch())
        self.assertEqual(os.listdir(elsewhere), [])

    def test_a_fifo_held_open_by_a_reader_gets_nothing(self):
        os.mkfifo(self.path)
        # The test holds the read end: a writer's open succeeds, so only the check of the opened descriptor keeps the
        # record out (and keeps the launch from blocking on a pipe nobody drains).
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        got = []

        def drain():
            os.set_blocking(fd, True)
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return
                got.append(chunk)

        try:
            self.assertIn("is a FIFO (named pipe), not a regular file", self.launch())
            # every writer is gone: what the FIFO holds is all it will ever get (EOF after it)
            reader = threading.Thread(target=drain)
            reader.start()
            reader.join()
        finally:
            os.close(fd)
        self.assertEqual(b"".join(got), b"")

    def test_a_fifo_nobody_reads_does_not_block_the_launch(self):
        os.mkfifo(self.path)
        self.assertIn("FIFO", self.launch())  # before: open() waited forever for a reader

    def test_a_folder_named_launches_jsonl_is_named(self):
        os.mkdir(self.path)
        self.assertIn("launches.jsonl is a folder, not a regular file", self.launch())

    @unittest.skipUnless(os.geteuid() == 0, "needs root to make a file of another user (CI runs as root)")
    def test_a_file_of_another_user_is_not_appended_to(self):
        with open(self.path, "wb") as f:
            f.write(b"before\n")
        os.chown(self.path, NOBODY, NOBODY)
        self.assertIn("belongs to another user (uid %d)" % NOBODY, self.launch())
        self.unchanged(self.path)

    def test_a_hard_linked_file_is_not_appended_to(self):
        # a second name for the file: it may be any file of the user's (a ~/.bashrc linked in by someone where
        # protected_hardlinks is off)
        target = self.other_file()
        os.link(target, self.path)
        self.assertIn("has 2 hard links", self.launch())
        self.unchanged(target)

    def test_the_folder_is_made_private_and_the_record_appended_to_a_file_of_ones_own(self):
        os.rmdir(self.folder)
        r = subprocess.run([sys.executable, RECORD, "--run", self.d, "--", "true"], stderr=subprocess.PIPE,
                           timeout=60)
        self.assertEqual((r.returncode, r.stderr), (0, b""))
        self.assertEqual(stat.S_IMODE(os.lstat(self.folder).st_mode), 0o700)
        st = os.lstat(self.path)
        self.assertTrue(stat.S_ISREG(st.st_mode))
        self.assertEqual(st.st_uid, os.geteuid())
        self.assertEqual(len(launches(self.d)), 1)


# In-process, as the issue measured it: 2,000 variables of 1 MiB (one exec cannot carry that much: the test replaces
# os.environ and os.environb with mappings that share one 1 MiB value), then kg_record.main as a launch runs it.
HUGE_ENV = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
import kg_record
big = "x" * (1 << 20)
names = ["KG_HUGE_%04d" % i for i in range(2000)]
os.environ = dict(((n, big) for n in names), PATH=os.environ["PATH"], CUDA_VISIBLE_DEVICES="0,1")
bigb = big.encode()
os.environb = dict(((n.encode(), bigb) for n in names), PATH=os.environ["PATH"].encode(), CUDA_VISIBLE_DEVICES=b"0,1")
kg_record.main(["--run", sys.argv[2], "--timeout", sys.argv[3], "--", "sh", "-c", "echo ran"])
"""


class KgRecordBounds(unittest.TestCase):
    def setUp(self):
        self.d = tempfile.mkdtemp()

    def lines(self):
        with open(os.path.join(self.d, ".known-good", "launches.jsonl"), "rb") as f:
            return f.read().splitlines()

    def test_the_cap_holds_the_whole_record_with_the_environment(self):
        # 300 variables of 4,000 characters: a 1.2 MB line before. Speed variables are read first and kept.
        env = {"PATH": os.environ["PATH"], "CUDA_VISIBLE_DEVICES": "0,1", "NCCL_DEBUG": "INFO"}
        env.update(("KG_FILL_%03d" % i, "v" * 4000) for i in range(300))
        r = subprocess.run([sys.executable, RECORD, "--run", self.d, "--", "sh", "-c", "echo ran"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"ran\n", b""))
        line, = self.lines()
        self.assertLessEqual(len(line) + 1, kg_record.MAX_RECORD_BYTES)
        rec = json.loads(line)
        self.assertEqual((rec["env"]["CUDA_VISIBLE_DEVICES"], rec["env"]["NCCL_DEBUG"]), ("0,1", "INFO"))
        kept = [k for k in rec["env"] if k.startswith("KG_FILL_")]
        self.assertLess(len(kept), 300)
        env_cut = [t["message"] for t in rec["truncated"] if t["fact"] == "env"]
        self.assertEqual(len(env_cut), 1, rec["truncated"])
        # (Python may add LC_CTYPE to the environment it runs in: counted, not named here)
        m = re.match(r"(\d+) of (\d+) variables left out at the environment's share of the record \(%d bytes\): "
                     r"KG_FILL_%03d, " % (kg_record.MAX_ENV_BYTES, len(kept)), env_cut[0])
        self.assertTrue(m, env_cut[0])
        self.assertEqual(int(m.group(1)) + len(rec["env"]), int(m.group(2)))

    def test_the_timeout_bounds_the_reading_of_a_huge_environment(self):
        # --timeout 0: the deadline is spent before the first variable, so the record says where it stopped, whatever
        # the machine's speed; the launch still runs.
        r = subprocess.run([sys.executable, "-c", HUGE_ENV, PYTHON_DIR, self.d, "0"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=600)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"ran\n", b""))
        line, = self.lines()
        self.assertLessEqual(len(line) + 1, kg_record.MAX_RECORD_BYTES)
        rec = json.loads(line)
        env_error = [e["message"] for e in rec["errors"] if e["fact"] == "env"]
        self.assertEqual(env_error, ["stopped at the 0.0 s limit (--timeout) after 0 of 2002 variables; left out: "
                                     "CUDA_VISIBLE_DEVICES, PATH, KG_HUGE_0000, KG_HUGE_0001, KG_HUGE_0002, "
                                     "KG_HUGE_0003, KG_HUGE_0004, KG_HUGE_0005, KG_HUGE_0006, KG_HUGE_0007, "
                                     "KG_HUGE_0008, KG_HUGE_0009, KG_HUGE_0010, KG_HUGE_0011, KG_HUGE_0012, "
                                     "KG_HUGE_0013, KG_HUGE_0014, KG_HUGE_0015, KG_HUGE_0016, KG_HUGE_0017, …"])
        self.assertEqual(rec["env"], {})

    def test_a_huge_environment_is_read_to_its_share_of_the_record(self):
        r = subprocess.run([sys.executable, "-c", HUGE_ENV, PYTHON_DIR, self.d, "60"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=600)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"ran\n", b""))
        line, = self.lines()
        self.assertLessEqual(len(line) + 1, kg_record.MAX_RECORD_BYTES)
        rec = json.loads(line)
        self.assertEqual(rec["env"]["CUDA_VISIBLE_DEVICES"], "0,1")
        self.assertTrue(all(len(v) <= kg_record.MAX_VALUE_CHARS + 1 for v in rec["env"].values()))
        self.assertNotIn("env", [e["fact"] for e in rec["errors"]])
        notes = " ".join(t["message"] for t in rec["truncated"] if t["fact"] == "env")
        self.assertIn("of 2002 variables left out at the environment's share of the record", notes)

    def test_fit_leaves_out_the_least_useful_first_and_says_what(self):
        doc = {"schema": 1, "kind": "launch", "argv": ["python3", "train.py", "--lr", "1"],
               "env": dict([("CUDA_VISIBLE_DEVICES", "0")] + [("X%04d" % i, "y" * 200) for i in range(2000)]),
               "packages": {"count": 20000, "packages": dict(("pkg%05d" % i, "1.0.%d" % i) for i in range(20000))},
               "errors": [], "truncated": []}
        line = kg_record.fit(doc)
        self.assertLessEqual(len(line), kg_record.MAX_RECORD_BYTES)
        rec = json.loads(line)
        self.assertEqual(rec["packages"]["count"], 20000)
        self.assertIsNone(rec["packages"]["packages"])
        self.assertEqual(rec["argv"], ["python3", "train.py", "--lr", "1"])
        self.assertEqual(rec["env"]["CUDA_VISIBLE_DEVICES"], "0")
        self.assertEqual([t["fact"] for t in rec["truncated"]], ["packages"])


@needs_git
class KgRecordGit(unittest.TestCase):
    def setUp(self):
        self.repo = tempfile.mkdtemp()
        self.run_dir = tempfile.mkdtemp()
        env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e", GIT_COMMITTER_NAME="t",
                   GIT_COMMITTER_EMAIL="t@e")
        self.env = env
        subprocess.run(["git", "init", "-q", self.repo], check=True, env=env)
        with open(os.path.join(self.repo, "train.py"), "w") as f:
            f.write("print('train')\n")
        subprocess.run(["git", "-C", self.repo, "add", "train.py"], check=True, env=env)
        subprocess.run(["git", "-C", self.repo, "commit", "-q", "-m", "Train"], check=True, env=env)
        self.head = subprocess.run(["git", "-C", self.repo, "rev-parse", "HEAD"], stdout=subprocess.PIPE,
                                   check=True).stdout.decode().strip()

    def launch(self, timeout="1", env=None):
        r = subprocess.run([sys.executable, RECORD, "--run", self.run_dir, "--timeout", timeout, "--", sys.executable,
                            os.path.join(self.repo, "train.py")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=120, cwd=self.run_dir, env=env)
        self.assertEqual(r.stdout, b"train\n", r.stderr)
        return launches(self.run_dir)[-1]

    def test_head_and_dirty_diff_of_the_scripts_checkout(self):
        clean = self.launch()["git"]
        self.assertEqual((clean["head"], clean["dirty"], clean["diffSha256"]), (self.head, False, None))
        self.assertEqual(clean["subject"], "Train")
        with open(os.path.join(self.repo, "train.py"), "a") as f:
            f.write("# a note\n")
        dirty = self.launch()["git"]
        self.assertEqual((dirty["head"], dirty["dirty"], dirty["changedFiles"]), (self.head, True, ["train.py"]))
        self.assertEqual(len(dirty["diffSha256"]), 64)
        with open(os.path.join(self.repo, "train.py"), "a") as f:
            f.write("# another\n")
        self.assertNotEqual(self.launch()["git"]["diffSha256"], dirty["diffSha256"])

    def test_programs_the_repository_config_names_are_never_run(self):
        marker = os.path.join(self.run_dir, "ran")
        evil = "touch %s" % marker
        for key, value in (("filter.x.clean", evil), ("filter.x.process", evil), ("diff.x.textconv", evil),
                           ("core.fsmonitor", evil), ("diff.external", evil), ("core.pager", evil)):
            subprocess.run(["git", "-C", self.repo, "config", key, value], check=True)
        with open(os.path.join(self.repo, ".gitattributes"), "w") as f:
            f.write("*.py filter=x diff=x\n")
        with open(os.path.join(self.repo, "train.py"), "a") as f:
            f.write("# dirty, so that diff and status read the file\n")
        rec = self.launch()
        self.assertFalse(os.path.exists(marker), "a program named by the repository's config ran")
        self.assertTrue(rec["git"]["dirty"])


    def git(self, cwd, *args):
        subprocess.run(["git", "-C", cwd] + list(args), check=True, env=self.env, stdout=subprocess.DEVNULL)

    def test_a_submodules_own_config_and_a_signed_head_run_nothing(self):
        # A submodule's config is its own (the -c overrides cannot name its filters): `git diff HEAD` looked into it
        # and ran its clean filter. A signed HEAD with log.showSignature would run gpg.program.
        marker = self.run_dir + "-PWNED"
        self.addCleanup(lambda: os.path.exists(marker) and os.remove(marker))
        prog = self.run_dir + "-prog.sh"
        with open(prog, "w") as f:
            f.write("#!/bin/sh\necho \"$0 $*\" >> %s\ncat\n" % marker)
        os.chmod(prog, 0o755)
        sub = os.path.join(self.repo, "sub")
        os.mkdir(sub)
        self.git(sub, "init", "-q")
        with open(os.path.join(sub, ".gitattributes"), "w") as f:
            f.write("* filter=subevil\n")
        with open(os.path.join(sub, "x.py"), "w") as f:
            f.write("x\n")
        self.git(sub, "add", ".")
        self.git(sub, "commit", "-q", "-m", "sub")
        self.git(sub, "config", "filter.subevil.clean", prog)
        self.git(sub, "config", "core.fsmonitor", prog)
        self.git(self.repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", "./sub", "sub")
        self.git(self.repo, "commit", "-q", "-m", "with sub")
        out = subprocess.run(["git", "-C", self.repo, "cat-file", "commit", "HEAD"], stdout=subprocess.PIPE,
                             check=True).stdout.decode()
        head, _, message = out.partition("\n\n")
        signature = "gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----"
        signed = head + "\n" + signature + "\n\n" + message
        sha = subprocess.run(["git", "-C", self.repo, "hash-object", "-t", "commit", "-w", "--stdin"],
                             input=signed.encode(), stdout=subprocess.PIPE, check=True).stdout.decode().strip()
        self.git(self.repo, "update-ref", "HEAD", sha)
        for key in ("log.showSignature", "gpg.program", "pager.diff", "pager.log"):
            self.git(self.repo, "config", key, "true" if key == "log.showSignature" else prog)
        with open(os.path.join(sub, "x.py"), "a") as f:
            f.write("dirty, so that the submodule's status would clean it\n")
        os.utime(os.path.join(sub, "x.py"), (1, 1))
        rec = self.launch(timeout="60")
        self.assertFalse(os.path.exists(marker), open(marker).read() if os.path.exists(marker) else "")
        self.assertEqual(rec["git"]["head"], sha)
        self.assertEqual(rec["errors"], [])

    @unittest.skipUnless(os.geteuid() == 0, "needs root to make a repository of another user (CI runs as root)")
    def test_a_repository_of_another_user_is_a_plain_fact_never_the_advice_to_trust_it(self):
        for top, dirs, files in os.walk(self.repo):
            for n in dirs + files + ["."]:
                os.lchown(os.path.join(top, n), NOBODY, NOBODY)
        home = tempfile.mkdtemp()  # no safe.directory of the machine's account lets git read it
        rec = self.launch(timeout="60", env=dict(os.environ, HOME=home))
        self.assertIsNone(rec["git"])
        message = [e["message"] for e in rec["errors"] if e["fact"] == "git"][0]
        self.assertRegex(message, r"the repository at \S*%s is owned by another user \((nobody, )?uid %d\): git "
                         r"refuses to read it, and Known Good does not override that$" % (re.escape(self.repo), NOBODY))
        with open(os.path.join(self.run_dir, ".known-good", "launches.jsonl")) as f:
            self.assertNotIn("safe.directory", f.read())


if __name__ == "__main__":
    unittest.main()
