"""Write real torch checkpoints without torch (stdlib only), for the demo and for tests on machines without torch.

The file is what ``torch.save`` writes: a zip archive (stored, members aligned to 64 bytes) with
``<name>/data.pkl`` (pickle protocol 2; tensors rebuilt by ``torch._utils._rebuild_tensor_v2`` from storages given as
persistent ids ``('storage', torch.FloatStorage, key, location, numel)``), ``<name>/data/<key>`` (raw little-endian
storage bytes), ``<name>/version`` ("3") and ``<name>/byteorder`` ("little").  ``torch.load`` reads it, with
``weights_only=True`` too when the args are a dict.

As a module::

    from write_checkpoint import write_checkpoint, Tensor
    write_checkpoint("step_600.pt", args={"lr": 3e-4}, step=600)

As a script::

    python3 write_checkpoint.py PATH [--step N] [--lr X] [--args-json JSON] [--namespace] [--size-mb N]
"""
import argparse
import collections
import io
import json
import math
import os
import pickle
import struct
import sys
import zipfile

# torch dtype -> (storage class, struct format, itemsize)
DTYPES = {
    "float32": ("FloatStorage", "f", 4),
    "float64": ("DoubleStorage", "d", 8),
    "float16": ("HalfStorage", "e", 2),
    "int64": ("LongStorage", "q", 8),
    "int32": ("IntStorage", "i", 4),
    "int16": ("ShortStorage", "h", 2),
    "int8": ("CharStorage", "b", 1),
    "uint8": ("ByteStorage", "B", 1),
    "bool": ("BoolStorage", "?", 1),
}


class GlobalRef(object):
    """A reference to a global by name (torch.FloatStorage...), pickled as GLOBAL without importing its module."""

    def __init__(self, module, name):
        self.module = module
        self.name = name

    def __call__(self, *_args):
        # pickle only writes references to callables; this one is never called here
        raise TypeError("%s.%s is a reference, not a function" % (self.module, self.name))


class Tensor(object):
    """A tensor to write: shape, dtype, and values (a flat list, bytes, or None for a deterministic fill)."""

    def __init__(self, shape, dtype="float32", data=None, requires_grad=False):
        if dtype not in DTYPES:
            raise ValueError("unsupported dtype %r (one of %s)" % (dtype, ", ".join(sorted(DTYPES))))
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype
        self.data = data
        self.requires_grad = requires_grad
        self.key = None

    @property
    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self):
        return self.numel * DTYPES[self.dtype][2]

    def stride(self):
        out, acc = [], 1
        for d in reversed(self.shape):
            out.append(acc)
            acc *= max(d, 1)
        return tuple(reversed(out))

    def __reduce_ex__(self, _protocol):
        # What torch.Tensor.__reduce_ex__ gives for a plain CPU tensor.
        return (GlobalRef("torch._utils", "_rebuild_tensor_v2"),
                (_StorageRef(self), 0, self.shape, self.stride(), self.requires_grad, collections.OrderedDict()))

    def chunks(self, chunk=1 << 20):
        """The raw storage bytes, little-endian, in pieces (a 1 GB tensor is never held in memory)."""
        fmt, size = DTYPES[self.dtype][1], DTYPES[self.dtype][2]
        if isinstance(self.data, (bytes, bytearray)):
            if len(self.data) != self.nbytes:
                raise ValueError("tensor data is %d bytes, shape %s needs %d" % (len(self.data), self.shape,
                                                                                self.nbytes))
            yield bytes(self.data)
            return
        if self.data is not None:
            flat = list(_flatten(self.data))
            if len(flat) != self.numel:
                raise ValueError("tensor has %d values, shape %s needs %d" % (len(flat), self.shape, self.numel))
            yield struct.pack("<%d%s" % (len(flat), fmt), *flat)
            return
        if self.numel <= 4096:
            vals = [_fill_value(i, self.dtype) for i in range(self.numel)]
            yield struct.pack("<%d%s" % (len(vals), fmt), *vals)
            return
        left = self.nbytes
        block = b"\0" * chunk
        while left > 0:
            n = min(left, chunk)
            yield block if n == chunk else block[:n]
            left -= n


def _fill_value(i, dtype):
    if dtype == "bool":
        return i % 2 == 0
    if dtype.startswith("float"):
        return ((i * 37) % 101 - 50) / 100.0
    return (i * 37) % 101 - (0 if dtype == "uint8" else 50)


def _flatten(v):
    if isinstance(v, (list, tuple)):
        for x in v:
            for y in _flatten(x):
                yield y
    else:
        yield v


def _shape_of(v):
    shape = []
    while isinstance(v, (list, tuple)):
        shape.append(len(v))
        v = v[0] if v else None
    return tuple(shape)


def as_tensor(v, dtype=None):
    """A Tensor from a Tensor, or from (nested) lists of numbers."""
    if isinstance(v, Tensor):
        return v
    flat = list(_flatten(v))
    if dtype is None:
        dtype = "float32" if any(isinstance(x, float) for x in flat) or not flat else (
            "bool" if all(isinstance(x, bool) for x in flat) else "int64")
    return Tensor(_shape_of(v), dtype, flat)


class _StorageRef(object):
    def __init__(self, tensor):
        self.tensor = tensor


