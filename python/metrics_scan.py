"""metrics_reduce's reading of a JSON lines log: whole lines from a byte range into a pass (scan), bounded for lines
too long to hold, large files in parts reduced by forked workers (read_range), and a first look (sample).
"""
import marshal
import os
import sys
import warnings

import kg_common
from metrics_pass import Pass, merge_state, state_of

# Bytes per findall.  Small blocks keep each block's few thousand objects in memory the allocator has just freed
# (and in the CPU caches): 64 KiB reads a million-line log in 1.5 s here where 4 MiB took 2.5-3.6 s.
BLOCK = 64 << 10
# Below this many bytes per process, forking costs more than it saves.
PART_MIN = 8 << 20
PREVIEW_WINDOWS = 2048


def _mid_line(f, pos):
    """Whether pos is inside a line (the byte before it is no newline)."""
    if pos <= 0:
        return False
    f.seek(pos - 1)
    return f.read(1) not in (b"\n", b"")


def scan(p, f, start, stop, buf=None):
    """Feeds the complete lines of bytes [start, stop) (stop None: to the end) to p; returns the offset after them.

    A line longer than LIMITS["line"] is never held whole: it is counted (tooLong) and skipped to its newline. When
    the bytes end inside such a line the offset returned is where reading stopped, inside it, and a read that starts
    inside a line skips to the next one, so a huge unterminated tail is passed over once, not on every poll.
    """
    limit = kg_common.LIMITS["line"]
    skipping = _mid_line(f, start)
    f.seek(start)
    pos = start
    left = None if stop is None else stop - start
    # One buffer, reused: fresh allocations cost more than the parsing on some hosts.
    if buf is None:
        buf = bytearray(BLOCK)
    filled = 0
    first = start == 0
    base = 0
    while True:
        ended = False  # a skipped line just ended: the bytes after it are already in buf
        if skipping:
            nl = buf.find(b"\n", 0, filled)
            done = filled if nl < 0 else nl + 1
            if done:
                p.end_block(pos, pos + done)
                buf[: filled - done] = buf[done:filled]
                filled -= done
                pos += done
            skipping = nl < 0
            ended = not skipping
            if skipping:
                hole = kg_common.next_data(f, pos) - pos
                if left is not None:
                    hole = min(hole, left)
                if hole > 0:
                    p.end_block(pos, pos + hole)
                    pos += hole
                    if left is not None:
                        left -= hole
                    f.seek(pos)
        elif filled == len(buf):  # one line longer than the buffer
            if filled > limit:
                p.counts["tooLong"] += 1
                p.lines += 1
                base = p.lines
                skipping = True
                first = False
                continue
            buf.extend(bytes(min(len(buf), limit + 1 - len(buf))))
        if not ended:
            if left is not None and left <= 0:
                break
            with memoryview(buf) as mv:
                room = len(buf) - filled if left is None else min(len(buf) - filled, left)
                got = f.readinto(mv[filled:filled + room])
            if not got:
                break
            if left is not None:
                left -= got
            filled += got
            if skipping:
                continue
        begin = 0
        if first and filled >= 3:
            first = False
            if buf[:3] == b"\xef\xbb\xbf":
                begin = 3
        cut = buf.rfind(b"\n", begin, filled)
        if cut < 0:
            continue
        p.block(buf, begin, cut, base)
        base = p.lines
        done = cut + 1
        p.end_block(pos, pos + done)
        buf[: filled - done] = buf[done:filled]
        filled -= done
        pos += done
    if skipping and filled:
        p.end_block(pos, pos + filled)
        pos += filled
    # A line still being written (no newline yet) is read next time, whole (a too long one is passed over).
    return pos


def _reach():
    # How far to look for a line boundary: past a line of the longest length read, there is none worth finding.
    return kg_common.LIMITS["line"] + (1 << 16)


def _line_start_after(f, pos):
    """The offset of the first line that starts at or after pos; None when there is none within _reach()."""
    f.seek(pos - 1)
    at = pos - 1
    reach = pos + _reach()
    while at < reach:
        chunk = f.read(1 << 16)
        if not chunk:
            return None
        nl = chunk.find(b"\n")
        if nl >= 0:
            return at + nl + 1
        at += len(chunk)
    return None


def _last_line_start(f, start, size):
    """Where the last whole line of [start, size) starts (start when there is at most one).  Looking back stops
    after _reach() bytes: it then answers where it stopped, inside a line too long to read, which scan skips."""
    newlines = []
    end = size
    stop = max(start, size - 2 * _reach())
    while end > start and len(newlines) < 2:
        if end <= stop:
            return newlines[0] + 1 if newlines else end
        begin = max(start, end - (1 << 16))
        f.seek(begin)
        chunk = f.read(end - begin)
        at = len(chunk)
        while len(newlines) < 2:
            at = chunk.rfind(b"\n", 0, at)
            if at < 0:
                break
            newlines.append(begin + at)
        end = begin
    return newlines[1] + 1 if len(newlines) == 2 else start


