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

    def test_each_hunk_says_whether_it_runs_and_the_code_it_removed_and_added(self):
        # one comment-only hunk in lr_at, one real hunk in main: the file is code, only main's hunk is
        new = LOOP.replace("    return 0.1 * step\n", "    # the base rate\n    return 0.1 * step\n").replace(
            "        loss = step * 2\n", "        loss = step * 2  # autocast off here\n        loss.backward()\n")
        r = code_diff.compare(LOOP, new, "train.py")
        self.assertFalse(r["cosmetic"])
        self.assertEqual([(h["function"], h["cosmetic"]) for h in r["hunks"]], [("lr_at", True), ("main", False)])
        # the comment is no code: "autocast" is not among the lines the hunk changed
        self.assertEqual((r["hunks"][1]["removed"], r["hunks"][1]["added"]), ([], ["loss.backward()"]))
        self.assertEqual(r["hunks"][0]["added"], [])

    def test_a_line_moved_out_of_its_loop_is_code_not_whitespace(self):
        # the same tokens but another block: opt.step() once after the loop instead of every step
        new = LOOP.replace("        opt.step()\n", "    opt.step()\n")
        r = code_diff.compare(LOOP, new, "train.py")
        self.assertFalse(r["cosmetic"])
        self.assertFalse(r["hunks"][0]["cosmetic"])
        self.assertEqual((r["hunks"][0]["removed"], r["hunks"][0]["added"]), (["opt.step()"], ["opt.step()"]))
        # indentation of another width throughout is still layout
        self.assertTrue(code_diff.compare(LOOP, LOOP.replace("    ", "  "), "train.py")["cosmetic"])

    def test_a_docstring_is_no_code_line_and_hunks_are_counted_beyond_those_sent(self):
        r = code_diff.compare('def f():\n    """One."""\n    return 1\n', 'def f():\n    """Two."""\n    return 1\n',
                              "a.py")
        self.assertTrue(r["hunks"][0]["cosmetic"])
        self.assertEqual((r["hunks"][0]["removed"], r["hunks"][0]["added"]), ([], []))
        old = "".join("x%d = %d\n\n\n" % (i, i) for i in range(20))
        new = "".join("x%d = %d\n\n\n" % (i, i + 1) for i in range(20))
        r = code_diff.compare(old, new, "a.py")
        self.assertEqual((len(r["hunks"]), r["hunkCount"]), (code_diff.MAX_HUNKS, 20))


if __name__ == "__main__":
    unittest.main()
