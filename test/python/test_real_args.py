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

with open(os.path.join(REAL, "ground_truth.json")) as _f:
    TRUTH = json.load(_f)

# The fake secrets scripts/fixtures/real_artifacts.py wrote into the artifacts.
FAKE_HUB_TOKEN = "hf_FAKEfixtureTOKEN00000000000000000000"
FAKE_WANDB_KEY = "FAKEwandb0123456789abcdef0123456789abcdef"
# What a header of the result says about the file itself, not about its args.
FILE_FIELDS = ("format", "path", "bytes", "bytesRead", "mtime", "step")


def probe(rel, *argv):
    """The probe as the extension runs it (a fresh interpreter): the parsed result and the raw stdout."""
    r = subprocess.run([sys.executable, os.path.join(PYDIR, "ckpt_args.py"), os.path.join(REAL, rel)] + list(argv),
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError("probe failed on %s (%d): %s" % (rel, r.returncode, r.stderr))
    return json.loads(r.stdout), r.stdout


def redacted(tree):
    """Ground truth as the probe must show it: secrets redacted by the same rules."""
    return kg_common.redact_tree(tree)


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
            self.assertEqual(args["hub_token"], kg_common.redact_secret(FAKE_HUB_TOKEN))
            self.assertNotIn(FAKE_HUB_TOKEN, raw)
            self.assertNotIn("FAKEtok123", raw)
            self.assertEqual(set(args), set(truth["args_repr"]))
        # the legacy file says the same as the zip one, but for what describes the file itself
        zip_doc, legacy_doc = docs[False], docs[True]
        for f in FILE_FIELDS:
            zip_doc.pop(f)
            legacy_doc.pop(f)
        self.assertEqual(zip_doc, legacy_doc)


if __name__ == "__main__":
    unittest.main()
