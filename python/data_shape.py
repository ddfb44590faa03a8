"""What a data file holds, read without third-party packages and bounded: rows and the length of a sample.

stdlib only, 3.8+.  A module of what_changed.py: for a changed data path the report says *how* the data differs
(a new dataset of shorter, padded samples is a tokens/s drop at the same step time), not only that its folder did.

- ``.npy`` (a 2-D array of token ids, one sample a row): dtype, rows, row length, and over up to SAMPLE_ROWS rows read
  evenly the real length of a sample: the row less its trailing run of one value (padding) when that run is 2 or more;
- ``.jsonl``: rows (counted up to READ_BYTES) and the mean bytes of a line; a ``.json`` data file (a list of records,
  or a dict holding one list) up to JSON_BYTES: its rows and the mean bytes of a record;
- ``.npz`` (numpy.savez, savez_compressed): its ``.npy`` members, each summarised as a ``.npy``;
- HF ``datasets`` folders: ``dataset_info.json`` splits' ``num_examples`` and ``dataset_size``; a ``save_to_disk``
  folder (``state.json``, or ``dataset_dict.json`` and one folder a split): rows over its Arrow shards, the schema and
  sample lengths (python/data_columnar.py);
- ``.parquet`` footers (rows, row groups, columns and types) and Arrow IPC ``.arrow`` files (rows, schema, lengths of
  a list-of-integers column's samples), read by python/data_columnar.py;
- token files: a Megatron-LM indexed dataset's ``.idx`` (``MMIDIDX``: sequences, documents, token dtype, and the
  length of a sequence from its sizes array, all of it up to READ_BYTES, else SAMPLE_SIZES read evenly); a ``.bin``
  beside it is its tokens (summarised by the ``.idx``); a ``.bin`` alone (nanoGPT's ``train.bin``) is a flat array
  of tokens: its size and the token count as uint16, the dtype such files use.
"""
import ast
import json
import os
import struct
import time
import zipfile
import zlib

import data_columnar
import kg_common

READ_BYTES = 64 * 1024 * 1024
TIME_S = 2.0
SAMPLE_ROWS = 256
MAX_FILES = 4
MAX_ROW_BYTES = 16 * 1024 * 1024
SAMPLE_SIZES = 65536
# parsed whole, so smaller than READ_BYTES: Python objects take several times the text's bytes
JSON_BYTES = 16 * 1024 * 1024
_IDX_MAGIC = b"MMIDIDX\x00\x00"
# Megatron-LM's indexed_dataset DType codes: the struct code and the name of the token type
_IDX_DTYPES = {1: ("B", "uint8"), 2: ("b", "int8"), 3: ("h", "int16"), 4: ("i", "int32"), 5: ("q", "int64"),
               6: ("d", "float64"), 7: ("d", "float64"), 8: ("H", "uint16")}
_ITEM = {"u1": "B", "i1": "b", "u2": "H", "i2": "h", "u4": "I", "i4": "i", "u8": "Q", "i8": "q"}


def npy_summary(path, deadline):
    with kg_common.open_regular(path) as f:
        return _npy(f, os.path.basename(path), deadline)


def npz_summary(path, deadline):
    """The first .npy arrays of an .npz (a zip: numpy.savez, savez_compressed), each summarised as a .npy."""
    out = []
    with kg_common.open_regular(path) as raw:
        with zipfile.ZipFile(raw) as z:
            for info in z.infolist()[:MAX_FILES]:
                if not info.filename.endswith(".npy") or time.monotonic() > deadline:
                    continue
                with z.open(info) as f:
                    s = _npy(f, "%s:%s" % (os.path.basename(path), info.filename), deadline)
                if s:
                    out.append(s)
    return out


