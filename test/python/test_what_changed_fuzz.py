"""Fuzz of What Changed?'s inputs on the host: the paths the training args name (hostile names and kinds), the git
states of checkouts and the logs, through python/what_changed.py and python/metrics_reduce.py in this process.

Fixed seed, bounded count (as ckpt_fuzz.py is for the checkpoint reader): any failure is reproducible. Each case must
end in one JSON document that answers every fact asked (or one named error for a log), never a traceback, and no
program a case names (a git key, a filter, a `$(…)` in a name) may ever run: each would create MARKER.
"""
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

from kg_test_env import needs_git  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), "python")
if PYDIR not in sys.path:
    sys.path.insert(0, PYDIR)

import kg_common  # noqa: E402
import metrics_reduce  # noqa: E402
import what_changed  # noqa: E402

SEED = 24
CASES = 40
MARKER = "MARKER"

NAMES = [b"data", b"with space", b"new\nline", b"-rf", b"--path", b"\xff\xfe-not-utf8", b"$(touch MARKER)",
         b"`touch MARKER`", b"x" * 250, "\u00e9t\u00e9-\u202e-bidi".encode(), b"..", b"a;b|c&d", b"*?[", b".git"]


def git(cwd, *args, ok=True):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@x", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@x", GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    r = subprocess.run(["git", "-C", cwd] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    if ok and r.returncode != 0:
        raise AssertionError(r.stderr.decode())


class Case:
    def __init__(self, rng, root):
        self.rng, self.root = rng, root
        self.marker = os.path.join(root, MARKER)
        self.prog = os.path.join(root, "prog.sh")
        with open(self.prog, "w") as f:
            f.write("#!/bin/sh\ntouch '%s'\ncat\n" % self.marker)
        os.chmod(self.prog, 0o755)

    def bytes(self, n):
        """n bytes from the seeded generator (os.urandom would make a failure unreproducible)."""
        return self.rng.getrandbits(8 * n).to_bytes(n, "little") if n else b""

    def name(self):
        return os.fsdecode(self.rng.choice(NAMES) + b"-%d" % self.rng.randrange(1000))

    def path(self):
        """One hostile thing at a fresh path: its kind drawn at random."""
        p = os.path.join(self.root, self.name())
        kind = self.rng.randrange(11)
        if kind == 0:
            with open(p, "wb") as f:
                f.write(self.bytes(self.rng.choice([0, 1, 4096, 3 << 20])))
        elif kind == 1:
            os.mkfifo(p)
        elif kind == 2:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.bind(p)
            except OSError:  # a socket path is at most 107 bytes
                os.mkfifo(p)
            finally:
                s.close()
        elif kind == 3:
            os.symlink(p, p)  # a link to itself
        elif kind == 4:
            os.symlink(os.path.join(self.root, "gone"), p)
        elif kind == 5:
            os.symlink("/dev/zero", p)
        elif kind == 6:
            level = p
            os.mkdir(level)
            for _ in range(self.rng.choice([1, 40, 300, 1200])):  # past MAX_DEPTH, and the recursion limit
                level = os.path.join(level, "d")
                os.mkdir(level)
            os.symlink("..", os.path.join(level, "up"))  # a loop, never followed
        elif kind == 7:
            os.mkdir(p)
            for _ in range(self.rng.randrange(30)):
                with open(os.path.join(p, self.name()), "wb") as f:
                    f.write(b"x")
            sub = os.path.join(p, "locked")
            os.mkdir(sub)
            os.chmod(sub, 0)
        elif kind == 8:
            p = p + "/../" + os.path.basename(p)  # a path that goes up: never created
        elif kind == 9:
            os.mkdir(p)
            self.checkout(p)
            p = os.path.join(p, "train.py") if self.rng.random() < 0.5 else p
        # kind 10: nothing there
        return p

    def checkout(self, top):
        """A git checkout in one of the states a shared filesystem can hold, programs named everywhere."""
        state = self.rng.randrange(8)
        git(top, "init", "-q")
        with open(os.path.join(top, "train.py"), "w") as f:
            f.write("print(1)\n")
        with open(os.path.join(top, ".gitattributes"), "w") as f:
            f.write("* diff=evil\n" + ("* filter=evil\n" if state == 6 else ""))
        if state != 0:  # state 0: no commit at all
            git(top, "add", "train.py", ".gitattributes")
            git(top, "commit", "-q", "-m", "one")
            with open(os.path.join(top, "train.py"), "a") as f:
                f.write("print(2)\n")
            if state == 1:
                git(top, "checkout", "-q", "--detach")
            if state == 7:
                self.sign_head(top)
        # The programs are named once the checkout is made: git's own setup commands above would run them.
        for key in ("core.fsmonitor", "core.pager", "gpg.program", "diff.external", "diff.evil.textconv",
                    "diff.evil.command", "core.sshCommand", "credential.helper", "filter.evil.clean",
                    "filter.evil.process"):
            git(top, "config", key, self.prog)
        git(top, "config", "core.hooksPath", self.root)
        git(top, "config", "log.showSignature", "true")
        if state == 2:
            with open(os.path.join(top, ".git", "HEAD"), "w") as f:
                f.write("ref: refs/heads/../../../../etc\n")
        elif state == 3:
            shutil.rmtree(os.path.join(top, ".git", "objects"))
        elif state == 4:
            shutil.rmtree(os.path.join(top, ".git"))
            with open(os.path.join(top, ".git"), "wb") as f:
                f.write(b"gitdir: %s/nowhere\n" % os.fsencode(top))
        elif state == 5:
            with open(os.path.join(top, ".git", "config"), "ab") as f:
                f.write(b"[include]\n\tpath = %s\n" % os.fsencode(os.path.join(top, ".git", "config")))  # itself

    def sign_head(self, top):
        """HEAD made a commit with a (fake) signature: log.showSignature would run gpg.program on it."""
        def out(*args):
            return subprocess.run(["git", "-C", top] + list(args), stdout=subprocess.PIPE, input=None,
                                  check=True).stdout
        body = (b"tree %s\nparent %s\nauthor t <t@x> 1600000000 +0000\ncommitter t <t@x> 1600000000 +0000\n"
                b"gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----\n"
                b"\nsigned\n") % (out("rev-parse", "HEAD^{tree}").strip(), out("rev-parse", "HEAD").strip())
        sha = subprocess.run(["git", "-C", top, "hash-object", "-t", "commit", "-w", "--stdin"], input=body,
                             stdout=subprocess.PIPE, check=True).stdout.decode().strip()
        git(top, "update-ref", "HEAD", sha)

    def log(self):
        """A training log mutated at random: good lines, then garbage of one kind."""
        p = os.path.join(self.root, "log-%d.jsonl" % self.rng.randrange(1 << 30))
        lines = [json.dumps({"step": i, "loss": 1.0 / (i + 1)}).encode() for i in range(self.rng.randrange(1, 300))]
        for _ in range(self.rng.randrange(1, 6)):
            at = self.rng.randrange(len(lines) + 1)
            bad = self.rng.choice([
                b"[" * 100000, b'{"step": 1e999999, "loss": NaN}', b'{"step": ' + b"9" * 5000 + b"}",
                self.bytes(self.rng.randrange(1, 5000)), b'{"step": "x", "loss": {"a": [1, 2]}}',
                b'{"loss": 1, "hub_token": "hf_' + b"a" * 34 + b'"}', b"\x00" * 10000,
                b'{"step": -1, "loss": -Infinity}',
            ])
            lines.insert(at, bad)
        with open(p, "wb") as f:
            f.write(b"\n".join(lines) + (b"\n" if self.rng.random() < 0.5 else b""))
        return p


@needs_git
class WhatChangedFuzz(unittest.TestCase):
    def test_hostile_paths_git_states_and_logs_each_answer_in_one_document(self):
        rng = random.Random(SEED)
        for n in range(CASES):
            root = tempfile.mkdtemp(prefix="kg-wc-fuzz-")
            try:
                case = Case(rng, root)
                paths = [case.path() for _ in range(rng.randrange(1, 5))]
                gits = [case.path() for _ in range(rng.randrange(0, 3))]
                argv = []
                for p in paths:
                    argv += ["--path", p]
                for p in gits:
                    argv += ["--git", p]
                argv += ["--stat", paths[0], "--since", str(rng.choice([0, 1500000000, 4102444800]))]
                self.assertFalse(os.path.exists(case.marker), "the case's own setup ran a program")
                doc, text, status = kg_common.call_probe(what_changed.main, argv)
                where = "case %d (seed %d): %r" % (n, SEED, argv)
                self.assertEqual(status, 0, "%s: %s" % (where, doc.get("error")))
                back = json.loads(text)["result"]
                self.assertEqual([f["path"] for f in back["paths"]], [os.fsdecode(os.fsencode(p)) for p in paths],
                                 where)
                self.assertEqual(len(back["git"]), len(gits), where)
                for f in back["paths"] + back["stats"]:
                    self.assertIsInstance(f["exists"], bool, where)
                    self.assertTrue(f["exists"] or f["error"], where)
                for g in back["git"]:
                    self.assertTrue(g["head"] or g["error"], where)
                log = case.log()
                doc, text, status = kg_common.call_probe(metrics_reduce.main, [log])
                json.loads(text)
                if not doc["ok"]:
                    self.assertIn(doc["error"]["code"], kg_common.ERROR_CODES, "%s log: %s" % (where, doc["error"]))
                self.assertNotIn("hf_" + "a" * 34, text, where)
                self.assertFalse(os.path.exists(case.marker), "%s: a program a case names ran" % where)
            finally:
                _remove(root)


def _remove(root):
    """os.walk and shutil.rmtree recurse (1,200 levels are past the recursion limit): by hand, with a stack."""
    dirs, stack = [], [root]
    while stack:
        d = stack.pop()
        os.chmod(d, 0o755)  # the locked folders
        dirs.append(d)
        for e in os.scandir(d):
            if e.is_dir(follow_symlinks=False):
                stack.append(e.path)
            else:
                os.remove(e.path)
    for d in reversed(dirs):
        os.rmdir(d)


if __name__ == "__main__":
    unittest.main()
