"""Parquet footers and Arrow IPC files read with the stdlib, bounded: rows, columns, and the length of a sample.

A module of what_changed.py (through data_shape). Nothing is decoded beyond what says a dataset's shape:

- parquet: the footer only (``<FileMetaData> <u32 length> PAR1``, Thrift compact protocol; at most MAX_FOOTER read):
  num_rows, the row groups and their rows, top-level column names and types, created_by;
- Arrow IPC, file (``ARROW1`` … footer) and stream format (what HF ``datasets`` writes, its cache files and
  ``save_to_disk`` shards): the schema and the rows of every record batch (message headers only, bodies skipped), and
  for the first list-of-integers column the length of up to SAMPLE_ROWS samples from its offsets, less a trailing run
  of one value (padding), as data_shape does for .npy rows.

Every read is bounded (MAX_FOOTER, MAX_MESSAGES, READ_BYTES, the caller's deadline); anything unexpected is
``ValueError``, which data_shape treats as "no summary", never a guess. stdlib only, 3.8+.
"""
import os
import struct
import time

import kg_common

MAX_FOOTER = 8 * 1024 * 1024
MAX_MESSAGE = 16 * 1024 * 1024
MAX_MESSAGES = 100000
MAX_ITEMS = 100000
MAX_DEPTH = 32
MAX_COLUMNS = 64
SAMPLE_ROWS = 256
READ_BYTES = 64 * 1024 * 1024

# ------------------------------------------------------------------------------------------------ parquet (Thrift)


class _Compact(object):
    """A Thrift compact-protocol reader into {field id: value} dicts; lists as Python lists, binary as bytes."""

    def __init__(self, data):
        self.b = data
        self.i = 0
        self.items = 0

    def byte(self):
        if self.i >= len(self.b):
            raise ValueError("thrift: past the end")
        v = self.b[self.i]
        self.i += 1
        return v

    def varint(self):
        shift = out = 0
        while True:
            v = self.byte()
            out |= (v & 0x7F) << shift
            if not v & 0x80:
                return out
            shift += 7
            if shift > 70:
                raise ValueError("thrift: varint too long")

    def zigzag(self):
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def value(self, t, depth):
        self.items += 1
        if self.items > MAX_ITEMS * 20 or depth > MAX_DEPTH:
            raise ValueError("thrift: too many items or too deep")
        if t in (1, 2):
            return t == 1
        if t == 3:
            return struct.unpack("b", bytes([self.byte()]))[0]
        if t in (4, 5, 6):
            return self.zigzag()
        if t == 7:
            if self.i + 8 > len(self.b):
                raise ValueError("thrift: past the end")
            self.i += 8
            return struct.unpack("<d", self.b[self.i - 8:self.i])[0]
        if t == 8:
            n = self.varint()
            if self.i + n > len(self.b):
                raise ValueError("thrift: binary past the end")
            self.i += n
            return self.b[self.i - n:self.i]
        if t in (9, 10):
            h = self.byte()
            n, et = h >> 4, h & 0x0F
            if n == 15:
                n = self.varint()
            if n > MAX_ITEMS:
                raise ValueError("thrift: list of %d items" % n)
            if et in (1, 2):  # booleans in a list are a byte each
                return [self.byte() == 1 for _ in range(n)]
            return [self.value(et, depth + 1) for _ in range(n)]
        if t == 11:
            n = self.varint()
            if n > MAX_ITEMS:
                raise ValueError("thrift: map of %d items" % n)
            kv = self.byte() if n else 0
            return [(self.value(kv >> 4, depth + 1), self.value(kv & 0x0F, depth + 1)) for _ in range(n)]
        if t == 12:
            return self.struct(depth + 1)
        raise ValueError("thrift: unknown type %d" % t)

    def struct(self, depth=0):
        out = {}
        last = 0
        while True:
            h = self.byte()
            if h == 0:
                return out
            delta, t = h >> 4, h & 0x0F
            fid = last + delta if delta else self.zigzag()
            last = fid
            out[fid] = self.value(t, depth)


_PHYSICAL = {0: "bool", 1: "int32", 2: "int64", 3: "int96", 4: "float", 5: "double", 6: "binary", 7: "fixed"}


def _leaf_type(el):
    t = _PHYSICAL.get(el.get(1), "?")
    logical = el.get(10) if isinstance(el.get(10), dict) else {}
    if t == "binary" and (el.get(6) == 0 or 1 in logical or 12 in logical):
        return "string"
    if 10 in logical and isinstance(logical[10], dict):  # INTEGER(bitWidth, isSigned)
        width, signed = logical[10].get(1), logical[10].get(2)
        return "%s%s" % ("int" if signed else "uint", width)
    if t == "fixed":
        return "fixed[%s]" % el.get(2)
    return t


