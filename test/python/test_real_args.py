"""ckpt_args.py against artifacts written by the real libraries (test/fixtures/real/), compared with what the libraries
themselves say they hold (test/fixtures/real/ground_truth.json, from scripts/fixtures/real_artifacts.py)."""
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.join(HERE, "..", "..", "python")
REAL = os.path.join(HERE, "..", "fixtures", "real")
sys.path.insert(0, PYDIR)

import ckpt_args  # noqa: E402
import kg_common  # noqa: E402
import kg_redact  # noqa: E402

with open(os.path.join(REAL, "ground_truth.json")) as _f:
    TRUTH = json.load(_f)

# The fake secrets scripts/fixtures/real_artifacts.py wrote into the artifacts.
FAKE_HUB_TOKEN = "hf_FAKEfixtureTOKEN00000000000000000000"
FAKE_WANDB_KEY = "FAKEwandb0123456789abcdef0123456789abcdef"
# What a header of the result says about the file itself, not about its args.
FILE_FIELDS = ("format", "path", "bytes", "bytesRead", "mtime", "step", "stat")


def probe(rel, *argv):
    """The probe as the extension runs it (a fresh interpreter): the parsed result and the raw stdout."""
    r = subprocess.run([sys.executable, os.path.join(PYDIR, "ckpt_args.py"), os.path.join(REAL, rel)] + list(argv),
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError("probe failed on %s (%d): %s" % (rel, r.returncode, r.stderr))
    return json.loads(r.stdout), r.stdout


def redacted(tree):
    """Ground truth as the probe must show it: secrets redacted by the same rules."""
    return kg_redact.redact_tree(tree)


class TorchSaveTest(unittest.TestCase):
    def test_enum_and_class_reference_in_both_formats(self):
        docs = {}
        for rel, truth in TRUTH["torch_save"].items():
            doc, raw = probe(rel)
            docs[truth["legacy"]] = doc
            self.assertEqual(doc["format"], "torch-legacy" if truth["legacy"] else "torch-zip")
            args = doc["args"]
            # Sched.COSINE is pickled as Sched(3): the class and the value are in the file, the name is not
            want = truth["enum"]["sched"]
            self.assertEqual(args["sched"], {"$enum": "__main__." + want["name"].split(".")[0], "value": want["value"]})
            self.assertEqual(args["layer_cls"], "<%s>" % truth["class"]["layer_cls"], rel)
            self.assertEqual(args["dtype"], truth["args_repr"]["dtype"])
            self.assertEqual(args["hub_token"], kg_redact.redact_secret(FAKE_HUB_TOKEN))
            self.assertNotIn(FAKE_HUB_TOKEN, raw)
            self.assertNotIn("FAKEtok123", raw)
            self.assertEqual(set(args), set(truth["args_repr"]))
        # the legacy file says the same as the zip one, but for what describes the file itself
        zip_doc, legacy_doc = docs[False], docs[True]
        for f in FILE_FIELDS:
            zip_doc.pop(f)
            legacy_doc.pop(f)
        self.assertEqual(zip_doc, legacy_doc)



def plain(v):
    """A probe value as the library's own to_dict()/JSON shows it: an enum member by its value, a stand-in's fields
    without its class."""
    if isinstance(v, dict):
        if set(v) == {"$enum", "value"}:
            return v["value"]
        return {k: plain(x) for k, x in v.items() if k != "$class"}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


class HfTrainerTest(unittest.TestCase):
    def test_training_args_match_to_dict(self):
        want = TRUTH["hf_trainer"]["to_dict"]
        for rel, truth in TRUTH["hf_trainer"]["checkpoints"].items():
            for target in (rel, rel + "/training_args.bin"):
                doc, raw = probe(target)
                self.assertEqual(doc["argsType"], truth["args_type"], target)
                args = doc["args"]
                # to_dict() masks the hub token itself; the file holds it in clear and the probe redacts it
                self.assertTrue(truth["hub_token_in_file"])
                self.assertEqual(args["hub_token"], kg_redact.redact_secret(FAKE_HUB_TOKEN))
                self.assertNotIn(FAKE_HUB_TOKEN, raw)
                self.assertNotIn(FAKE_HUB_TOKEN[3:], raw)
                self.assertEqual(want["hub_token"], "<HUB_TOKEN>")
                got = plain({k: v for k, v in args.items() if k in want and k != "hub_token"})
                expected = {k: v for k, v in want.items() if k != "hub_token"}
                self.assertEqual(sorted(set(want) - set(args)), [], target)
                for k in sorted(expected):  # all keys, one by one for a readable failure
                    self.assertEqual(got[k], expected[k], "%s: %s" % (target, k))
                # enums keep their class: lr_scheduler_type is SchedulerType("cosine")
                self.assertEqual(args["lr_scheduler_type"], {"$enum": "transformers.trainer_utils.SchedulerType",
                                                             "value": "cosine"})
            doc, _ = probe(rel)
            self.assertEqual((doc["format"], doc["key"], doc["step"]), ("hf-folder", "training_args",
                                                                        truth["global_step"]))


class LightningTest(unittest.TestCase):
    def test_hyper_parameters_match_the_checkpoint(self):
        n = 0
        for vdir, version in TRUTH["lightning"]["versions"].items():
            for rel, truth in version["checkpoints"].items():
                doc, raw = probe(rel)
                self.assertEqual((doc["format"], doc["key"]), ("lightning", "hyper_parameters"), rel)
                self.assertEqual((doc["step"], doc["epoch"]), (truth["global_step"], truth["epoch"]), rel)
                self.assertEqual(sorted(doc["topLevelKeys"]), truth["keys"])
                self.assertNotIn(FAKE_WANDB_KEY, raw)
                want = redacted(truth["hyper_parameters"])
                args = doc["args"]
                self.assertEqual(set(args), set(want), rel)
                for k, v in want.items():
                    n += 1
                    if k in truth["enum"]:  # Sched.COSINE: its class and value (the name is not in the file)
                        cls, name = truth["enum"][k]["name"].split(".")
                        self.assertEqual(v, name)
                        self.assertEqual(args[k], {"$enum": "__main__." + cls, "value": truth["enum"][k]["value"]})
                    elif truth["hyper_parameters_repr"][k].startswith("<class "):  # a class reference
                        self.assertEqual(args[k], "<%s>" % v, (rel, k))
                    else:
                        self.assertEqual(args[k], v, (rel, k))
        self.assertEqual(n, 6 * 7)


class AccelerateTest(unittest.TestCase):
    def test_custom_checkpoint_is_the_args(self):
        for rel, truth in TRUTH["accelerate"]["folders"].items():
            (name, custom), = truth["custom"].items()
            for target in (rel, rel + "/" + name):
                doc, raw = probe(target)
                self.assertEqual(doc["format"], "accelerate", target)
                self.assertEqual(doc["args"], redacted(custom), target)
                self.assertEqual(doc["args"]["wandb_api_key"], kg_redact.redact_secret(FAKE_WANDB_KEY))
                self.assertNotIn(FAKE_WANDB_KEY, raw)
                # the step is the one the run saved, not accelerate's index (checkpoint_0, custom_checkpoint_0)
                self.assertEqual(doc["step"], custom["step"], target)
                self.assertNotEqual(doc["step"], 0)
                self.assertEqual(doc["warnings"], [], target)
                self.assertEqual(doc["key"], None)


class PeftTest(unittest.TestCase):
    def test_adapter_config_is_the_args(self):
        shapes = []
        for rel, truth in TRUTH["peft"].items():
            doc, _ = probe(rel)
            self.assertEqual((doc["format"], doc["key"], doc["argsType"]), ("peft", "adapter_config",
                                                                            "peft LORA adapter"), rel)
            self.assertEqual(doc["args"], redacted(truth["adapter_config_json"]))
            self.assertEqual(doc["args"], redacted(truth["config"]))  # what PeftConfig.from_pretrained reads
            self.assertEqual(doc["baseModel"], truth["config"]["base_model_name_or_path"])
            self.assertEqual(doc["step"], None)  # nothing in the folder says; never guessed from its name
            self.assertGreater(doc["tensors"]["count"], 0)
            self.assertEqual(doc["warnings"], [])
            shapes.append(sorted(doc["args"]))
        self.assertEqual(shapes[0], shapes[1])

    def test_base_model_and_an_hf_folder_with_an_adapter(self):
        import shutil
        import tempfile
        tmp = tempfile.mkdtemp(prefix="kg-real-args-")
        self.addCleanup(shutil.rmtree, tmp, True)
        (rel, truth), = list(TRUTH["peft"].items())[:1]
        cfg = dict(truth["adapter_config_json"], base_model_name_or_path="https://user:FAKEpw123@hub.example/gpt2")
        hf = os.path.join(tmp, "checkpoint-2")
        shutil.copytree(os.path.join(REAL, next(iter(TRUTH["hf_trainer"]["checkpoints"]))), hf)
        with open(os.path.join(hf, "adapter_config.json"), "w") as f:
            json.dump(cfg, f)
        doc = ckpt_args.main([hf])
        self.assertEqual((doc["format"], doc["key"]), ("hf-folder", "training_args"))
        self.assertIn("adapter_config", doc["topLevelKeys"])
        self.assertEqual(doc["baseModel"], "https://user:%s@hub.example/gpt2" % kg_redact.redact_secret("FAKEpw123"))
        self.assertNotIn("FAKEpw123", kg_common.dumps(doc))
        self.assertEqual(ckpt_args.main([hf, "--key", "adapter_config"])["args"]["r"], 4)


class DcpTest(unittest.TestCase):
    def test_items_and_args(self):
        for rel, truth in TRUTH["dcp"].items():
            doc, _ = probe(rel)
            self.assertEqual((doc["format"], doc["key"]), ("dcp-metadata", "args"))
            flat = sorted(k for k in doc["topLevelKeys"] if k != "args") + sorted(
                "args." + k for k in doc["args"])
            self.assertEqual(sorted(flat), truth["keys"])
            self.assertEqual(doc["step"], int(rel.rsplit("_", 1)[1]))  # the generator saved step=N in step_N

if __name__ == "__main__":
    unittest.main()
