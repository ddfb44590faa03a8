import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import restore_check  # noqa: E402


class RestoreCheckTest(unittest.TestCase):
    def test_file_names(self):
        self.assertEqual(restore_check.dist_of("torch-2.11.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"),
                         ("torch", "2.11.0+cu130"))
        self.assertEqual(restore_check.dist_of("Jinja2-3.1.6-1-py3-none-any.whl"), ("jinja2", "3.1.6"))
        self.assertEqual(restore_check.dist_of("typing_extensions-4.15.0.tar.gz"), ("typing-extensions", "4.15.0"))
        self.assertIsNone(restore_check.dist_of("README.txt"))

    def test_folders_and_indexes(self):
        with tempfile.TemporaryDirectory() as d:
            wheels = os.path.join(d, "wheels")
            os.mkdir(wheels)
            for fn in ("kg_a-1.0-py3-none-any.whl", "kg_a-2.0-py3-none-any.whl", "kg-b-0.1.tar.gz", "notes.txt"):
                open(os.path.join(wheels, fn), "w").close()
            index = os.path.join(d, "simple")
            os.makedirs(os.path.join(index, "kg-c"))
            open(os.path.join(index, "kg-c", "kg_c-3.0-py3-none-any.whl"), "w").close()
            got = restore_check.main(["--find-links=" + wheels, "--find-links=" + os.path.join(d, "gone"),
                                      "--index=file://" + index, "--name=kg_c", "--name=kg-d",
                                      # a closed port on this machine: refused at once, no traffic leaves it
                                      "--index=http://127.0.0.1:9/simple", "--timeout=2"])
        self.assertEqual(got["available"], {"kg-a": ["1.0", "2.0"], "kg-b": ["0.1"], "kg-c": ["3.0"]})
        self.assertEqual(got["listed"], [wheels, "file://" + index])
        self.assertEqual([u["url"] for u in got["unreachable"]], [os.path.join(d, "gone"), "http://127.0.0.1:9/simple"])
        self.assertFalse(got["truncated"])


if __name__ == "__main__":
    unittest.main()
