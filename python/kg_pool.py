"""The resident helper's spares: the children forked ahead of need (stdlib only, Python 3.8+).

A mixin of kg_helper.Helper (the state it reads and writes is the helper's: ``spares``, ``zygote``, ``prep``,
``retry_at``, ``t_active``, ``by_id``, ``queue``, ``running``), kept apart so that the helper's main loop stays one
file of its own size. Shipped with the helper (src/core/probes/sources.ts HELPER_MODULES).
"""
import gc
import os
import signal
import time
from typing import Any  # noqa: F401 (type comments)

import kg_spare
from kg_frame import kill_group

# Children forked ahead of need, idle until a request comes: two where the zygote forks them, so that requests back
# to back (a poll, a burst of clicks) do not wait for the next one to be made; one where this process forks them.
SPARES = 2
# Where the zygote forks them: the spares made once no request has run or waited for IDLE_S, so that a burst after a
# pause (a host's tree expanding, a dashboard opening) finds each request's child forked and its probe's module
# executed, and none of them waits for a fork or competes with one. One is asked for at a time (the next once the
# zygote says it forked the last), and none while a request runs. Their cost: an idle spare holds 1.5-1.9 MB of
# memory of its own (USS; PSS 4.3-4.5 MB, from /proc/PID/smaps_rollup, python 3.11 here), ~45 MB for POOL of them.
POOL = 24
IDLE_S = 0.05
FORK_RETRY_S = 5.0


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
    ended = None  # type: Any
    on_child_output = None  # type: Any
    _settle = None  # type: Any

    def make_spares(self):
        """Forks the next requests' children ahead of need: a fork costs 1-3 ms, off the request's path. Asked of
        the zygote where there is one (then this process never forks, see kg_zygote), else forked here."""
        zygote = self.zygote
        if zygote is not None:
            if time.monotonic() < self.retry_at:
                return
            more = SPARES - len(self.spares) - len(zygote.asked)
            if more <= 0 and not zygote.asked and len(self.spares) < POOL and self.idle_for() <= 0:
                more = 1
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

    def idle_for(self):
        """Seconds until the helper counts as idle (no request running or waiting for IDLE_S): <= 0 once it is."""
        if self.by_id or self.queue:
            return IDLE_S
        return self.t_active + IDLE_S - time.monotonic()

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

    def drop_spares(self):
        while self.spares:
            pid, ctl, rfd, _ = self.spares.pop()
            os.close(ctl)
            os.close(rfd)
            kill_group(pid)
