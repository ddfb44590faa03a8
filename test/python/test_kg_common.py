"""kg_common's one-of-each helpers: sizes printed as the TypeScript side prints them, one argument parser."""
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

import kg_common  # noqa: E402

with open(os.path.join(ROOT, "test", "fixtures", "format", "bytes.json"), encoding="utf-8") as _f:
    BYTES = json.load(_f)["cases"]


class FormatBytesTest(unittest.TestCase):
    def test_the_vectors_shared_with_format_ts(self):
        self.assertGreater(len(BYTES), 40)
        for n, want in BYTES:
            if isinstance(n, str):
                n = float(n)  # NaN, Infinity, -Infinity
            self.assertEqual(kg_common.format_bytes(n), want, n)

    def test_python_ints_beyond_a_float_are_nonsense_not_a_crash(self):
        self.assertEqual(kg_common.format_bytes(10 ** 400), "?")
        self.assertEqual(kg_common.format_bytes(3 * 1024 ** 3), "3.0 GB")

    def test_limit_messages_use_it(self):
        self.assertEqual(str(kg_common.LimitError("read", "the pickle", 64 << 20)),
                         "the pickle: stopped at the read limit of 64.0 MB")


class CallProbeTest(unittest.TestCase):
    def test_an_answer_too_big_to_write_ends_as_limit_memory_with_its_footprint(self):
        # MemoryError while the answer is written (a 64 MiB read returned whole): the error envelope had no footprint
        class TooBig:
            def __repr__(self):
                raise MemoryError()

        doc, text, status = kg_common.call_probe(lambda argv: {"data": TooBig()}, [])
        self.assertEqual((doc["ok"], doc["error"]["code"], status), (False, "limit-memory", 2))
        self.assertIn("maxRssKb", json.loads(text)["footprint"])


class ArgParserTest(unittest.TestCase):
    def test_a_bad_command_line_is_a_bad_args_error_naming_the_probe(self):
        p = kg_common.arg_parser("some_probe.py", add_help=False)
        p.add_argument("--root", required=True)
        self.assertEqual(p.parse_args(["--root", "/x"]).root, "/x")
        with self.assertRaises(kg_common.ProbeError) as e:
            p.parse_args(["--nope"])
        self.assertEqual(e.exception.code, "bad-args")
        self.assertTrue(str(e.exception).startswith("some_probe: "), str(e.exception))


if __name__ == "__main__":
    unittest.main()
