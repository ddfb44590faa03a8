"""TensorBoard event files for metrics_reduce, read with the stdlib (see the comment below)."""
import io
import itertools
import re
import struct
from typing import Any, Dict, Iterator, Tuple  # noqa: F401 (type comments; metrics_reduce imports typing anyway)

import kg_common
from metrics_pass import Pass
from metrics_scan import PREVIEW_WINDOWS, read_range


# ------------------------------------------------------------------------------------------ TensorBoard events
# TensorBoard event files (``events.out.tfevents.*``) read with the stdlib: the remote may lack tensorboard, and
# tensorboard's own EventAccumulator takes ~20 s and ~700 MB for a million scalars. A file is a sequence of
# TFRecords: u64 length, u32 masked CRC-32C of the length, the data, u32 masked CRC-32C of the data. Each record is
# an ``Event`` protobuf; the scalars are ``Event.summary.value[]`` with ``simple_value`` (TF1 / torch's
# SummaryWriter / tensorboardX) or a rank-0 ``tensor`` under the "scalars" plugin (TF2, keras, jax writers).
#
# CRCs: the length CRC of every record is checked (lengths repeat, so each distinct length is computed once); the
# data CRC costs ~1 µs a byte in pure Python, so it is checked on the first and last records read, on every
# record whose protobuf does not parse, and, with ``--verify``, on all of them. A record that fails its check is
# counted as corrupt and the reader resynchronises at the next offset whose framing checks out.

_CRC32C_TABLE = None


def _crc32c_table():
    global _CRC32C_TABLE
    if _CRC32C_TABLE is None:
        table = []
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            table.append(c)
        _CRC32C_TABLE = table
    return _CRC32C_TABLE


def crc32c(data):
    t = _crc32c_table()
    c = 0xFFFFFFFF
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc32c(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(buf, i):
    """(value, next index) of the protobuf varint at ``i``; raises IndexError past the end."""
    b = buf[i]
    if b < 0x80:
        return b, i + 1
    value = b & 0x7F
    shift = 7
    i += 1
    while True:
        b = buf[i]
        value |= (b & 0x7F) << shift
        i += 1
        if b < 0x80:
            return value, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(buf, start, end):
    # type: (Any, int, int) -> Iterator[Tuple[int, int, Any]]
    """(field number, wire type, value or (start, end) for length-delimited) of one protobuf message."""
    i = start
    while i < end:
        key, i = _varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(buf, i)
            yield num, wt, v
        elif wt == 1:
            yield num, wt, i
            i += 8
        elif wt == 2:
            n, i = _varint(buf, i)
            if i + n > end:
                raise ValueError("field runs past its message")
            yield num, wt, (i, i + n)
            i += n
        elif wt == 5:
            yield num, wt, i
            i += 4
        else:
            raise ValueError("wire type %d" % wt)
    if i != end:
        raise ValueError("message runs past its end")


_UNPACK_D = struct.Struct("<d").unpack_from
_UNPACK_F = struct.Struct("<f").unpack_from
_UNPACK_Q = struct.Struct("<Q").unpack_from
_UNPACK_I = struct.Struct("<I").unpack_from
# DataType enum values of a TensorProto that hold one number: float, double, int32, int64, half, bfloat16.
_DT_FLOAT, _DT_DOUBLE, _DT_INT32, _DT_INT64, _DT_BF16, _DT_HALF = 1, 2, 3, 9, 14, 19
# The struct format of the one number of such a tensor; a tensor without a dtype (None) has none.
_DT_FORMATS = {_DT_FLOAT: "<f", _DT_DOUBLE: "<d", _DT_INT32: "<i", _DT_INT64: "<q", _DT_HALF: "<e"}  # type: Dict[Any, str]


def _half(bits):
    return struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0]