def _columns(schema):
    """Top-level (name, type) of a flattened parquet schema: groups as list<…>, map<…> or struct<…>."""
    pos = [1]

    def node():
        if pos[0] >= len(schema):
            raise ValueError("parquet: schema ends early")
        el = schema[pos[0]]
        pos[0] += 1
        name = el.get(4, b"").decode("utf-8", "replace")
        n = el.get(5) or 0
        if not n:
            return name, _leaf_type(el)
        kids = [node() for _ in range(n)]
        logical = el.get(10) if isinstance(el.get(10), dict) else {}
        if el.get(6) == 3 or 3 in logical:  # LIST: <name> (repeated group list (element))
            inner = kids[0][1]
            inner = inner[len("struct<"):-1] if inner.startswith("struct<") and "," not in inner else inner
            return name, "list<%s>" % inner
        if el.get(6) in (1, 2) or 2 in logical:
            return name, "map"
        return name, "struct<%s>" % ", ".join(t for _, t in kids)

    root = schema[0] if schema else {}
    return [node() for _ in range(min(root.get(5) or 0, 100000))]


def parquet_summary(path, deadline):
    with kg_common.open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size < 12:
            raise ValueError("parquet: too short")
        f.seek(size - 8)
        tail = f.read(8)
        if tail[4:] != b"PAR1":
            raise ValueError("not parquet")
        n = struct.unpack("<I", tail[:4])[0]
        if n > MAX_FOOTER or n > size - 12:
            raise ValueError("parquet: footer of %d bytes" % n)
        f.seek(size - 8 - n)
        meta = _Compact(f.read(n)).struct()
    if time.monotonic() > deadline:
        raise ValueError("parquet: out of time")
    schema = meta.get(2)
    cols = _columns(schema if isinstance(schema, list) else [])
    groups = meta.get(4)
    groups = groups if isinstance(groups, list) else []
    created = meta.get(6)
    return {"file": os.path.basename(path), "format": "parquet", "rows": meta.get(3), "rowGroups": len(groups),
            "rowGroupRows": [g.get(3) for g in groups[:MAX_COLUMNS]],
            "columns": [c for c, _ in cols[:MAX_COLUMNS]], "types": [t for _, t in cols[:MAX_COLUMNS]],
            "createdBy": created.decode("utf-8", "replace")[:200] if isinstance(created, bytes) else None}


# ------------------------------------------------------------------------------------------- Arrow IPC (flatbuffers)


class _Table(object):
    """A flatbuffers table: fields by index, bounds-checked against its buffer."""

    def __init__(self, buf, pos):
        self.buf = buf
        self.pos = pos
        if pos < 0 or pos + 4 > len(buf):
            raise ValueError("flatbuffer: table out of bounds")
        vt = pos - struct.unpack_from("<i", buf, pos)[0]
        if vt < 0 or vt + 4 > len(buf):
            raise ValueError("flatbuffer: vtable out of bounds")
        self.vt = vt
        self.vt_size = struct.unpack_from("<H", buf, vt)[0]

    def _off(self, i):
        o = 4 + 2 * i
        if o + 2 > self.vt_size:
            return 0
        return struct.unpack_from("<H", self.buf, self.vt + o)[0]

    def scalar(self, i, fmt, default=0):
        o = self._off(i)
        if not o:
            return default
        return struct.unpack_from("<" + fmt, self.buf, self.pos + o)[0]

    def _ref(self, i):
        o = self._off(i)
        if not o:
            return None
        p = self.pos + o
        return p + struct.unpack_from("<I", self.buf, p)[0]

    def table(self, i):
        p = self._ref(i)
        return _Table(self.buf, p) if p is not None else None

    def string(self, i):
        p = self._ref(i)
        if p is None:
            return None
        n = struct.unpack_from("<I", self.buf, p)[0]
        return self.buf[p + 4:p + 4 + n].decode("utf-8", "replace")

    def vector(self, i):
        """(position of the first element, count)."""
        p = self._ref(i)
        if p is None:
            return None, 0
        n = struct.unpack_from("<I", self.buf, p)[0]
        if n > MAX_ITEMS or p + 4 > len(self.buf):
            raise ValueError("flatbuffer: vector of %d items" % n)
        return p + 4, n

    def tables(self, i):
        p, n = self.vector(i)
        if p is None:
            return []
        return [_Table(self.buf, p + 4 * k + struct.unpack_from("<I", self.buf, p + 4 * k)[0]) for k in range(n)]


