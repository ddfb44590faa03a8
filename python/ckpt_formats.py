"""ckpt_args: the checkpoint file formats (torch zip, legacy torch, safetensors header, accelerate, DCP metadata)."""
import io
import json
import os
import re
import struct
import zipfile

import kg_common
from ckpt_convert import (
    ARG_KEYS, MAX_TOP_KEYS, STEP_KEYS, _FAILED, _args_type, _fill, _first_int, _key, _pick, _standin_state,
)
from kg_pickle import _NeedMore
from kg_pickle_objects import _DTYPES, _Name, _StandIn, _Tensor, _shape, _short_repr
from kg_pickle_reader import _Reader

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024

_SAFETENSORS_SIZES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2,
    "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "C64": 8, "F4": 1, "F6_E2M3": 1, "F6_E3M2": 1,
}


# --------------------------------------------------------------------------------------------------------------------
# Reading files.


class _CountingFile(io.RawIOBase):
    """A raw file that counts the bytes read, so the result can say how little of a big file was touched."""

    def __init__(self, f):
        io.RawIOBase.__init__(self)
        self.f = f
        self.count = 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def readinto(self, b):
        n = self.f.readinto(b)
        self.count += n or 0
        return n

    def seek(self, pos, whence=0):
        return self.f.seek(pos, whence)

    def tell(self):
        return self.f.tell()

    def close(self):
        self.f.close()
        io.RawIOBase.close(self)


def _open(path):
    # open_regular: a FIFO or a device (/dev/zero) is refused by name, never read (a FIFO would block forever)
    return _CountingFile(kg_common.open_regular(path, buffering=0))


def _unpickle(reader, data, pos, what, path, complete=True):
    """(object, position after it); a failure is a ProbeError (a limit's own, or corrupt), never another exception.
    _NeedMore passes through (the caller reads more of a legacy file)."""
    try:
        return reader.load(data, pos, complete)
    except kg_common.LimitError as e:
        if reader.unsafe:  # a hostile file is still reported (what it wanted to call), with the limit it hit
            reader.warnings.append("could not decode %s: %s" % (what, e))
            return _FAILED, len(data)
        raise
    except (kg_common.ProbeError, _NeedMore):
        raise
    except MemoryError:
        raise kg_common.LimitError("memory", "decoding the %s in %s" % (what, path))
    except RecursionError:
        raise kg_common.LimitError("depth", "decoding the %s in %s" % (what, path))
    except Exception as e:  # any other failure of a hostile or damaged pickle is its corruption, not our crash
        if reader.unsafe:
            # A hostile file is still reported (what it wanted to call), not just refused.
            reader.warnings.append("could not decode %s: %s: %s" % (what, type(e).__name__, _short_repr(str(e))))
            return _FAILED, len(data)
        if isinstance(e, EOFError):
            raise kg_common.ProbeError("truncated %s in %s" % (what, path), "corrupt")
        raise kg_common.ProbeError("corrupt %s in %s (%s: %s)" % (what, path, type(e).__name__, _short_repr(str(e))),
                                   "corrupt")




def _inflate(member, what):
    """A zip member's bytes, streamed, up to LIMITS["read"] of them whatever its header says it holds."""
    limit = kg_common.LIMITS["read"]
    data = bytearray()  # grown in place (no second copy), and decoded as it is
    while True:
        chunk = member.read(1 << 20)
        if not chunk:
            break
        if len(data) + len(chunk) > limit:
            raise kg_common.LimitError("read", "%s inflates to more than that" % what)
        data += chunk
    return data


