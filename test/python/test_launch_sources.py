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

    def test_nothing_recorded_is_no_record(self):
        self.assertEqual(launch_sources.launches_of(self.d), [])


if __name__ == "__main__":
    unittest.main()
