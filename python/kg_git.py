"""git on a checkout that may be anyone's: the one runner What Changed?, the launch recorder and replay use.

Policy (docs/what-changed.md "Git on untrusted checkouts"): reading or copying a checkout never runs a program it
names. git cannot be told to skip a repository's own config (include/includeIf are followed), so instead:
- only read-only plumbing-like commands run (rev-parse, log without patches or signatures, status, config --get,
  ls-files, cat-file); none of them fetches, signs, diffs content, pages or runs hooks;
- every key that names a program is overridden on the command line (-c wins over every config file,
  kg_common.GIT_SAFE_CONFIG), and the features that would consult one are switched off (signatures, external diff,
  textconv, submodule recursion);
- clean/process filters, whose names are the repository's own and so cannot be overridden one by one, are looked
  for first (`filters`): with any, a caller runs nothing that would apply them (status, diff against the tree);
- system and global config are not read (GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL): the answer does not depend on
  the account's own git setup either. Status takes no index lock (GIT_OPTIONAL_LOCKS=0): a training job's own git
  calls are never blocked, and no index write can fire a post-index-change hook.
test_what_changed tests each key.
"""
import os
import select
import subprocess
import time

import kg_common

TIMEOUT_S = 10.0
# What one git command may answer: beyond it, the command is stopped and only whole lines read so far count (a
# `git log --name-only` over years of a big repository would otherwise be read whole into memory).
MAX_OUTPUT = 8 * 1024 * 1024

ENV = dict(os.environ, GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1",
           GIT_CONFIG_GLOBAL=os.devnull, GIT_PAGER="cat", PAGER="cat",
           GIT_SSH_COMMAND="false", GIT_ASKPASS="false", SSH_ASKPASS="false")
for _k in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
           "GIT_EXTERNAL_DIFF"):
    ENV.pop(_k, None)


def command(cwd, args):
    cmd = ["git", "--no-pager"]
    for kv in kg_common.GIT_SAFE_CONFIG:
        cmd += ["-c", kv]
    return cmd + ["-C", cwd] + list(args)


def git_bytes(cwd, *args, max_output=None, timeout=None):
    """git's answer as bytes and whether it was cut at max_output; at most `timeout` seconds (TimeoutExpired past
    it). RuntimeError with git's last line (never its advice to trust a repository another user owns) on failure."""
    max_output = MAX_OUTPUT if max_output is None else max_output
    timeout = TIMEOUT_S if timeout is None else timeout
    cmd = command(cwd, args)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=ENV)
    deadline = time.monotonic() + timeout
    chunks, size, over = [], 0, False
    try:
        fd = p.stdout.fileno()  # type: ignore[union-attr]
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise subprocess.TimeoutExpired(cmd, timeout)
            b = os.read(fd, 1 << 16)
            if not b:
                break
            size += len(b)
            if size > max_output:
                chunks.append(b[:len(b) - (size - max_output)])
                over = True
                break
            chunks.append(b)
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
        p.stdout.close()  # type: ignore[union-attr]
    data = b"".join(chunks)
    if not over and p.returncode != 0:
        text = data.decode("utf-8", "replace")
        raise RuntimeError(kg_common.git_refusal(text) or (text.strip().splitlines() or ["git failed"])[-1])
    return data, over


def git(cwd, *args):
    """git's answer as text, read at most MAX_OUTPUT bytes (then only whole lines) and TIMEOUT_S seconds."""
    data, over = git_bytes(cwd, *args)
    text = data.decode("utf-8", "replace")
    if over:
        return text[:text.rfind("\n") + 1]
    return text


def filters(top):
    """Content filters the repository's configuration names (their commands would run on status or a diff)."""
    try:
        text = git(top, "config", "--get-regexp", r"^filter\..*\.(clean|process)$")
    except RuntimeError:
        return []  # exit 1: no such key
    return [line.split(" ", 1)[0] for line in text.splitlines() if line.strip()]