def _tensor_scalar(buf, start, end):
    """The one number of a rank-0 (or one-element) TensorProto, or None."""
    dtype = None
    vals = []
    content = None
    for num, wt, v in _fields(buf, start, end):
        if num == 1 and wt == 0:
            dtype = v
        elif num == 4 and wt == 2:
            content = bytes(buf[v[0]:v[1]])
        elif num == 5:  # float_val, packed or not
            if wt == 2:
                vals.extend(struct.unpack_from("<%df" % ((v[1] - v[0]) // 4), buf, v[0]))
            elif wt == 5:
                vals.append(_UNPACK_F(buf, v)[0])
        elif num == 6:  # double_val
            if wt == 2:
                vals.extend(struct.unpack_from("<%dd" % ((v[1] - v[0]) // 8), buf, v[0]))
            elif wt == 1:
                vals.append(_UNPACK_D(buf, v)[0])
        elif num in (7, 10, 13):  # int_val, int64_val, half_val (bits in an int32)
            if wt == 2:
                j = v[0]
                while j < v[1]:
                    x, j = _varint(buf, j)
                    vals.append(x)
            elif wt == 0:
                vals.append(v)
            if num == 13:
                vals = [_half(x) for x in vals]
            elif vals:
                vals = [x - (1 << 64) if x >= 1 << 63 else x for x in vals]
    if not vals and content is not None:
        fmt = _DT_FORMATS.get(dtype)
        if dtype == _DT_BF16 and len(content) == 2:
            return struct.unpack("<f", b"\0\0" + content)[0]
        if fmt and len(content) == struct.calcsize(fmt):
            return struct.unpack(fmt, content)[0]
        return None
    if len(vals) != 1:
        return None
    return float(vals[0])


def _plugin_name(buf, start, end):
    for num, wt, v in _fields(buf, start, end):
        if num == 1 and wt == 2:  # plugin_data
            for n2, w2, v2 in _fields(buf, v[0], v[1]):
                if n2 == 1 and w2 == 2:
                    return bytes(buf[v2[0]:v2[1]]).decode("utf-8", "replace")
    return None


def decode_event(buf, start, end, tensor_tags):
    """(wall_time, step, [(tag, value)]) of one Event record; values are scalars only.

    ``tensor_tags`` remembers which tags are scalar tensors: TF2 writers put the plugin name in the metadata of a
    tag's first value only, as tensorboard's own reader expects.
    """
    wall = 0.0
    step = 0
    out = []
    for num, wt, v in _fields(buf, start, end):
        if num == 1 and wt == 1:
            wall = _UNPACK_D(buf, v)[0]
        elif num == 2 and wt == 0:
            step = v - (1 << 64) if v >= 1 << 63 else v
        elif num == 5 and wt == 2:  # summary
            for n2, w2, val in _fields(buf, v[0], v[1]):
                if n2 != 1 or w2 != 2:
                    continue
                tag = None
                simple = None
                tensor = None
                meta = None
                for n3, w3, x in _fields(buf, val[0], val[1]):
                    if n3 == 1 and w3 == 2:
                        tag = bytes(buf[x[0]:x[1]]).decode("utf-8", "replace")
                    elif n3 == 2 and w3 == 5:
                        simple = _UNPACK_F(buf, x)[0]
                    elif n3 == 8 and w3 == 2:
                        tensor = x
                    elif n3 == 9 and w3 == 2:
                        meta = x
                if tag is None:
                    continue
                if simple is not None:
                    out.append((tag, simple))
                    continue
                if tensor is None:
                    continue
                if meta is not None:
                    plugin = _plugin_name(buf, meta[0], meta[1])
                    if plugin is not None:
                        tensor_tags[tag] = plugin == "scalars"
                if tensor_tags.get(tag):
                    value = _tensor_scalar(buf, tensor[0], tensor[1])
                    if value is not None:
                        out.append((tag, value))
    return wall, step, out


class TfEventsReader(object):
    """Walks the TFRecords of an event file from ``start`` and decodes the scalars."""

    def __init__(self, verify=False):
        self.verify = verify
        self.tensor_tags = {}
        self.len_crc = {}
        self.records = 0
        self.corrupt = 0
        self.crc_checked = 0
        self.crc_failed = 0
        self.resyncs = 0
        self.skipped_large = 0

    def _len_ok(self, header):
        length_bytes = header[:8]
        want = _UNPACK_I(header, 8)[0]
        got = self.len_crc.get(length_bytes)
        if got is None:
            got = masked_crc32c(length_bytes)
            if len(self.len_crc) < 4096:
                self.len_crc[length_bytes] = got
        return got == want

    def _data_ok(self, buf, start, end):
        self.crc_checked += 1
        ok = masked_crc32c(buf[start:end]) == _UNPACK_I(buf, end)[0]
        if not ok:
            self.crc_failed += 1
        return ok

    def scan(self, f, start, stop, emit, max_record=None):
        """Decode the records whose start lies in [start, stop); ``emit(wall, step, pairs)`` per event.

        Returns the offset after the last whole record (where a follow read continues): a record cut short at the
        end of the file is being written and is left for the next read.
        """
        max_record = kg_common.LIMITS["line"] if max_record is None else max_record
        f.seek(start)
        buf = b""
        base = start
        pos = 0
        first = True
        resync = False
        while True:
            if len(buf) - pos < 12:
                more = f.read(1 << 20)
                buf = buf[pos:] + more
                base += pos
                pos = 0
                if len(buf) < 12:
                    return base + pos
            if base + pos >= stop and not resync:
                return base + pos
            length = _UNPACK_Q(buf, pos)[0]
            if not self._len_ok(buf[pos:pos + 12]):
                # Not a record start: a corrupt header, or a worker part that began mid-record. Resynchronise.
                if not resync:
                    self.resyncs += 1
                    resync = True
                pos += 1
                continue
            if length > max_record:
                # A record bigger than the line limit (an image, a graph): skipped without being read whole.
                self.skipped_large += 1
                end = base + pos + 12 + length + 4
                f.seek(end)
                buf, base, pos = b"", end, 0
                f.seek(end)
                resync = False
                continue
            need = 12 + length + 4
            if len(buf) - pos < need:
                more = f.read(max(1 << 20, need))
                if not more:
                    return base + pos  # the last record is still being written
                buf = buf[pos:] + more
                base += pos
                pos = 0
                continue
            rstart, rend = pos + 12, pos + 12 + length
            check = self.verify or first
            ok = True
            if check:
                ok = self._data_ok(buf, rstart, rend)
            event = None
            if ok:
                try:
                    event = decode_event(buf, rstart, rend, self.tensor_tags)
                except (ValueError, IndexError, struct.error):
                    event = None
                    if not check:
                        self._data_ok(buf, rstart, rend)
            if event is None:
                self.corrupt += 1
            else:
                self.records += 1
                if event[2]:
                    emit(event[0], event[1], event[2])
            first = False
            resync = False
            pos += need

    def stats(self):
        return {"records": self.records, "corrupt": self.corrupt, "crcChecked": self.crc_checked,
                "crcFailed": self.crc_failed, "resyncs": self.resyncs, "skippedLarge": self.skipped_large,
                "crcMode": "all" if self.verify else "lengths; data of the first record and of any that fails"}


# The shape of nearly every record a scalar writer makes (torch's SummaryWriter, tensorboardX, Lightning, HF):
# Event{wall_time, step, summary{value{tag, simple_value}}}, framed. One regex split per block finds them all and
# leaves anything else (histograms, images, TF2 tensors, odd field orders) in the gaps for the general decoder.
# Groups: length, length CRC, wall time, step varint, summary length, value length, tag length, tag, value.
_TB_SCALAR = re.compile(
    rb"(.{8})(.{4})\x09(.{8})\x10([\x80-\xff]{0,9}[\x00-\x7f])\x2a([\x00-\x7f])\x0a([\x00-\x7f])\x0a([\x00-\x7f])"
    rb"([\x20-\x7e]{1,127})\x15(.{4})(?:.{4})",
    re.S,
)
_G = 10  # groups per match in a split list, +1 for the gap before each


def _vdec(v):
    n = len(v)
    if n == 1:
        return v[0]
    if n == 2:
        return (v[0] & 0x7F) | (v[1] << 7)
    if n == 3:
        return (v[0] & 0x7F) | ((v[1] & 0x7F) << 7) | (v[2] << 14)
    return _varint(v, 0)[0]


def fast_run(reader, parts, i, j, out):
    """Bulk-decode matches i..j-1 of a split list: the bytes they cover, or None if a check fails."""
    if i >= j:
        return 0
    run = parts[i * _G + 1:j * _G + 1]
    g_len, g_crc, g_wall, g_step, g_sum, g_val, g_tl, g_tag, g_v = (run[k::_G] for k in range(9))
    n = j - i
    # Few distinct (length, step size, tag, inner lengths) combinations in a block: each is checked once.
    # Record length = 21 + varint + tag; summary = 9 + tag; value = 7 + tag; tag-length byte = tag.
    for ln, crc, step_len, s_len, v_len, t_len, tag in set(zip(g_len, g_crc, map(len, g_step), g_sum, g_val, g_tl,
                                                               g_tag)):
        t = len(tag)
        if (_UNPACK_Q(ln)[0] != 21 + step_len + t or ord(t_len) != t or ord(v_len) != 7 + t or ord(s_len) != 9 + t
                or not reader._len_ok(ln + crc)):
            return None
    lengths = struct.unpack("<%dQ" % n, b"".join(g_len))
    walls = struct.unpack("<%dd" % n, b"".join(g_wall))
    vals = struct.unpack("<%df" % n, b"".join(g_v))
    uniq = list(dict.fromkeys(g_step))
    if max(map(len, uniq)) <= 4:
        nums = [(v & 0x7F) | ((v >> 1) & 0x3F80) | ((v >> 2) & 0x1FC000) | ((v >> 3) & 0xFE00000)
                # map over two iterables: 2.4x a comprehension here; pyright cannot type int.from_bytes through it
                for v in map(int.from_bytes, uniq, itertools.repeat("little"))]  # pyright: ignore[reportArgumentType]
    else:
        nums = [_varint(v, 0)[0] for v in uniq]
    steps = list(map(dict(zip(uniq, map(float, nums))).__getitem__, g_step))
    tags = set(g_tag)
    period = len(tags)
    if period == 1:
        out.add(g_tag[0].decode("ascii"), steps, walls, vals)
    elif n % period == 0 and all(len(set(g_tag[k::period])) == 1 for k in range(period)):
        for k in range(period):
            out.add(g_tag[k].decode("ascii"), steps[k::period], walls[k::period], vals[k::period])
    else:
        for t in tags:
            sel = list(map(t.__eq__, g_tag))
            out.add(t.decode("ascii"), list(itertools.compress(steps, sel)), list(itertools.compress(walls, sel)),
                    list(itertools.compress(vals, sel)))
    reader.records += n
    return sum(lengths) + 16 * n


def _block_columns(reader, buf, out):
    """Decode the whole records at the start of ``buf``; returns the bytes they cover (the rest is carried)."""
    parts = _TB_SCALAR.split(buf)
    n = (len(parts) - 1) // _G
    gaps = parts[0::_G]
    consumed = 0
    run_start = 0
    for k in range(n + 1):
        gap = gaps[k]
        if k < n and not gap:
            continue
        done = fast_run(reader, parts, run_start, k, out)
        if done is None:
            return None
        consumed += done
        if gap:
            # Records of another kind between (or after) the matches, one by one; only the trailing gap may end in
            # a record cut by the block's end.
            end = reader.scan(io.BytesIO(gap), 0, len(gap), out.emit)
            consumed += end
            if end != len(gap) and k < n:
                return None
        run_start = k
    return consumed


def scan_columns(reader, f, start, stop, out, block=1 << 20):
    """Records starting in [start, stop) into ``out`` (TfEventsColumns): ``stop`` must be a record start or the
    end. Returns the offset after the last whole record (a record still being written is left for the next read)."""
    f.seek(start)
    pos = start
    carry = b""
    first = True
    while pos < stop:
        data = f.read(max(0, min(block, stop - pos - len(carry))))
        buf = carry + data if carry else data
        if not buf:
            break
        if first and len(buf) >= 12:
            # The data CRC of the part's first record: a wrong offset or a corrupt start shows here.
            first = False
            n = _UNPACK_Q(buf, 0)[0]
            if len(buf) >= 16 + n and reader._len_ok(buf[:12]) and not reader._data_ok(buf, 12, 12 + n):
                reader.corrupt += 1
        consumed = _block_columns(reader, buf, out)
        if consumed is None:
            # Matches and framing disagree (a corrupt stretch): the general decoder alone, with its resync.
            consumed = reader.scan(io.BytesIO(buf), 0, len(buf), out.emit)
        pos += consumed
        carry = buf[consumed:]
        if not data:
            break
    return pos


class _TbSink(object):
    """Hands the decoded TensorBoard columns to a Pass."""

    def __init__(self, p):
        self.p = p

    def add(self, tag, steps, walls, vals):
        self.p.columns(tag, steps, walls, vals)

    def emit(self, wall, step, pairs):
        for tag, value in pairs:
            self.p.columns(tag, [float(step)], [wall], [value])


def _tb_resync(reader, f, pos, size, reach=1 << 20):
    """The first record start at or after pos (its length CRC checks out), or None within ``reach`` bytes."""
    step = 4096
    at = pos
    while at < min(size, pos + reach):
        f.seek(at)
        buf = f.read(step + 12)
        for i in range(0, max(0, len(buf) - 12)):
            if _UNPACK_Q(buf, i)[0] <= kg_common.LIMITS["line"] and reader._len_ok(buf[i:i + 12]):
                return at + i
        at += step
    return None


# A byte of events costs about twice a byte of JSON lines to reduce (one process, 1M scalars: 52 MB of events in 3.2 s
# of CPU, 111 MB of jsonl in 3.2 s): the same work per forked part is half the bytes. At 8 MiB a launch's event file of
# 200,000 scalars (10 MB) was read by one process, so a history of five such files used one core where one file of
# all of them used every core (bench "stitching").
TB_PART_SHARE = 0.5


def reduce_tensorboard(a, xmode, f, size, verify=False):
    """(pass, next offset, sample or None, reader stats) of an event file: whole, from --offset, or sampled."""
    p = Pass(a, xmode)
    reader = TfEventsReader(verify=verify)
    sink = _TbSink(p)
    start = a.offset
    if a.preview is not None and a.lo is None and size - start > 2 * a.preview:
        # A first look: windows spread over the file, each starting at a record found by its length CRC.
        windows = min(PREVIEW_WINDOWS, max(8, a.preview // 4096))
        per = a.preview // windows
        read = 0
        for i in range(windows):
            pos = start + (size - start - per) * i // max(1, windows - 1) if windows > 1 else start
            at = pos if i == 0 else _tb_resync(reader, f, pos, size)
            if at is None:
                continue
            end = scan_columns(reader, f, at, min(size, at + per), sink)
            read += end - at
        p.bytes_read = read
        return p, start, {"bytes": read, "windows": windows, "of": size - start}, reader.stats()
    if a.fast:
        # Parts of the file in forked workers, as for JSON lines; each part starts at a record found by its
        # length CRC. A part's corrupt records are counted in its pass (skipped.corrupt).
        def scanner(q, g, lo, hi):
            r = TfEventsReader(verify=a.verify)
            end = scan_columns(r, g, lo, size if hi is None else hi, _TbSink(q))
            q.counts["corrupt"] = q.counts.get("corrupt", 0) + r.corrupt
            if lo == start:  # the parent's own part: its CRC counts are reported
                reader.__dict__.update(r.__dict__)
            return end

        def cutter(g, pos):
            return _tb_resync(reader, g, pos, size)

        q, pos = read_range(a, xmode, f, size, start, False, scanner, cutter, TB_PART_SHARE)
        q.bytes_read = pos - start
        stats = reader.stats()
        stats["corrupt"] = q.counts.get("corrupt", 0)
        stats["records"] = q.lines + stats["corrupt"]
        return q, pos, None, stats
    else:
        # --no-fast: every record through the general decoder, one by one (what a reader without the block split
        # does; the bench's "usual way" with --verify).
        pos = reader.scan(f, start, size, sink.emit)
    p.bytes_read = pos - start
    return p, pos, None, reader.stats()
