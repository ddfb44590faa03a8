"""python/launch_sources.py: what other tools record about a run's launches.

The layouts are written here from each tool's documented layout (Lightning's LightningCLI SaveConfigCallback,
Hydra's output folder, wandb's run folder, MLflow's file store), not by the tools themselves: none is installed on
the test machines.
"""
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

import launch_sources  # noqa: E402


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


class LaunchSourcesTest(unittest.TestCase):
    def setUp(self):
        self.d = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.d, ignore_errors=True)

    def test_flat_yaml_reads_block_mappings_and_scalar_lists(self):
        got = launch_sources.flat_yaml("# c\ntrainer:\n  precision: bf16-mixed  # why\n  callbacks:\n  - a\n  - b\n"
                                       "model:\n  lr: '0.1'\nseed_everything: 1\n")
        self.assertEqual(got, {"trainer.precision": "bf16-mixed", "trainer.callbacks": "a, b", "model.lr": "0.1",
                               "seed_everything": "1"})

    def test_accelerate_configs_the_real_accelerate_wrote_read_as_it_reads_them(self):
        real = os.path.join(os.path.dirname(__file__), "..", "fixtures", "real", "accelerate-config")
        with open(os.path.join(real, "truth.json")) as f:
            truth = json.load(f)["files"]
        for name in ("default_config.yaml", "bf16_config.yaml", "multi_gpu_config.yaml"):
            got = launch_sources.accelerate_config(os.path.join(real, name))
            self.assertIsNone(got["error"], name)
            want = {}
            launch_sources._flat_json(truth[name], "", want)  # accelerate's own reading, flattened the same way
            self.assertEqual(got["config"], want, name)
        self.assertEqual(launch_sources.accelerate_config(os.path.join(real, "bf16_config.yaml"))["config"]
                         ["mixed_precision"], "bf16")
        fifo = os.path.join(self.d, "fifo.yaml")
        os.mkfifo(fifo)
        self.assertIsNone(launch_sources.accelerate_config(fifo)["config"])  # refused, never opened to block

    def test_which_config_an_accelerate_launch_reads(self):
        path = launch_sources.accelerate_config_path
        self.assertEqual(path(["accelerate", "launch", "--config_file", "c.yaml", "train.py"], {}), "c.yaml")
        self.assertEqual(path(["accelerate", "launch", "--config-file=c.yaml", "train.py"], {}), "c.yaml")
        # a --config_file after the script is the script's own
        self.assertEqual(path(["/v/bin/accelerate", "launch", "train.py", "--config_file", "x"], {"HF_HOME": "/h"}),
                         "/h/accelerate/default_config.yaml")
        self.assertEqual(path(["accelerate", "launch", "t.py"], {"XDG_CACHE_HOME": "/c"}),
                         "/c/huggingface/accelerate/default_config.yaml")
        self.assertEqual(path(["python3", "-m", "accelerate.commands.launch", "t.py"], {"HF_HOME": "/h"}),
                         "/h/accelerate/default_config.yaml")
        self.assertIsNone(path(["torchrun", "train.py"], {}))

    def test_lightning_versions_hparams_and_lightningcli_config(self):
        for v, p in ((0, "bf16-mixed"), (1, "32-true")):
            write(os.path.join(self.d, "lightning_logs", "version_%d" % v, "hparams.yaml"), "batch_size: 32\n")
            write(os.path.join(self.d, "lightning_logs", "version_%d" % v, "config.yaml"),
                  "trainer:\n  precision: %s\n  max_steps: 1000\n" % p)
        recs = launch_sources.launches_of(self.d)
        self.assertEqual([r["source"] for r in recs], ["lightning", "lightning"])
        self.assertEqual([r["config"]["trainer.precision"] for r in recs], ["bf16-mixed", "32-true"])
        self.assertEqual(recs[0]["config"]["hparams.batch_size"], "32")

    def test_hydra_outputs_wandb_runs_and_mlflow_params(self):
        for t, p in (("10-00-00", "bf16"), ("11-00-00", "fp32")):
            h = os.path.join(self.d, "outputs", "2026-12-01", t, ".hydra")
            write(os.path.join(h, "config.yaml"), "trainer:\n  precision: %s\n" % p)
            write(os.path.join(h, "overrides.yaml"), "- trainer.precision=%s\n" % p)
        for r, w in (("run-20261201_100000-a", 4), ("run-20261201_110000-b", 0)):
            f = os.path.join(self.d, "wandb", r, "files")
            write(os.path.join(f, "wandb-metadata.json"), json.dumps(
                {"program": "train.py", "args": ["--num_workers", str(w)], "python": "3.12.3",
                 "git": {"commit": "abc"}, "startedAt": "2026-12-01T10:00:00"}))
            write(os.path.join(f, "config.yaml"), "_wandb:\n  value:\n    x: 1\nnum_workers:\n  desc: null\n"
                  "  value: %d\n" % w)
        for r, b in (("r1", "32"), ("r2", "16")):
            write(os.path.join(self.d, "mlruns", "0", r, "params", "batch_size"), b)
            write(os.path.join(self.d, "mlruns", "0", r, "tags", "mlflow.source.git.commit"), "abc\n")
        recs = launch_sources.launches_of(self.d)
        by = dict((s, [r for r in recs if r["source"] == s]) for s in ("hydra", "wandb", "mlflow"))
        self.assertEqual([r["argv"] for r in by["hydra"]], [["trainer.precision=bf16"], ["trainer.precision=fp32"]])
        self.assertEqual([r["argv"] for r in by["wandb"]],
                         [["train.py", "--num_workers", "4"], ["train.py", "--num_workers", "0"]])
        self.assertEqual([r["config"] for r in by["wandb"]], [{"num_workers": "4"}, {"num_workers": "0"}])
        self.assertEqual(by["wandb"][0]["gitHead"], "abc")
        self.assertEqual(sorted(r["config"]["batch_size"] for r in by["mlflow"]), ["16", "32"])
        self.assertEqual(by["mlflow"][0]["gitHead"], "abc")

    def wandb_run(self, name, meta):
        """A wandb run folder as wandb writes it: files/wandb-metadata.json (json.dumps(indent=4)) and config.yaml."""
        f = os.path.join(self.d, "wandb", name, "files")
        write(os.path.join(f, "wandb-metadata.json"), json.dumps(meta, indent=4) + "\n")
        write(os.path.join(f, "config.yaml"), "_wandb:\n  value:\n    python_version: 3.12.3\n")
        return f

    def test_wandb_runs_are_a_replayable_pair_folder_interpreter_and_script_from_its_metadata(self):
        proj = os.path.join(self.d, "proj")
        os.makedirs(os.path.join(proj, "sub"))
        write(os.path.join(proj, "sub", "train.py"), "")
        for name, started, work in (("run-20261201_100000-a1", "2026-12-01T10:00:00.123456", "2"),
                                    ("run-20261201_110000-b2", "2026-12-01T11:00:00.5", "8")):
            # the fields and shapes of wandb's system-info probe (wandb/sdk/internal/system/system_info.py)
            self.wandb_run(name, {
                "os": "Linux-6.8.0-x86_64-with-glibc2.39", "python": "3.12.3", "heartbeatAt": started,
                "startedAt": started, "docker": None, "cuda": None,
                "args": ["--data", "data/a.txt", "--work", work], "state": "running",
                "program": os.path.join(proj, "sub", "train.py"), "codePathLocal": "train.py",
                "codePath": "sub/train.py", "git": {"remote": "git@example.invalid:u/p.git", "commit": "c0ffee"},
                "email": "u@example.invalid", "root": proj, "host": "gpu1", "username": "u",
                "executable": "/home/u/venv/bin/python", "cpu_count": 8, "cpu_count_logical": 16})
        recs = launch_sources.wandb(self.d)
        self.assertEqual([r["cwd"] for r in recs], [os.path.join(proj, "sub")] * 2)
        self.assertEqual([r["interpreter"] for r in recs], ["/home/u/venv/bin/python"] * 2)
        self.assertEqual(recs[1]["argv"], ["/home/u/venv/bin/python", "train.py", "--data", "data/a.txt", "--work", "8"])
        self.assertEqual([r["time"] for r in recs], [1796119200.123456, 1796122800.5])
        self.assertEqual(recs[0]["gitHead"], "c0ffee")

    def test_wandb_program_as_typed_before_python_3_9_and_python_m(self):
        proj = os.path.join(self.d, "proj")
        write(os.path.join(proj, "train.py"), "")
        self.wandb_run("run-1", {"program": "train.py", "codePathLocal": "train.py", "codePath": "train.py",
                                 "root": proj, "args": ["--lr", "0.1"], "executable": "/usr/bin/python3.8"})
        self.wandb_run("run-2", {"program": "-m pkg.train", "root": proj, "args": [],
                                 "executable": "/usr/bin/python3"})
        a, b = launch_sources.wandb(self.d)
        self.assertEqual((a["cwd"], a["argv"]), (proj, ["/usr/bin/python3.8", "train.py", "--lr", "0.1"]))
        self.assertEqual((b["cwd"], b["argv"]), (proj, ["/usr/bin/python3", "-m", "pkg.train"]))

    def test_wandb_paths_that_are_no_plain_paths_are_never_a_folder_or_an_interpreter(self):
        bad = [{"program": "/p/train.py", "codePathLocal": "train.py", "executable": "python3"},  # not absolute
               {"program": "/p/train.py", "codePathLocal": "../x/train.py", "executable": "/usr/bin/python3"},
               {"program": "/p/train.py", "codePathLocal": "other.py", "executable": "/usr/bin/python3"},
               {"program": "/p/train.py", "codePathLocal": "train.py", "executable": "/usr/bin/py\nthon"},
               {"program": "/p/train.py", "codePathLocal": "train.py", "executable": "/" + "x" * 5000},
               {"program": "-m os; rm -rf /", "root": "/p", "executable": "/usr/bin/python3"},
               {"program": "train.py", "root": "/nowhere", "executable": "/usr/bin/python3"}]
        for i, meta in enumerate(bad):
            self.wandb_run("run-%d" % i, dict(meta, args=["--x", "1"]))
        recs = launch_sources.wandb(self.d)
        self.assertEqual(len(recs), len(bad))
        self.assertEqual([r["cwd"] for r in recs], [None] * len(bad))
        self.assertEqual([r["interpreter"] for r in recs], [None, "/usr/bin/python3", "/usr/bin/python3", None,
                                                            None, "/usr/bin/python3", "/usr/bin/python3"])
        # the script is still known where the program is an absolute path: the person gives the folder
        self.assertEqual(recs[1]["argv"], ["/usr/bin/python3", "/p/train.py", "--x", "1"])

    def test_hydra_and_lightningcli_records_say_where_they_ran_and_what_they_left(self):
        out = os.path.join(self.d, "outputs", "2026-12-01", "10-00-00")
        h = os.path.join(out, ".hydra")
        write(os.path.join(h, "config.yaml"), "trainer:\n  max_steps: 100\n")
        write(os.path.join(h, "overrides.yaml"), "- trainer.precision=bf16\n- +extra=1\n")
        # hydra.yaml as Hydra 1.3 writes it (the parts read here and some around them)
        write(os.path.join(h, "hydra.yaml"), "hydra:\n  run:\n    dir: outputs/${now:%%Y-%%m-%%d}/${now:%%H-%%M-%%S}\n"
              "  overrides:\n    hydra:\n    - hydra.mode=RUN\n    task:\n    - trainer.precision=bf16\n"
              "  job:\n    name: train\n    chdir: null\n  runtime:\n    version: 1.3.2\n"
              "    version_base: '1.3'\n    cwd: /home/u/proj\n    config_sources:\n    - path: hydra.conf\n"
              "      schema: pkg\n    output_dir: %s\n  verbose: false\n" % out)
        (rec,) = launch_sources.hydra(self.d)
        self.assertEqual((rec["cwd"], rec["job"], rec["outputDir"]), ("/home/u/proj", "train", out))
        self.assertEqual(rec["argv"], ["trainer.precision=bf16", "+extra=1"])
        v = os.path.join(self.d, "lightning_logs", "version_3")
        write(os.path.join(v, "config.yaml"), "trainer:\n  precision: bf16-mixed\n")
        (lit,) = launch_sources.lightning(self.d)
        self.assertEqual((lit["lightningConfig"], lit["outputDir"]), (os.path.join(v, "config.yaml"), self.d))

    def test_nothing_recorded_is_no_record(self):
        self.assertEqual(launch_sources.launches_of(self.d), [])


if __name__ == "__main__":
    unittest.main()
