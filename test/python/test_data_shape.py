"""python/data_shape.py on the corpus's real data sets (numpy wrote them on the GPU box) and on hand-made files."""
import json
import os
import shutil
import struct
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import data_shape  # noqa: E402

DATA = os.path.join(HERE, "..", "fixtures", "real", "regressions", "data")


class DataShapeTest(unittest.TestCase):
    def test_padded_samples_show_a_shorter_real_length_at_the_same_row_length(self):
        full = data_shape.summaries(os.path.join(DATA, "owt-128"))[0]
        padded = data_shape.summaries(os.path.join(DATA, "owt-128-padded"))[0]
        self.assertEqual((full["file"], full["rows"], full["rowLength"], full["padded"]), ("train.npy", 128, 129, False))
        self.assertEqual(full["meanLength"], 129.0)
        self.assertEqual((padded["rows"], padded["rowLength"], padded["padded"]), (128, 129, True))
        # truth.json: 52.38 real tokens a sample (of 128 inputs; a row holds 129 with the target)
        self.assertLess(abs(padded["meanLength"] - 53.38), 1.0)
        longer = data_shape.summaries(os.path.join(DATA, "owt-256"))[0]
        self.assertEqual((longer["rowLength"], longer["padded"]), (257, False))

    def test_jsonl_rows_and_a_bad_npy_header_is_no_summary(self):
        d = tempfile.mkdtemp()
        try:
            with open(os.path.join(d, "a.jsonl"), "w") as f:
                f.write("\n".join(json.dumps({"text": "x" * i}) for i in range(10)) + "\n")
            with open(os.path.join(d, "b.npy"), "wb") as f:
                f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", 8) + b"{'descr'")
            got = data_shape.summaries(d)
            self.assertEqual([(s["file"], s.get("rows")) for s in got], [("a.jsonl", 10)])
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