def _root(buf):
    if len(buf) < 8:
        raise ValueError("flatbuffer: too short")
    return _Table(buf, struct.unpack_from("<I", buf, 0)[0])


_FLOATS = {0: "halffloat", 1: "float", 2: "double"}
_TYPES = {1: "null", 4: "binary", 5: "string", 6: "bool", 7: "decimal", 8: "date", 9: "time", 10: "timestamp",
          11: "interval", 13: "struct", 14: "union", 15: "fixed_size_binary", 17: "map", 18: "duration",
          19: "large_binary", 20: "large_string", 22: "run_end_encoded", 23: "binary_view", 24: "string_view"}
# Buffers of one field in a record batch, its children's besides (Arrow columnar format, "Buffer layouts").
_BUFFERS = {1: 0, 2: 2, 3: 2, 4: 3, 5: 3, 6: 2, 7: 2, 8: 2, 9: 2, 10: 2, 11: 2, 12: 2, 13: 1, 15: 2, 16: 1, 17: 2,
            18: 2, 19: 3, 20: 3, 21: 2}


def _field(t, depth=0):
    """(name, type text, type id, int width or None, children) of an Arrow Field table."""
    if depth > MAX_DEPTH:
        raise ValueError("arrow: schema too deep")
    name = t.string(0) or ""
    tid = t.scalar(2, "B")
    kids = [_field(k, depth + 1) for k in t.tables(5)[:MAX_COLUMNS]]
    width = None
    if tid == 2:
        it = t.table(3)
        width = it.scalar(0, "i") if it else 0
        text = "%s%d" % ("int" if (it.scalar(1, "?") if it else False) else "uint", width)
    elif tid == 3:
        ft = t.table(3)
        text = _FLOATS.get(ft.scalar(0, "h") if ft else -1, "float?")
    elif tid in (12, 21, 16):
        inner = kids[0][1] if kids else "?"
        text = "%s<%s>" % ({12: "list", 21: "large_list", 16: "fixed_size_list"}[tid], inner)
    else:
        text = _TYPES.get(tid, "type%d" % tid)
    return name, text, tid, width, kids


def _buffer_count(field):
    """Buffers of a field and all its children, or None for a layout not read here (unions, views, …)."""
    own = _BUFFERS.get(field[2])
    if own is None:
        return None
    total = own
    for k in field[4]:
        c = _buffer_count(k)
        if c is None:
            return None
        total += c
    return total


def _schema(msg_header):
    fields = [_field(t) for t in msg_header.tables(1)]
    return fields


def _list_column(fields):
    """(column index, first buffer index, offsets width, value width) of the first list-of-integers column."""
    first = 0
    for i, f in enumerate(fields[:MAX_COLUMNS]):
        if f[2] in (12, 21) and f[4] and f[4][0][2] == 2 and f[4][0][3] in (8, 16, 32, 64):
            return i, first, 4 if f[2] == 12 else 8, f[4][0][3] // 8
        c = _buffer_count(f)
        if c is None:
            return None
        first += c
    return None


