"""The resident helper's footprint on a host (kg_pool): how many processes it keeps, what ps calls them, run for real.

Counted from /proc as a host's owner would see them: every process below the helper (its zygote, the zygote's
spares, a request's child). No sleep-then-assert: the tests wait for a state that must come (the helper says its
pool is at rest; the processes below it are those it says), under a guard that only ends a helper that never gets
there.
"""
import json
import os
import subprocess
import sys
import time
import unittest

from test_kg_runtime import LOADER, HELPER_MODULES, HelperCase, src, wait_status

LINUX = sys.platform.startswith("linux")
GUARD_S = 60


def below(root):
    """{pid: (ppid, state, comm, cmdline)} of every process below ``root``, from /proc."""
    procs = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                comm, rest = f.read().split(" (", 1)[1].rsplit(")", 1)
            with open("/proc/%s/cmdline" % name, "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            fields = rest.split()
            procs[int(name)] = (int(fields[1]), fields[0], comm, cmdline)
        except (OSError, IndexError, ValueError):
            pass  # gone meanwhile
    out, seen, grew = {}, {root}, True
    while grew:
        grew = False
        for pid, p in procs.items():
            if pid not in seen and p[0] in seen:
                seen.add(pid)
                out[pid] = p
                grew = True
    return out


def wait_below(case, root, done, what):
    """The processes below ``root`` once ``done`` holds of them (looked at again until then)."""
    end = time.monotonic() + GUARD_S
    while True:
        procs = below(root)
        if done(procs):
            return procs
        if time.monotonic() >= end:
            case.fail("%s: %d processes below the helper: %s" % (what, len(procs), sorted(procs.values())))
        time.sleep(0.02)


class Burst(object):
    """Requests as a tree's expand sends them: 20 one after the other, then 20 in flight at once."""

    def burst(self):
        req = {"op": "probe", "name": "host_info", "hash": "hi", "src": src("host_info"), "args": []}
        for i in range(1, 21):
            self.assertTrue(self.ask(dict(req, id=i))["ok"])
        for i in range(21, 41):
            self.write(dict(req, id=i))
        self.assertEqual(sorted(self.read()["id"] for _ in range(20)), list(range(21, 41)))


@unittest.skipUnless(LINUX, "the zygote, its pool and the names ps shows are Linux's")
class SparesAskedFor(HelperCase, Burst):
    ARGS = ("--spares", "3")

    def test_idle_after_a_burst_the_helper_its_zygote_and_the_spares_asked_for_and_nothing_else(self):
        self.burst()
        pool = wait_status(self, lambda st: st["atRest"], GUARD_S)
        self.assertEqual((len(pool["spares"]), pool["max"]), (3, 3), pool)
        # The requests' children gone (reaped by the zygote), what is left is what the helper keeps.
        kept = set([pool["zygote"]] + pool["spares"])
        procs = wait_below(self, self.p.pid, lambda ps: set(ps) == kept, "not only the zygote and the spares")
        # The helper itself, its zygote and 3 spares: the helper once kept 24 (25 processes below it).
        self.assertLessEqual(len(procs) + 1, 3 + 2, procs)
        # What ps shows of each.
        with open("/proc/%d/cmdline" % self.p.pid, "rb") as f:
            self.assertEqual(f.read().rstrip(b"\0"), b"known-good helper")
        self.assertEqual(procs[pool["zygote"]][2:], ("kg-zygote", "known-good zygote"))
        for pid in pool["spares"]:
            self.assertEqual(procs[pid][1:], ("S", "kg-spare", "known-good spare"))

    def test_a_request_runs_in_a_process_ps_calls_a_known_good_spare(self):
        d = self.make_dir()
        fifo, said = os.path.join(d, "hold"), os.path.join(d, "pid")
        os.mkfifo(fifo)
        # The probe says its pid, then blocks opening the FIFO until the test opens it to write: it runs as long as
        # the test looks.
        blocker = ("import os\ndef main(argv):\n    with open(argv[1] + '.tmp', 'w') as f:\n        f.write(str(os.getpid()))\n"
                   "    os.rename(argv[1] + '.tmp', argv[1])\n"
                   "    with open(argv[0], 'rb') as f:\n        return {'n': len(f.read())}\n")
        self.write({"id": 1, "op": "probe", "name": "held", "hash": "hold", "src": blocker, "args": [fifo, said]})
        wait_below(self, self.p.pid, lambda ps: os.path.exists(said), "the request never said its pid")
        with open(said) as f:
            pid = int(f.read())
        # Looked at once it has said it: it runs below the helper until the test writes.
        self.assertEqual(below(self.p.pid)[pid][2:], ("kg-spare", "known-good spare"))
        with open(fifo, "wb") as f:
            f.write(b"abc")
        self.assertEqual(self.read()["result"], {"n": 3})

    def make_dir(self):
        import shutil
        import tempfile

        d = tempfile.mkdtemp(prefix="kg-pool-")
        self.addCleanup(shutil.rmtree, d, True)
        return d


@unittest.skipUnless(LINUX, "the zygote and its pool are Linux's")
class IdleShrinks(HelperCase, Burst):
    # The idle time after which one spare is left: none here, so the state after a burst is that state (the helper
    # started by the extension waits a minute, knownGood's HELPER_SHRINK_AFTER_MS).
    ARGS = ("--spares", "4", "--shrink-after-ms", "0")

    def test_once_idle_past_its_time_one_spare_is_left_and_the_next_request_takes_it(self):
        self.burst()
        # Counted first, by what ps would show: the zygote and one spare, both asleep, nothing else. The helper once
        # kept 24 spares idle, for good (25 processes below it): then this wait ends at its guard.
        wait_below(self, self.p.pid, lambda ps: len(ps) == 2 and all(p[1] == "S" for p in ps.values()),
                   "not the zygote and one spare")
        pool = wait_status(self, lambda st: st["atRest"], GUARD_S)
        self.assertEqual((pool["target"], len(pool["spares"])), (1, 1), pool)
        # A spare asked for during the burst may have come after that count: the helper ends it, the zygote reaps it.
        kept = set([pool["zygote"]] + pool["spares"])
        wait_below(self, self.p.pid, lambda ps: set(ps) == kept, "not the zygote and the spare the helper kept")
        # The one left serves the next request, prepared for it (the last probe's module executed).
        r = self.ask({"id": 50, "op": "probe", "name": "host_info", "hash": "hi", "args": [], "timing": True})
        self.assertEqual((r["result"]["pid"], r["timing"]["how"]), (pool["spares"][0], "prepared"), r)


class Options(unittest.TestCase):
    """The words after the loader are numbers in a range or the helper does not start: never passed on, never a
    guess."""

    def start(self, args):
        p = subprocess.Popen([sys.executable, "-u", "-c", LOADER] + args, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        first = {"modules": [[n, src(n)] for n in HELPER_MODULES], "nonce": "n0nce"}
        out, err = p.communicate(json.dumps(first) + "\n", timeout=GUARD_S)
        return p.returncode, out, err

    def test_a_bad_word_stops_the_helper_before_its_ready_line_and_says_which(self):
        for args in (["--spares", "0"], ["--spares", "9"], ["--spares", "x"], ["--spares", "\u00b2"],
                     ["--spares"], ["--shrink-after-ms", "-1"], ["--shrink-after-ms", "1e3"], ["--python", "3"]):
            code, out, err = self.start(args)
            self.assertEqual((code, out), (2, ""), args)
            self.assertIn("kg_helper: expected --spares 1-8 or --shrink-after-ms MS", err, args)



class GoodWords(HelperCase):
    ARGS = ("--spares", "8", "--shrink-after-ms", "250")

    def test_good_words_are_what_the_pool_keeps(self):
        st = self.ask({"id": 1, "op": "status"})["result"]
        self.assertEqual((st["max"], st["shrinkAfterS"], st["pid"]), (8, 0.25, self.p.pid), st)


if __name__ == "__main__":
    unittest.main()