def _read_torch_zip(fileobj, path, reader):
    try:
        zf = zipfile.ZipFile(fileobj)
    except kg_common.ProbeError:
        raise
    except MemoryError:
        raise kg_common.LimitError("memory", "the zip directory of %s" % path)
    except Exception as e:  # zipfile fails on a damaged archive in many ways (BadZipFile, OverflowError, ...)
        raise kg_common.ProbeError("truncated or corrupt zip archive: %s (%s)" % (path, e), "corrupt")
    try:
        infos = zf.infolist()
        pkls = [i for i in infos if i.filename.endswith("/data.pkl") and i.filename.count("/") == 1]
        if not pkls:
            pkls = [i for i in infos if i.filename == "data.pkl" or i.filename.endswith("/data.pkl")]
        if not pkls:
            raise kg_common.ProbeError("not a torch checkpoint: zip archive without data.pkl: %s" % path,
                                       "not-a-checkpoint")
        pkls.sort(key=lambda i: (i.filename.count("/"), i.filename))
        if len(pkls) > 1:
            reader.warnings.append("several data.pkl entries; read %s" % pkls[0].filename)
        info = pkls[0]
        if info.file_size > kg_common.LIMITS["read"]:
            raise kg_common.LimitError("read", "the pickle in %s is %s"
                                       % (path, kg_common.format_bytes(info.file_size)))
        prefix = info.filename[:-len("data.pkl")]
        names = set(i.filename for i in infos)
        try:
            if prefix + "byteorder" in names:
                with zf.open(prefix + "byteorder") as m:
                    order = m.read(16).strip()
                if order not in (b"little", b""):
                    reader.warnings.append("tensors stored %s-endian" % order.decode("latin-1"))
            if any(n.startswith(prefix + "code/") for n in names):
                reader.warnings.append("a TorchScript archive: only its data.pkl is shown")
            with zf.open(info) as member:
                data = _inflate(member, "the pickle in %s" % path)
        except kg_common.ProbeError:
            raise
        except MemoryError:
            raise kg_common.LimitError("memory", "inflating the pickle in %s" % path)
        except Exception as e:  # BadZipFile, zlib.error, OverflowError of a damaged offset, ...
            raise kg_common.ProbeError("truncated or corrupt zip archive: %s (%s)" % (path, e), "corrupt")
        return _unpickle(reader, data, 0, "pickle", path)[0]
    finally:
        zf.close()


def _read_legacy(fileobj, path, reader):
    """Legacy torch format: magic number, protocol version, sys_info, then the object; the storages follow it.

    The file is read in growing chunks (never past LIMITS["read"]): a pickle that runs past the bytes read so far is
    decoded again from its start with more, on a fresh copy of the reader's counts."""
    limit = kg_common.LIMITS["read"]
    data = fileobj.read(min(1 << 20, limit))
    complete = len(data) < min(1 << 20, limit)
    pos = 0
    values = []
    while len(values) < 4:
        saved = reader.save()
        try:
            value, pos = _unpickle(reader, data, pos, "pickle" if not values or len(values) == 3 else "legacy header",
                                   path, complete)
        except _NeedMore:
            reader.restore(saved)
            if len(data) >= limit:
                raise kg_common.LimitError("read", "the pickle in %s" % path)
            want = min(len(data) * 4, limit) - len(data)
            more = fileobj.read(want)
            complete = len(more) < want
            data += more
            continue
        if value is _FAILED:
            return "pickle", _FAILED
        values.append(value)
        if len(values) == 1 and not (type(value) is int and value == LEGACY_MAGIC):
            return "pickle", value  # a plain pickle file
        if len(values) == 2 and value != 1001:
            reader.warnings.append("unexpected legacy protocol version %s" % _short_repr(value))
    return "torch-legacy", values[3]