def json_summary(path, deadline):
    """A .json data file (a list of records, or a dict holding one: {"data": [...]}) up to JSON_BYTES: its rows."""
    with kg_common.open_regular(path) as f:
        if os.fstat(f.fileno()).st_size > JSON_BYTES:
            return None
        data = json.loads(f.read(JSON_BYTES).decode("utf-8", "replace"))
    if isinstance(data, dict):
        lists = [(k, v) for k, v in data.items() if isinstance(v, list)]
        if len(lists) != 1:
            return None
        data = lists[0][1]
    if not isinstance(data, list):
        return None
    sizes = sorted(len(json.dumps(r)) for r in data[:: max(1, len(data) // SAMPLE_ROWS)])
    return {"file": os.path.basename(path), "format": "json", "rows": len(data),
            "meanLineBytes": round(sum(sizes) / len(sizes), 1) if sizes else None}


def _npy(f, name, deadline):
    """A .npy array from an open file (the file itself, or a member of an .npz)."""
    magic = f.read(8)
    if magic[:6] != b"\x93NUMPY":
        return None
    n = struct.unpack("<H", f.read(2))[0] if magic[6] == 1 else struct.unpack("<I", f.read(4))[0]
    if n > 64 * 1024:
        return None
    header = ast.literal_eval(f.read(n).decode("latin-1"))
    descr, shape = header.get("descr", ""), tuple(header.get("shape", ()))
    out = {"file": name, "format": "npy", "dtype": descr, "shape": list(shape)}
    code = _ITEM.get(descr[1:]) if descr[:1] in "<|=" else None
    if len(shape) != 2 or code is None or header.get("fortran_order"):
        return out
    rows, width = shape
    size = struct.calcsize(code)
    if width * size > MAX_ROW_BYTES:
        return out
    start = f.tell()
    lens = []
    step = max(1, rows // SAMPLE_ROWS)
    read = 0
    for r in range(0, rows, step):
        if read > READ_BYTES or time.monotonic() > deadline:
            break
        f.seek(start + r * width * size)
        row = struct.unpack("<%d%s" % (width, code), f.read(width * size))
        read += width * size
        last, run = row[-1], 0
        for v in reversed(row):
            if v != last:
                break
            run += 1
        lens.append(width - run if run >= 2 else width)
    if lens:
        lens.sort()
        out.update(rows=rows, rowLength=width, sampled=len(lens), meanLength=round(sum(lens) / len(lens), 2),
                   medianLength=lens[len(lens) // 2], padded=lens[len(lens) // 2] < width)
    return out


def idx_summary(path, deadline):
    """A Megatron-LM ``.idx``: header (magic, version, dtype code, sequence and document counts), then int32 sizes."""
    with kg_common.open_regular(path) as f:
        if f.read(9) != _IDX_MAGIC:
            return None
        version, code = struct.unpack("<QB", f.read(9))
        count, docs = struct.unpack("<QQ", f.read(16))
        item = _IDX_DTYPES.get(code)
        out = {"file": os.path.basename(path), "format": "megatron-idx", "version": version,
               "dtype": item[1] if item else "code %d" % code, "rows": count, "documents": max(0, docs - 1)}
        start = f.tell()
        if count * 4 <= READ_BYTES:
            raw = f.read(count * 4)
            if len(raw) < count * 4:
                return out  # cut: the header's count is not what the file holds
            sizes = list(struct.unpack("<%di" % count, raw))
            if item:
                out["tokens"] = sum(sizes)
        else:
            sizes = []
            step = count // SAMPLE_SIZES
            for i in range(SAMPLE_SIZES):
                if time.monotonic() > deadline:
                    break
                f.seek(start + i * step * 4)
                got = f.read(4)
                if len(got) < 4:
                    break
                sizes.append(struct.unpack("<i", got)[0])
        if sizes:
            sizes.sort()
            out.update(sampled=len(sizes), meanLength=round(sum(sizes) / len(sizes), 2),
                       medianLength=sizes[len(sizes) // 2])
        return out


def bin_summary(path):
    """A flat token file with no index beside it (nanoGPT's train.bin: uint16 tokens): its size and token count."""
    if os.path.isfile(path[:-4] + ".idx"):
        return None  # the .idx says what it holds
    st = os.stat(path)
    return {"file": os.path.basename(path), "format": "tokens-bin", "bytes": st.st_size,
            "tokensIfUint16": st.st_size // 2}


def jsonl_summary(path, deadline):
    rows = size = 0
    with kg_common.open_regular(path) as f:
        # One line is read at most MAX_ROW_BYTES at a time: a file with no newline is not read whole
        for line in iter(lambda: f.readline(MAX_ROW_BYTES), b""):
            if size > READ_BYTES or time.monotonic() > deadline:
                return {"file": os.path.basename(path), "format": "jsonl", "rowsAtLeast": rows,
                        "meanLineBytes": round(size / rows, 1) if rows else None}
            if line.strip():
                rows += 1
                size += len(line)
    return {"file": os.path.basename(path), "format": "jsonl", "rows": rows,
            "meanLineBytes": round(size / rows, 1) if rows else None}


def hf_info(path):
    with kg_common.open_regular(path) as f:
        info = json.loads(f.read(1024 * 1024).decode("utf-8", "replace"))
    splits = info.get("splits") if isinstance(info, dict) else None
    out = {"file": "dataset_info.json", "format": "hf-datasets", "datasetSize": info.get("dataset_size")}
    if isinstance(splits, dict):
        out["splits"] = dict((k, v.get("num_examples")) for k, v in splits.items() if isinstance(v, dict))
    return out


def summaries(path):
    """Up to MAX_FILES summaries of the data files at path (a file, or the files directly in a folder)."""
    deadline = time.monotonic() + TIME_S
    if os.path.isdir(path):
        saved = _saved_dataset(path, deadline)
        if saved is not None:
            return saved
        try:
            names = sorted(os.listdir(path))
        except OSError:
            return []
        files = [os.path.join(path, n) for n in names]
    else:
        files = [path]
    out = []
    for p in files:
        if len(out) >= MAX_FILES or time.monotonic() > deadline:
            break
        try:
            if p.endswith(".parquet"):
                s = data_columnar.parquet_summary(p, deadline)
            elif p.endswith(".arrow"):
                s = data_columnar.arrow_summary(p, deadline)
            elif p.endswith(".npy"):
                s = npy_summary(p, deadline)
            elif p.endswith(".npz"):
                out.extend(npz_summary(p, deadline)[:MAX_FILES - len(out)])
                continue
            elif p.endswith(".json") and os.path.basename(p) not in ("dataset_info.json", "state.json"):
                s = json_summary(p, deadline)
            elif p.endswith(".jsonl"):
                s = jsonl_summary(p, deadline)
            elif p.endswith(".idx"):
                s = idx_summary(p, deadline)
            elif p.endswith(".bin"):
                s = bin_summary(p)
            elif os.path.basename(p) == "dataset_info.json":
                s = hf_info(p)
            else:
                continue
        except (OSError, kg_common.ProbeError, ValueError, SyntaxError, struct.error, MemoryError, RecursionError,
                TypeError, AttributeError, zipfile.BadZipFile, NotImplementedError, EOFError, zlib.error):
            continue
        if s:
            out.append(s)
    return out


def _saved_dataset(path, deadline):
    """The summaries of a ``datasets`` ``save_to_disk`` folder (one a split of a DatasetDict), or None when path is
    no such folder."""
    splits = None
    try:
        if os.path.isfile(os.path.join(path, "state.json")):
            folders = [path]
        elif os.path.isfile(os.path.join(path, "dataset_dict.json")):
            with kg_common.open_regular(os.path.join(path, "dataset_dict.json")) as f:
                d = kg_common.loads_bounded(f.read(1024 * 1024).decode("utf-8", "replace"), "dataset_dict.json")
            splits = d.get("splits") if isinstance(d, dict) else None
            if not isinstance(splits, list):
                return None
            folders = [os.path.join(path, s) for s in splits[:MAX_FILES] if isinstance(s, str) and "/" not in s]
        else:
            return None
    except (OSError, kg_common.ProbeError, ValueError):
        return None
    out = []
    for folder in folders:
        try:
            s = data_columnar.hf_saved(folder, deadline)
        except (OSError, kg_common.ProbeError, ValueError, struct.error, MemoryError, RecursionError, TypeError,
                AttributeError, KeyError):
            continue
        if splits is not None:
            s["split"] = os.path.basename(folder)
            s["file"] = "%s/%s" % (os.path.basename(os.path.normpath(path)), s["split"])
        out.append(s)
    return out
