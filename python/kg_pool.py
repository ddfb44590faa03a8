"""The resident helper's spares: the children forked ahead of need (stdlib only, Python 3.8+).

A mixin of kg_helper.Helper (the state it reads and writes is the helper's: ``spares``, ``zygote``, ``prep``,
``retry_at``, ``t_active``, ``by_id``, ``queue``, ``running``), kept apart so that the helper's main loop stays one
file of its own size. Shipped with the helper (src/core/probes/sources.ts HELPER_MODULES).
"""
import gc
import os
import re
import signal
import time
from typing import Any  # noqa: F401 (type comments)

import kg_spare
from kg_frame import kill_group

# How many children wait, forked ahead of need, is the client's to say (knownGood.helper.spares, passed as
# ``--spares N``): at most MAX_SPARES (no more requests run at once), SPARES_DEFAULT without a word from it (a helper
# run by hand). Each idle spare holds memory of its own and is one more process in the host owner's ps: see
# docs/architecture.md "What runs on a host" for what each holds.
MAX_SPARES = 8
SPARES_DEFAULT = 4
# While requests run, a spare taken is replaced only once fewer than BUSY_SPARES are left (where the zygote forks
# them; one where this process forks them): a burst no longer than the pool makes no process while it runs (each
# costs ~2.5 ms of CPU, 500 page faults, on the request's time on a small host: 4 requests back to back 8.4 ms with
# two kept, 5.7 with one, 4.8 with 24 made ahead), and a longer one finds the next spare on its way.
BUSY_SPARES = 1
# Once no request has run or waited for IDLE_S, the zygote is asked for the rest up to the client's number, one at a
# time (the next once it says it forked the last) and none while a request runs, so that a burst after a pause (a
# host's tree expanding, a dashboard opening) finds its first requests' children forked and their probe's module
# executed.
IDLE_S = 0.05
# Once idle SHRINK_S (the client's ``--shrink-after-ms``), all but one go: a host nobody is looking at keeps the
# helper, its zygote and one spare. The next request finds that one; the pool grows back once idle again.
SHRINK_S = 60.0
FORK_RETRY_S = 5.0


class UsageError(ValueError):
    pass


def pool_options(argv):
    """The client's words after the loader (core/probes/runner.ts helperArgv): (spares, shrink-after seconds).
    Anything else is refused: these words are data, validated, never passed on."""
    spares, shrink_s = SPARES_DEFAULT, SHRINK_S
    words = list(argv)
    while words:
        opt = words.pop(0)
        val = words.pop(0) if words else ""
        if opt == "--spares" and re.match(r"[0-9]{1,2}\Z", val) and 1 <= int(val) <= MAX_SPARES:
            spares = int(val)
        elif opt == "--shrink-after-ms" and re.match(r"[0-9]{1,9}\Z", val):
            shrink_s = int(val) / 1000.0
        else:
            raise UsageError("expected --spares 1-%d or --shrink-after-ms MS, got %r %r" % (MAX_SPARES, opt, val))
    return spares, shrink_s