class _Lengths(object):
    """Sample lengths of one list-of-integers column, read from the record batches' bodies (offsets, then values)."""

    def __init__(self, column):
        self.column = column
        self.lengths = []
        self.real = []
        self.read = 0

    def batch(self, f, body_at, rb, rows, deadline):
        if self.column is None or len(self.lengths) >= SAMPLE_ROWS or rows <= 0 or rb.table(3) is not None:
            return  # compressed bodies (the `compression` field) are not read
        _, first, ow, vw = self.column
        p, n = rb.vector(2)
        if first + 3 >= n:
            return
        buf = rb.buf

        def buffer(k):
            return struct.unpack_from("<qq", buf, p + 16 * k)

        off_at, off_len = buffer(first + 1)
        val_at, val_len = buffer(first + 3)
        if off_len < (rows + 1) * ow:
            return
        step = max(1, rows // max(1, SAMPLE_ROWS // 4))
        code = {4: "i", 8: "q"}[ow]
        vcode = {1: "b", 2: "h", 4: "i", 8: "q"}[vw]
        for r in range(0, rows, step):
            if len(self.lengths) >= SAMPLE_ROWS or self.read > READ_BYTES or time.monotonic() > deadline:
                return
            f.seek(body_at + off_at + r * ow)
            a, b = struct.unpack("<2" + code, f.read(2 * ow))
            n_items = b - a
            if n_items < 0 or (b * vw) > val_len or n_items * vw > 16 * 1024 * 1024:
                return
            self.lengths.append(n_items)
            f.seek(body_at + val_at + a * vw)
            row = struct.unpack("<%d%s" % (n_items, vcode), f.read(n_items * vw)) if n_items else ()
            self.read += n_items * vw + 2 * ow
            run = 0
            last = row[-1] if row else None
            for v in reversed(row):
                if v != last:
                    break
                run += 1
            self.real.append(n_items - run if run >= 2 else n_items)

    def summary(self, fields):
        if not self.lengths:
            return {}
        lens, real = sorted(self.lengths), sorted(self.real)
        out = {"lengthColumn": fields[self.column[0]][0], "sampled": len(lens),
               "meanLength": round(sum(real) / len(real), 2), "medianLength": real[len(real) // 2],
               "padded": real[len(real) // 2] < lens[len(lens) // 2]}
        if lens[0] == lens[-1]:
            out["rowLength"] = lens[0]
        else:
            out["meanRowLength"] = round(sum(lens) / len(lens), 2)
        return out


def _message(f, size):
    """(flatbuffer of one encapsulated message, its body length, where its body starts) or None at the end."""
    head = f.read(4)
    if len(head) < 4:
        return None
    n = struct.unpack("<I", head)[0]
    if n == 0xFFFFFFFF:  # continuation marker, then the length
        head = f.read(4)
        if len(head) < 4:
            return None
        n = struct.unpack("<I", head)[0]
    if n == 0:
        return None
    if n > MAX_MESSAGE or f.tell() + n > size:
        raise ValueError("arrow: message of %d bytes" % n)
    buf = f.read(n)
    msg = _root(buf)
    body = msg.scalar(3, "q")
    if body < 0 or f.tell() + body > size:
        raise ValueError("arrow: body past the end")
    return msg, body, f.tell()


def arrow_summary(path, deadline, sample=True):
    """Schema and rows of an Arrow IPC file or stream; sample lengths of its first list-of-integers column."""
    with kg_common.open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        magic = f.read(8)
        file_format = magic[:6] == b"ARROW1"
        if not file_format:
            f.seek(0)
        fields = None
        lengths = None
        rows = batches = 0
        for _ in range(MAX_MESSAGES):
            if time.monotonic() > deadline:
                raise ValueError("arrow: out of time")
            m = _message(f, size)
            if m is None:
                break
            msg, body, body_at = m
            kind = msg.scalar(1, "B")
            header = msg.table(2)
            if kind == 1 and header is not None and fields is None:
                fields = _schema(header)
                lengths = _Lengths(_list_column(fields)) if sample else None
            elif kind == 3 and header is not None:
                n = header.scalar(0, "q")
                rows += n
                batches += 1
                if lengths is not None:
                    lengths.batch(f, body_at, header, n, deadline)
            f.seek(body_at + body)
            if file_format and f.tell() >= size - 10:
                break
    if fields is None:
        raise ValueError("arrow: no schema")
    out = {"file": os.path.basename(path), "format": "arrow-file" if file_format else "arrow-stream", "rows": rows,
           "recordBatches": batches, "columns": [c[0] for c in fields[:MAX_COLUMNS]],
           "types": [c[1] for c in fields[:MAX_COLUMNS]]}
    if lengths is not None:
        out.update(lengths.summary(fields))
    return out


MAX_SHARDS = 256


def hf_saved(folder, deadline):
    """A ``datasets`` ``save_to_disk`` folder (``state.json`` names its Arrow shards): rows over every shard, the
    schema and sample lengths of the first."""
    with kg_common.open_regular(os.path.join(folder, "state.json")) as f:
        state = kg_common.loads_bounded(f.read(1024 * 1024).decode("utf-8", "replace"), "state.json")
    files = state.get("_data_files") if isinstance(state, dict) else None
    if not isinstance(files, list) or not files:
        raise ValueError("state.json: no _data_files")
    names = [d.get("filename") for d in files[:MAX_SHARDS] if isinstance(d, dict)]
    names = [n for n in names if isinstance(n, str) and n and os.path.basename(n) == n]
    if not names:
        raise ValueError("state.json: no shard named")
    first = arrow_summary(os.path.join(folder, names[0]), deadline)
    out = dict(first, file=os.path.basename(os.path.normpath(folder)), format="hf-datasets", shards=len(files))
    out.pop("recordBatches", None)
    rows = first["rows"]
    for n in names[1:]:
        if time.monotonic() > deadline:
            out.pop("rows")
            out["rowsAtLeast"] = rows
            return out
        rows += arrow_summary(os.path.join(folder, n), deadline, sample=False)["rows"]
    out["rows"] = rows
    if len(files) > len(names):
        out.pop("rows")
        out["rowsAtLeast"] = rows
    return out
