"""Appending to a file in a folder that may be shared: kg_record.py's launch records and kg_gpu_sampler.py's GPU
timeline go only to a regular file of the user's own, opened without following a link and without blocking. stdlib
only, Python 3.8+."""
import os
import stat

import kg_common


class NotRecorded(Exception):
    """Why the record was not written, in one line for stderr (the command runs all the same)."""


def _what_is(path, dir_fd=None):
    try:
        return kg_common.file_kind(os.stat(path, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return None


def _refused(path, kind, wanted):
    if kind == "a symbolic link":
        return "%s is a symbolic link: not followed" % path
    return "%s is %s, not %s: not written to" % (path, kind, wanted)


def _check_owned(st, path):
    if st.st_uid != os.geteuid():
        raise NotRecorded("%s belongs to another user (uid %d): only a file of your own is written" % (path, st.st_uid))


def open_record(target):
    """A descriptor to append to `target`, a regular file of the user's own (created 0644 in a folder created 0700).

    A run folder may be shared: a link planted as ``.known-good`` or ``launches.jsonl`` is never followed (O_NOFOLLOW,
    the file opened relative to the folder's own descriptor), a FIFO never blocks the launch (O_NONBLOCK) and a
    device, folder, other user's file or file with other names (hard links) is refused after the open, by fstat of
    the descriptor itself, so that nothing swapped in between a check and the open is written to."""
    folder, name = os.path.split(target)
    parent = os.path.dirname(folder)
    if parent:
        os.makedirs(parent, exist_ok=True)
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    cloexec = getattr(os, "O_CLOEXEC", 0)
    try:
        dfd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | nofollow | cloexec)
    except OSError as e:
        kind = _what_is(folder)
        if kind not in (None, "a folder"):
            raise NotRecorded(_refused(folder, kind, "a folder"))
        raise NotRecorded("cannot open %s: %s" % (folder, e.strerror or e))
    try:
        _check_owned(os.fstat(dfd), folder)
        flags = (os.O_WRONLY | os.O_APPEND | os.O_CREAT | nofollow | getattr(os, "O_NONBLOCK", 0) | cloexec
                 | getattr(os, "O_NOCTTY", 0))
        try:
            fd = os.open(name, flags, 0o644, dir_fd=dfd)
        except OSError as e:
            kind = _what_is(name, dfd)
            if kind not in (None, "a file"):
                raise NotRecorded(_refused(target, kind, "a regular file"))
            raise NotRecorded("cannot open %s: %s" % (target, e.strerror or e))
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRecorded(_refused(target, kg_common.file_kind(st.st_mode), "a regular file"))
        _check_owned(st, target)
        if st.st_nlink != 1:
            raise NotRecorded("%s has %d hard links (another name may be another file of yours): not written to"
                              % (target, st.st_nlink))
    except BaseException:
        os.close(fd)
        raise
    return fd
