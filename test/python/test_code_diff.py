"""python/code_diff.py: what a code change really is, token by token."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

import code_diff  # noqa: E402

LOOP = '''def lr_at(step):
    """Cosine."""
    return 0.1 * step


def main():
    for step in range(10):
        loss = step * 2
        opt.step()
'''


class CodeDiffTest(unittest.TestCase):
    def test_a_comment_a_docstring_and_blank_lines_are_cosmetic(self):
        new = LOOP.replace('    """Cosine."""\n', '    """Linear warm-up, then cosine."""\n\n    # why\n')
        r = code_diff.compare(LOOP, new, "train.py")
        self.assertTrue(r["cosmetic"])
        self.assertEqual(r["functions"], ["lr_at"])

    def test_a_host_sync_added_is_code_with_its_hunk_and_function(self):
        new = LOOP.replace("        opt.step()\n", "        opt.step()\n        last = loss.item()  # progress\n")
        r = code_diff.compare(LOOP, new, "train.py")
        self.assertFalse(r["cosmetic"])
        self.assertEqual(r["functions"], ["main"])
        self.assertEqual(r["hunks"][0]["new"], ["        last = loss.item()  # progress"])

    def test_a_changed_string_value_is_code(self):
        self.assertFalse(code_diff.compare('x = "a"\n', 'x = "b"\n', "a.py")["cosmetic"])

    def test_not_python_is_never_cosmetic(self):
        self.assertFalse(code_diff.compare("a: 1\n", "a: 1 # c\n", "conf.yaml")["cosmetic"])
        self.assertFalse(code_diff.compare("def f(:\n", "def f(:  # c\n", "bad.py")["cosmetic"])


if __name__ == "__main__":
    unittest.main()