class SparePool(object):
    # What this mixin uses of the helper, all set or defined by kg_helper.Helper (its own come first in the MRO):
    # declared here for the type checker only.
    sel = None  # type: Any
    zygote = None  # type: Any
    queue = None  # type: Any
    running = None  # type: Any
    by_id = None  # type: Any
    spares = None  # type: Any
    prep = None  # type: Any
    t_active = 0.0
    retry_at = 0.0
    max_spares = SPARES_DEFAULT
    shrink_s = SHRINK_S
    ended = None  # type: Any
    on_child_output = None  # type: Any
    _settle = None  # type: Any

    def make_spares(self):
        """Forks the next requests' children ahead of need: a fork costs 1-3 ms, off the request's path. Asked of
        the zygote where there is one (then this process never forks, see kg_zygote), else forked here."""
        zygote = self.zygote
        if zygote is not None:
            idle = self.idle_s()
            if idle >= self.shrink_s:
                # Idle long enough: one spare stays (asked ones on their way go when they come).
                self.drop_spares(keep=1)
            if time.monotonic() < self.retry_at:
                return
            have = len(self.spares) + len(zygote.asked)
            more = self.spare_target(idle) - have
            if idle >= IDLE_S and idle < self.shrink_s:
                # Idle: the rest one at a time, above what a request needs at once.
                more = max(min(BUSY_SPARES, self.max_spares) - have, 1 if more > 0 and not zygote.asked else 0)
            for _ in range(more):
                if not zygote.ask(self.prep):
                    self.zygote_later.append(None)  # stopped from the loop (this may run inside a start)
                    return
            return
        if self.spares:
            return
        ctl_r, ctl_w = os.pipe()
        rfd, wfd = os.pipe()
        # What exists now is never collected in the child: its collector does not touch (and copy) those pages.
        gc.freeze()
        try:
            pid = os.fork()
        except OSError:
            for fd in (ctl_r, ctl_w, rfd, wfd):
                os.close(fd)
            return
        if pid == 0:
            kg_spare.spare(self, ctl_r, ctl_w, rfd, wfd, self.prep[1:] if self.prep is not None else None)
        os.close(ctl_r)
        os.close(wfd)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        self.spares.append((pid, ctl_w, rfd, self.prep[0] if self.prep is not None else None))

    def idle_s(self):
        """Seconds since a request last ran or waited (0 while one does)."""
        if self.by_id or self.queue:
            return 0.0
        return max(0.0, time.monotonic() - self.t_active)

    def spare_target(self, idle):
        """How many spares the pool holds after ``idle`` seconds without a request."""
        if idle >= self.shrink_s:
            return 1
        if idle >= IDLE_S:
            return self.max_spares
        return min(BUSY_SPARES, self.max_spares)

    def pool_timeout(self):
        """Seconds until the pool changes by itself (grows once idle, shrinks after SHRINK_S), or None."""
        zygote = self.zygote
        if zygote is None or zygote.asked or self.by_id or self.queue:
            return None
        idle = self.idle_s()
        waits = []
        if len(self.spares) < self.max_spares and idle < IDLE_S:
            waits.append(IDLE_S - idle)
        if len(self.spares) < self.spare_target(idle):
            waits.append(max(0.0, self.retry_at - time.monotonic()))
        if len(self.spares) > 1 and idle < self.shrink_s:
            waits.append(self.shrink_s - idle)
        return min(waits) if waits else None

    def pool_status(self):
        """What the "status" op answers: the spares (their pids), how many are on their way, what the pool is
        heading for, and whether it is at rest (nothing running, asked or missing: it changes only by itself)."""
        zygote = self.zygote
        idle = self.idle_s()
        asked = len(zygote.asked) if zygote is not None else 0
        target = self.spare_target(idle) if zygote is not None else 1
        return {
            "spares": [sp[0] for sp in self.spares],
            "asked": asked,
            "target": target,
            "max": self.max_spares,
            "shrinkAfterS": self.shrink_s,
            "idleS": round(idle, 3),
            "running": len(self.running),
            "pid": os.getpid(),
            "zygote": zygote.pid if zygote is not None else None,
            "atRest": (not self.running and not self.by_id and not self.queue and not asked and idle >= IDLE_S
                       and len(self.spares) == target),
        }

    def on_zygote(self, wait_s=0.0):
        """Takes what the zygote said: a spare it forked, a child of it that ended. Waiting (from fork, while a
        request is being started) only the spares are taken at once; the rest waits for the loop (settling a
        child starts waiting requests, which must not happen inside a start)."""
        zygote = self.zygote
        if zygote is None:
            return
        records = zygote.records(wait_s)
        if records is None:
            self.zygote_later.append(None)
        else:
            for kind, pid, status in records:
                if kind == b"P" and zygote.asked:
                    ctl_w, rfd, key = zygote.asked.popleft()
                    if pid > 0:
                        self.spares.append((pid, ctl_w, rfd, key))
                    else:
                        os.close(ctl_w)
                        os.close(rfd)
                        # The zygote could not fork (a process limit, memory): no spare is asked for until
                        # FORK_RETRY_S later, rather than one failing fork after another (a request meanwhile is
                        # forked here, or answered with the fork's error).
                        self.retry_at = time.monotonic() + FORK_RETRY_S
                elif kind == b"X":
                    self.zygote_later.append((pid, status))
        if not wait_s:
            self.after_zygote()

    def after_zygote(self):
        later, self.zygote_later = self.zygote_later, []
        for event in later:
            if event is None:
                self.stop_zygote()
            else:
                self.ended(*event)

    def stop_zygote(self):
        """The zygote is gone or failed: spares are forked here from now on."""
        zygote, self.zygote = self.zygote, None
        if zygote is None:
            return
        try:
            self.sel.unregister(zygote.sock)
        except (KeyError, ValueError):
            pass
        zygote.close()
        # Its children die with it (PR_SET_PDEATHSIG), and no one will report how: killed, as far as we know.
        self.drop_spares()
        for job in [j for j in self.running.values() if j.zygote_child and j.status is None]:
            kill_group(job.pid)
            job.status = signal.SIGKILL  # a wait status: killed by SIGKILL
            if job.rfd is not None:
                self.on_child_output(job)
            self._settle(job)

    def drop_spares(self, keep=0):
        """Ends the spares but ``keep`` of them (those prepared for the last request's probe stay first)."""
        if len(self.spares) <= keep:
            return
        last = self.prep[0] if self.prep is not None else None
        # Kept: those prepared for the last probe, the oldest first (ready the longest); the others go first.
        self.spares.sort(key=lambda sp: sp[3] != last)
        while len(self.spares) > keep:
            pid, ctl, rfd, _ = self.spares.pop()
            os.close(ctl)
            os.close(rfd)
            kill_group(pid)