def _read_safetensors_header(fileobj, path, size):
    head = fileobj.read(8)
    if len(head) < 8:
        raise kg_common.ProbeError("truncated safetensors file: %s" % path, "corrupt")
    n = struct.unpack("<Q", head)[0]
    if n + 8 > size:
        raise kg_common.ProbeError("truncated or corrupt safetensors header: %s" % path, "corrupt")
    if n > min(MAX_SAFETENSORS_HEADER, kg_common.LIMITS["read"]):
        raise kg_common.LimitError("read", "the safetensors header of %s is %s" % (path, kg_common.format_bytes(n)))
    raw = fileobj.read(n)
    try:
        header = kg_common.loads_bounded(raw.decode("utf-8"), "the safetensors header of %s" % path)
    except (ValueError, UnicodeDecodeError):
        raise kg_common.ProbeError("corrupt safetensors header: %s" % path, "corrupt")
    if not isinstance(header, dict):
        raise kg_common.ProbeError("corrupt safetensors header: %s" % path, "corrupt")
    meta = header.pop("__metadata__", None) or {}
    tensors = {}
    data_end = 0
    for name, t in header.items():
        if not isinstance(t, dict):
            continue
        dtype, shape, offs = t.get("dtype"), t.get("shape") or [], t.get("data_offsets") or [0, 0]
        if not (isinstance(offs, list) and len(offs) == 2 and all(type(o) is int and 0 <= o < 1 << 63 for o in offs)
                and offs[0] <= offs[1]):
            raise kg_common.ProbeError("corrupt safetensors header: %s (%s: bad data_offsets)" % (path, name),
                                       "corrupt")
        data_end = max(data_end, offs[1])
        tensors[name] = {"dtype": dtype if isinstance(dtype, str) else _short_repr(dtype),
                         "shape": _shape(shape), "bytes": offs[1] - offs[0]}
    if 8 + n + data_end > size:
        raise kg_common.ProbeError("truncated safetensors file: %s (%d bytes, header says %d)"
                                   % (path, size, 8 + n + data_end), "corrupt")
    return meta, tensors


def _looks_like_safetensors(head):
    if len(head) < 9:
        return False
    n = struct.unpack("<Q", head[:8])[0]
    return 0 < n <= MAX_SAFETENSORS_HEADER and head[8:9] == b"{"


def _decode_meta_values(meta):
    """safetensors metadata is str -> str; tools often put JSON there: show it decoded."""
    out = {}
    for k, v in meta.items():
        if isinstance(v, str) and v[:1] in ("{", "[") and len(v) < (1 << 20):
            try:
                out[k] = json.loads(v)
                continue
            except (ValueError, RecursionError):
                pass
        out[k] = v
    return out


# accelerate's save_state: custom_checkpoint_N.pkl is the state_dict() of the N-th object registered for
# checkpointing (N is an index, never a step), written by torch.save.
_ACCELERATE_CUSTOM = re.compile(r"custom_checkpoint_([0-9]{1,9})\.pkl$")


def _is_tar(f):
    """A tar header block (its checksum matches) at the start: checked on 512 bytes, never by tarfile, which tries
    every decompressor on the file (lzma reads a 10 GB file of zeros to its end)."""
    f.seek(0)
    block = f.read(512)
    if len(block) < 512 or not block.strip(b"\0"):
        return False
    try:
        want = int(block[148:156].split(b"\0", 1)[0].strip() or b"x", 8)
    except ValueError:
        return False
    return want == sum(block[:148]) + 8 * 32 + sum(block[156:])


def _fill_safetensors(doc, meta, tensors, keys, want_all):
    doc["format"] = "safetensors"
    meta = _decode_meta_values(meta if isinstance(meta, dict) else {})
    doc["tensors"]["count"] += len(tensors)
    doc["tensors"]["bytes"] += sum(t["bytes"] for t in tensors.values() if isinstance(t["bytes"], int))
    doc["topLevelKeys"] = (["__metadata__"] + sorted(tensors))[:MAX_TOP_KEYS]
    if want_all:
        doc["args"] = {"__metadata__": meta, "tensors": tensors}
        return
    key, value, found = _pick(meta, keys, False)
    if not found:
        key, value = "__metadata__", meta
        if not meta:
            doc["warnings"].append("no __metadata__ in the safetensors header")
    doc["key"] = key
    doc["args"] = value
    doc["argsType"] = _args_type(value)
    if isinstance(meta, dict):
        doc["step"] = _first_int(meta, STEP_KEYS)
        for k in STEP_KEYS:
            if doc["step"] is None and isinstance(meta.get(k), str) and meta[k].isdigit():
                doc["step"] = int(meta[k])


# --- torch.distributed.checkpoint -----------------------------------------------------------------------------------


def _is_dcp(top):
    return isinstance(top, _StandIn) and top._kg_name.startswith("torch.distributed.checkpoint") and \
        top._kg_name.endswith(".Metadata")


