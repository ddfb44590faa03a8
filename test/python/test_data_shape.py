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
SHAPES = os.path.join(HERE, "..", "fixtures", "real", "datashape")


def _type(t):
    """pyarrow's type text without the child's name: list<element: int32> is list<int32>."""
    return t.replace("element: ", "").replace("item: ", "")


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


class ColumnarTest(unittest.TestCase):
    """python/data_columnar.py on files the real pyarrow and datasets wrote (test/fixtures/real/datashape)."""

    @classmethod
    def setUpClass(cls):
        with open(os.path.join(SHAPES, "truth.json")) as f:
            cls.truth = json.load(f)["files"]

    def test_parquet_footers_say_what_pyarrow_reads(self):
        for name in ("short.parquet", "long.parquet"):
            got = data_shape.summaries(os.path.join(SHAPES, name))[0]
            want = self.truth[name]
            self.assertEqual(got["rows"], want["num_rows"], name)
            self.assertEqual(got["rowGroups"], want["num_row_groups"], name)
            self.assertEqual(got["rowGroupRows"], want["row_group_rows"], name)
            self.assertEqual(got["columns"], want["columns"], name)
            self.assertEqual(got["types"], [_type(t) for t in want["types"]], name)
            self.assertEqual(got["createdBy"], want["created_by"], name)

    def test_arrow_file_and_stream_rows_schema_and_sample_lengths(self):
        for name, length in (("short.arrow", 32), ("long.stream.arrow", 128)):
            got = data_shape.summaries(os.path.join(SHAPES, name))[0]
            want = self.truth[name]
            self.assertEqual((got["rows"], got["columns"]), (want["num_rows"], want["columns"]), name)
            self.assertEqual(got["types"], [_type(t) for t in want["types"]], name)
            self.assertEqual((got["rowLength"], got["meanLength"], got["padded"]), (length, length, False), name)
        self.assertEqual(data_shape.summaries(os.path.join(SHAPES, "short.arrow"))[0]["recordBatches"],
                         self.truth["short.arrow"]["num_record_batches"])

    def test_saved_datasets_padding_shows_as_a_shorter_real_length(self):
        short = data_shape.summaries(os.path.join(SHAPES, "hf-short"))
        padded = data_shape.summaries(os.path.join(SHAPES, "hf-padded"))
        self.assertEqual(len(short), 1)
        self.assertEqual((short[0]["format"], short[0]["rows"], short[0]["rowLength"], short[0]["padded"]),
                         ("hf-datasets", self.truth["hf-short"]["num_rows"], 24, False))
        self.assertEqual((padded[0]["rows"], padded[0]["rowLength"], padded[0]["meanLength"], padded[0]["padded"]),
                         (self.truth["hf-padded"]["num_rows"], 96, 24.0, True))
        self.assertEqual(short[0]["columns"], self.truth["hf-short"]["columns"])

    def test_a_dataset_dict_is_one_summary_a_split(self):
        got = data_shape.summaries(os.path.join(SHAPES, "hf-dict"))
        self.assertEqual(dict((s["split"], s["rows"]) for s in got), self.truth["hf-dict"]["splits"])
        self.assertEqual(got[0]["file"], "hf-dict/train")

    def test_npz_members_as_npy_and_a_json_list_of_records(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d, True)
        try:
            import numpy as np
        except ImportError:
            self.skipTest("numpy writes the .npz files")
        ids = np.zeros((64, 33), dtype=np.uint16)
        ids[:, :10] = 7  # 10 real tokens, then padding: the real length shows through the zip
        ids[:, :10] += np.arange(10, dtype=np.uint16)
        np.savez_compressed(os.path.join(d, "train.npz"), input_ids=ids, labels=np.arange(64))
        got = data_shape.summaries(d)
        self.assertEqual([g["file"] for g in got], ["train.npz:input_ids.npy", "train.npz:labels.npy"])
        self.assertEqual((got[0]["rows"], got[0]["rowLength"], got[0]["meanLength"], got[0]["padded"]),
                         (64, 33, 10.0, True))
        self.assertEqual(got[1]["shape"], [64])
        with open(os.path.join(d, "val.json"), "w") as f:
            json.dump({"version": 1, "data": [{"text": "a" * 10}] * 30}, f)
        [js] = [g for g in data_shape.summaries(d) if g["format"] == "json"]
        self.assertEqual((js["rows"], js["meanLineBytes"]), (30, 22.0))
        # a broken zip named .npz is no summary, never a failure
        with open(os.path.join(d, "bad.npz"), "wb") as f:
            f.write(b"PK\x03\x04 not a zip")
        self.assertTrue(all(not g["file"].startswith("bad.npz") for g in data_shape.summaries(d)))

    def test_megatron_idx_sequences_and_their_lengths_and_a_flat_bin(self):
        # Megatron-LM is not installed here: the .idx is written from its documented layout (indexed_dataset.py:
        # magic, version, dtype code, sequence count, document-index count, int32 sizes, int64 pointers, int64 doc_idx)
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d, True)
        sizes = [100, 120, 80, 1024, 96]
        with open(os.path.join(d, "owt_text_document.idx"), "wb") as f:
            f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(sizes), 3))
            f.write(struct.pack("<%di" % len(sizes), *sizes))
            f.write(struct.pack("<%dq" % len(sizes), *[2 * sum(sizes[:i]) for i in range(len(sizes))]))
            f.write(struct.pack("<3q", 0, 2, 5))
        with open(os.path.join(d, "owt_text_document.bin"), "wb") as f:
            f.write(b"\0" * 2 * sum(sizes))
        [idx] = data_shape.summaries(d)  # the .bin beside it is the .idx's tokens: no summary of its own
        self.assertEqual((idx["format"], idx["dtype"], idx["rows"], idx["documents"]), ("megatron-idx", "uint16", 5, 2))
        self.assertEqual((idx["tokens"], idx["meanLength"], idx["medianLength"]), (1420, 284.0, 100))
        # nanoGPT's prepare.py writes train.bin alone: uint16 tokens, no header
        flat = os.path.join(d, "nano")
        os.makedirs(flat)
        with open(os.path.join(flat, "train.bin"), "wb") as f:
            f.write(b"\0" * 4000)
        self.assertEqual(data_shape.summaries(flat), [{"file": "train.bin", "format": "tokens-bin", "bytes": 4000,
                                                        "tokensIfUint16": 2000}])
        # a cut .idx (the count says more than the file holds) is no length
        with open(os.path.join(d, "cut.idx"), "wb") as f:
            f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, 1000, 3) + b"\0" * 12)
        cut = data_shape.idx_summary(os.path.join(d, "cut.idx"), float("inf"))
        self.assertNotIn("meanLength", cut)

    def test_cut_or_hostile_files_are_no_summary(self):
        d = tempfile.mkdtemp()
        try:
            with open(os.path.join(SHAPES, "short.parquet"), "rb") as f:
                pq = f.read()
            with open(os.path.join(SHAPES, "long.stream.arrow"), "rb") as f:
                arrow = f.read()
            cases = {
                "cut.parquet": pq[:len(pq) // 2],
                "huge-footer.parquet": pq[:-8] + struct.pack("<I", 1 << 30) + b"PAR1",
                "zeros-footer.parquet": b"PAR1" + b"\0" * 64 + struct.pack("<I", 60) + b"PAR1",
                "cut.arrow": arrow[:300],
                "garbage.arrow": b"\xff\xff\xff\xff" + struct.pack("<I", 64) + b"\x07" * 64,
                "huge.arrow": b"\xff\xff\xff\xff" + struct.pack("<I", 1 << 31),
            }
            for name, data in cases.items():
                with open(os.path.join(d, name), "wb") as f:
                    f.write(data)
            os.mkfifo(os.path.join(d, "fifo.parquet"))
            os.mkfifo(os.path.join(d, "fifo.arrow"))
            got = data_shape.summaries(d)  # a FIFO is refused, never opened to block
            self.assertEqual([s for s in got if s.get("rows")], [], got)
            # a cut stream still says the schema and the rows of its whole batches, never more than were written
            self.assertLessEqual(sum(s.get("rows") or 0 for s in got), self.truth["long.stream.arrow"]["num_rows"])
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