class _Pickler(pickle._Pickler):
    """The pure-Python pickler, taught to write GlobalRef as GLOBAL and storages as persistent ids."""

    dispatch = dict(pickle._Pickler.dispatch)

    def __init__(self, f, storages):
        pickle._Pickler.__init__(self, f, protocol=2)
        self._storages = storages

    def save_globalref(self, obj):
        self.write(pickle.GLOBAL + ("%s\n%s\n" % (obj.module, obj.name)).encode("utf-8"))
        self.memoize(obj)

    dispatch[GlobalRef] = save_globalref

    def persistent_id(self, obj):
        if isinstance(obj, _StorageRef):
            t = obj.tensor
            if t.key is None:
                t.key = str(len(self._storages))
                self._storages.append(t)
            storage_class = self._storage_class(t.dtype)
            return ("storage", storage_class, t.key, "cpu", t.numel)
        return None

    def _storage_class(self, dtype):
        # One GlobalRef per class so the pickle memoizes it, as torch's pickles do.
        cache = self.__dict__.setdefault("_classes", {})
        if dtype not in cache:
            cache[dtype] = GlobalRef("torch", DTYPES[dtype][0])
        return cache[dtype]


def _aligned_info(zf, name, size):
    """A ZipInfo whose data starts on a 64-byte boundary, padded with the extra field torch's writer uses."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    info.file_size = size
    zip64 = size * 1.05 > zipfile.ZIP64_LIMIT
    offset = zf.fp.tell()
    fixed = 30 + len(name.encode("utf-8")) + 4 + (20 if zip64 else 0)
    pad = (-(offset + fixed)) % 64
    info.extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad
    return info, zip64


def _write_member(zf, name, chunks, size):
    info, zip64 = _aligned_info(zf, name, size)
    with zf.open(info, "w", force_zip64=zip64) as out:
        for c in chunks:
            out.write(c)


def _default_tensors():
    return collections.OrderedDict([
        ("encoder.weight", Tensor((8, 4))),
        ("encoder.bias", Tensor((8,))),
        ("head.weight", Tensor((2, 8))),
        ("head.bias", Tensor((2,))),
    ])


def build_checkpoint(args=None, tensors=None, step=None, optimizer=True, extra=None, args_key="args"):
    """The object torch.save would be given: args, a state_dict (OrderedDict with _metadata), optimizer, step."""
    state = collections.OrderedDict()
    for k, v in (tensors if tensors is not None else _default_tensors()).items():
        state[k] = as_tensor(v)
    state._metadata = collections.OrderedDict([("", {"version": 1})])
    obj = {}
    if args is not None:
        obj[args_key] = args
    obj["model"] = state
    if optimizer:
        lr = (args.get("lr") if isinstance(args, dict) else getattr(args, "lr", None)) if args is not None else None
        obj["optimizer"] = {
            # Adam moments for the small tensors only, so --size-mb gives a file of about that size.
            "state": {i: {"step": step or 0, "exp_avg": Tensor(t.shape), "exp_avg_sq": Tensor(t.shape)}
                      for i, t in enumerate(state.values()) if t.numel <= 1 << 20},
            "param_groups": [{"lr": lr if lr is not None else 1e-3, "betas": (0.9, 0.999), "eps": 1e-8,
                              "weight_decay": 0.0, "params": list(range(len(state)))}],
        }
    if step is not None:
        obj["step"] = step
    if extra:
        obj.update(extra)
    return obj


def save(obj, path, archive_name=None):
    """torch.save(obj, path) for objects made of plain values, argparse.Namespace, OrderedDict and Tensor."""
    if archive_name is None:
        archive_name = os.path.splitext(os.path.basename(path))[0] or "archive"
    storages = []
    buf = io.BytesIO()
    _Pickler(buf, storages).dump(obj)
    pkl = buf.getvalue()
    tmp = path + ".tmp-%d" % os.getpid()
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
            _write_member(zf, archive_name + "/data.pkl", [pkl], len(pkl))
            _write_member(zf, archive_name + "/byteorder", [b"little"], 6)
            for t in storages:
                _write_member(zf, "%s/data/%s" % (archive_name, t.key), t.chunks(), t.nbytes)
            _write_member(zf, archive_name + "/version", [b"3\n"], 2)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def write_checkpoint(path, args=None, tensors=None, step=None, optimizer=True, extra=None, args_key="args",
                     archive_name=None):
    """Write a torch checkpoint {args, model (state_dict), optimizer, step} at path; returns path."""
    return save(build_checkpoint(args, tensors, step, optimizer, extra, args_key), path, archive_name)


def main(argv=None):
    p = argparse.ArgumentParser(description="Write a torch checkpoint without torch.")
    p.add_argument("path")
    p.add_argument("--step", type=int, default=None)
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--args-json", default=None, help="the args as a JSON object")
    p.add_argument("--namespace", action="store_true", help="store the args as an argparse.Namespace")
    p.add_argument("--size-mb", type=float, default=0, help="add a zero tensor of about this many MB")
    o = p.parse_args(argv)
    args = json.loads(o.args_json) if o.args_json else {"lr": 3e-4, "batch_size": 32, "optimizer": "adamw"}
    if o.lr is not None:
        args["lr"] = o.lr
    tensors = _default_tensors()
    if o.size_mb > 0:
        tensors["blob"] = Tensor((int(math.ceil(o.size_mb * (1 << 20) / 4)),))
    write_checkpoint(o.path, args=argparse.Namespace(**args) if o.namespace else args, tensors=tensors, step=o.step)
    sys.stdout.write("%s (%d bytes)\n" % (o.path, os.path.getsize(o.path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
