"""Tests of kg_redact's redaction against the vectors shared with src/core/redact.ts (test/fixtures/redaction)."""
import hashlib
import json
import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

import kg_redact  # noqa: E402

with open(os.path.join(ROOT, "test", "fixtures", "redaction", "cases.json"), encoding="utf-8") as _f:
    CASES = json.load(_f)


def expand(x):
    """{{h:VALUE}} -> <redacted sha256:…> of VALUE, through strings, lists and dicts."""
    if isinstance(x, str):
        return re.sub(r"\{\{h:(.*?)\}\}", lambda m: "<redacted sha256:%s>"
                      % hashlib.sha256(m.group(1).encode()).hexdigest()[:12], x)
    if isinstance(x, list):
        return [expand(v) for v in x]
    if isinstance(x, dict):
        return {k: expand(v) for k, v in x.items()}
    return x


class SharedVectorsTest(unittest.TestCase):
    def test_names(self):
        for n in CASES["secretNames"]:
            self.assertTrue(kg_redact.is_secret_name(n), n)
        for n in CASES["harmlessNames"]:
            self.assertFalse(kg_redact.is_secret_name(n), n)

    def test_values(self):
        for c in CASES["values"]:
            self.assertEqual(kg_redact.redact_value(c["name"], c["value"]), expand(c["expect"]), c)

    def test_texts(self):
        for c in CASES["texts"]:
            text = expand(c["text"])
            got = kg_redact.redact_text(text)
            self.assertEqual(got, expand(c["expect"]), c["text"])
            self.assertEqual(kg_redact.redact_text(got), got, "redacting twice changes nothing: " + c["text"])

    def test_argvs(self):
        for c in CASES["argvs"]:
            got = kg_redact.redact_argv(expand(c["argv"]))
            self.assertEqual(got, expand(c["expect"]), c["argv"])
            self.assertEqual(kg_redact.redact_argv(got), got, "redacting twice changes nothing: %r" % c["argv"])

    def test_trees(self):
        for c in CASES["trees"]:
            got = kg_redact.redact_tree(c["tree"])
            self.assertEqual(got, expand(c["expect"]))
            self.assertEqual(kg_redact.redact_tree(got), got)


class RedactionTest(unittest.TestCase):
    def test_different_secrets_different_hashes(self):
        a = kg_redact.redact_value("hub_token", "hf_one")
        b = kg_redact.redact_value("hub_token", "hf_two")
        self.assertNotEqual(a, b)
        self.assertRegex(a, r"^<redacted sha256:[0-9a-f]{12}>$")

    def test_a_metrics_result_is_not_copied(self):
        doc = {"series": [{"key": "train/loss", "steps": list(range(200000)),
                           "values": [float(i) / 7 for i in range(200000)]} for _ in range(3)],
               "records": [{"step": i, "loss": 1.5, "phase": "train"} for i in range(50000)]}
        out = kg_redact.redact_tree(doc)
        # Lists of numbers are walked once and returned as they are (what keeps redaction cheap on a big result;
        # its time is in the bench's probe footprints, not a timed test).
        for a, b in zip(out["series"], doc["series"]):
            self.assertIs(a["values"], b["values"])
            self.assertIs(a["steps"], b["steps"])
        self.assertEqual(out["records"][7], doc["records"][7])


if __name__ == "__main__":
    unittest.main()