def _fill_dcp(doc, reader, top, path, keys, want_all):
    state = _standin_state(top) or {}
    sdm = state.get("state_dict_metadata") or {}
    storage = state.get("storage_data") or {}
    folder = os.path.dirname(path)
    count, nbytes = 0, 0
    entries = {}
    for fqn, md in (sdm.items() if isinstance(sdm, dict) else []):
        fqn = _key(fqn)
        mstate = _standin_state(md) or {}
        if md is not None and isinstance(md, _StandIn) and md._kg_name.endswith("TensorStorageMetadata"):
            dtype = _dcp_dtype(mstate.get("properties"))
            size = mstate.get("size") or []
            t = _Tensor(dtype, size if isinstance(size, (list, tuple)) else [])
            count += 1
            nbytes += t.nbytes
            entries[fqn] = t
        else:
            entries[fqn] = _DCP_BYTES
    # Bytes items (args, step...) are small torch.save blobs inside the .distcp files: read the ones asked for.
    # dcp.save flattens nested dicts: {"args": {"lr": ...}} is saved as the item "args.lr".
    wanted = set(k.split(".")[0] for k in keys) if keys else set(ARG_KEYS) | set(STEP_KEYS) | {"epoch"}
    for idx, info in (storage.items() if isinstance(storage, dict) else []):
        fqn = _key(idx)
        if entries.get(fqn) is not _DCP_BYTES or not (want_all or fqn.split(".")[0] in wanted):
            continue
        ist = _standin_state(info) or {}
        rel, off, length = ist.get("relative_path"), ist.get("offset"), ist.get("length")
        if ist.get("transform_descriptors"):
            doc["warnings"].append(
                "%s is stored transformed (%s): not decoded" % (fqn, _short_repr(ist["transform_descriptors"])))
            continue
        if not (isinstance(rel, str) and isinstance(off, int) and isinstance(length, int)) \
                or length > kg_common.LIMITS["read"] or "/" in rel or rel.startswith("."):
            continue
        entries[fqn] = _read_dcp_item(doc, reader, os.path.join(folder, rel), off, length, fqn)
    doc["tensors"]["count"] += count
    doc["tensors"]["bytes"] += nbytes
    top_dict = {}
    for k, v in entries.items():
        v = "<bytes item>" if v is _DCP_BYTES else v
        parts = k.split(".")
        if isinstance(v, _Tensor) or len(parts) == 1 or (
                parts[0] in top_dict and not isinstance(top_dict[parts[0]], dict)):
            top_dict[k] = v
            continue
        cur = top_dict
        for part in parts[:-1]:
            nxt = cur.setdefault(part, {})
            if not isinstance(nxt, dict):
                break
            cur = nxt
        else:
            cur[parts[-1]] = v
            continue
        top_dict[k] = v
    _fill(doc, reader, top_dict, keys, want_all)


_DCP_BYTES = object()


def _dcp_dtype(props):
    if isinstance(props, _StandIn):
        st = props._kg["state"]
        vals = list(st.values()) if isinstance(st, dict) else list(st) if isinstance(st, (tuple, list)) else []
        vals += list(props._kg["args"])
        for v in vals:
            if isinstance(v, _Name) and v.text[6:] in _DTYPES:
                return _DTYPES[v.text[6:]][0]
    return "?"


def _read_dcp_item(doc, reader, path, offset, length, fqn):
    f = _open(path)
    try:
        f.seek(offset)
        blob = f.read(length)
    finally:
        doc["bytesRead"] += f.count
        f.close()
    if len(blob) != length:
        doc["warnings"].append("%s: truncated in %s" % (fqn, os.path.basename(path)))
        return None
    sub = _Reader()
    try:
        if blob[:4] == b"PK\x03\x04":
            value = _read_torch_zip(io.BytesIO(blob), path, sub)
        else:
            value = _read_legacy(io.BytesIO(blob), path, sub)[1]
    except kg_common.ProbeError as e:
        doc["warnings"].append("%s: %s" % (fqn, e))
        return None
    for g in sub.unsafe:
        if g not in reader.unsafe:
            reader.unsafe.append(g)
    return None if value is _FAILED else value
