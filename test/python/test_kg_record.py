"""kg_record.py: one launch record appended, then the command itself runs in the same process (exec)."""
import json
import os
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
RECORD = os.path.join(HERE, "..", "..", "python", "kg_record.py")
sys.path.insert(0, HERE)

from kg_test_env import needs_git  # noqa: E402

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

    def launch(self):
        r = subprocess.run([sys.executable, RECORD, "--run", self.run_dir, "--", sys.executable,
                            os.path.join(self.repo, "train.py")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=60, cwd=self.run_dir)
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


if __name__ == "__main__":
    unittest.main()