def default_jobs():
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(n, 8))


def _can_fork():
    return sys.platform.startswith("linux") and hasattr(os, "fork")

def _fork_worker(a, xmode, start, stop, track, scanner=None):
    """A child process that reduces [start, stop) and sends its state back through a pipe: (pid, read fd)."""
    scanner = scanner or scan
    rfd, wfd = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12 warns about fork in a threaded process (the resident helper): the child only reads its own
        # file, computes and writes to its pipe, and leaves with os._exit, touching no lock another thread holds.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(rfd)
            p = Pass(a, xmode, track)
            with kg_common.open_regular(a.path, buffering=0) as f:
                pos = scanner(p, f, start, stop)
            data = marshal.dumps(state_of(p, pos))
            view = memoryview(data)
            while view:
                n = os.write(wfd, view)
                view = view[n:]
            code = 0
        except BaseException:  # noqa: BLE001 - the parent redoes this part itself
            pass
        finally:
            os._exit(code)
    os.close(wfd)
    return pid, rfd


def _collect(pid, rfd):
    chunks = []
    try:
        while True:
            c = os.read(rfd, 1 << 20)
            if not c:
                break
            chunks.append(c)
    finally:
        os.close(rfd)
    _, status = os.waitpid(pid, 0)
    if status != 0 or not chunks:
        return None
    try:
        return marshal.loads(b"".join(chunks))
    except (ValueError, EOFError, TypeError):
        return None


def read_range(a, xmode, f, size, start, track=False, scanner=None, cutter=None, share=1.0):
    """Reduces the complete lines from start to the end of the file, in parallel parts when it is large.

    ``scanner(p, f, lo, hi)`` reads one part (default: JSON lines), ``cutter(f, pos)`` finds where a part may start
    at or after pos (default: a line start); TensorBoard event files pass their own (record starts) and a ``share``
    of PART_MIN (a part's fewest bytes: their bytes cost more to read)."""
    scan = scanner or globals()["scan"]
    _line_start_after = cutter or globals()["_line_start_after"]
    p = Pass(a, xmode, track)
    jobs = a.jobs if a.jobs is not None else default_jobs()
    span = (size or 0) - start
    jobs = min(jobs, max(1, int(span // (PART_MIN * share))))
    if jobs < 2 or xmode == "line" or not _can_fork():
        return p, scan(p, f, start, None)
    # Parts that start at line starts; the last one runs to the end (and finds the torn line, if any).
    cuts = [start]
    for i in range(1, jobs):
        c = _line_start_after(f, start + span * i // jobs)
        if c is not None and c > cuts[-1]:
            cuts.append(c)
    parts = [(cuts[i], cuts[i + 1] if i + 1 < len(cuts) else None) for i in range(len(cuts))]
    workers = []
    for lo, hi in parts[1:]:
        try:
            workers.append((lo, hi, _fork_worker(a, xmode, lo, hi, track, scanner)))
        except OSError:
            workers.append((lo, hi, None))
    pos = scan(p, f, parts[0][0], parts[0][1])
    for lo, hi, w in workers:
        st = _collect(*w) if w is not None else None
        if st is None:  # the worker failed: do its part here
            q = Pass(a, xmode, track)
            st = state_of(q, scan(q, f, lo, hi))
        merge_state(p, st)
        pos = st["pos"]
    p.jobs = 1 + sum(1 for w in workers if w[2] is not None)
    return p, pos


def sample(p, f, start, size, budget):
    """A first look: whole lines from evenly spaced windows of [start, size), the first and the last included."""
    span = size - start
    n = max(2, min(PREVIEW_WINDOWS, budget // 4096))
    win = max(1, budget // n)
    buf = bytearray(min(win, BLOCK))
    done = start
    used = 0
    for i in range(n):
        if i == 0:
            lo = start
        else:
            lo = _line_start_after(f, max(start + (span - win) * i // (n - 1), done, start + 1))
            if lo is None and i != n - 1:
                continue
        if i == n - 1 or p.bytes_read > 2 * budget:
            # The last window, to the end: the newest lines (and the torn one left alone).  Lines far longer
            # than a window can make the others overrun the budget: then this one comes at once.
            if i != n - 1:
                lo = _line_start_after(f, max(start + span - win, done, start + 1))
            # The last whole line is in even when it is longer than a window.
            last = _last_line_start(f, start, size)
            lo = max(done, last if lo is None else min(lo, last))
            if lo < size:
                scan(p, f, lo, None, buf)
                used += 1
            break
        assert lo is not None  # a window without a line start was passed over above, all but the last
        done = scan(p, f, lo, min(lo + win, size), buf)
        if done == lo:
            # No whole line fits in a window: take the one that starts here, however long.
            end = _line_start_after(f, min(lo + win, size))
            done = scan(p, f, lo, size if end is None else end, buf)
        used += 1
    return {"bytes": p.bytes_read, "windows": used, "of": span}
