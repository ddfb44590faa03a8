"""Read the args of a training checkpoint without torch, without the weights and without running code from the file.

Usage: python3 ckpt_args.py PATH [--key KEY]... [--all]
       python3 ckpt_args.py PATH --stat    (only {path, bytes, mtime, dir}: what a cache of results is keyed by)

stdlib only.  Formats: torch zip checkpoints (only the one ``*/data.pkl`` member is read, never the tensor storages),
the legacy non-zip torch format (stops before the storages), Lightning ``.ckpt``, a Hugging Face checkpoint folder
(``training_args.bin``, ``config.json``, ``trainer_state.json``), a ``.safetensors`` header and a
torch.distributed.checkpoint ``.metadata`` file (or its folder).

Pickles are decoded by a restricted unpickler: the globals it knows become plain values, tensors become
``{dtype, shape, bytes}`` from their storage metadata, and every other global becomes an inert, named stand-in that
records how the pickle tried to build it.  Nothing named by the file is ever imported or called; dangerous globals
(``os.system``, ``subprocess.*``, ``builtins.eval``...) are listed under ``unsafeGlobals``.

Result: ``{format, path, bytes, key, args, argsType, step, epoch, tensors: {count, bytes}, topLevelKeys,
unsafeGlobals, warnings, bytesRead}``.
"""
import datetime
import io
import json
import os
import pickle
import posixpath
import stat
import struct
import tarfile
import zipfile

import kg_common

# Tried in order when --key is not given.
ARG_KEYS = ("args", "config", "hyper_parameters", "hparams", "cfg", "training_args", "opt")
STEP_KEYS = ("global_step", "step", "iteration", "iter", "num_updates", "train_step", "steps")
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
MAX_PICKLE_BYTES = 512 * 1024 * 1024
MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024
MAX_NODES = 200000
MAX_DEPTH = 80
MAX_TOP_KEYS = 2000

# torch dtype name -> (canonical name, itemsize in bytes)
_DTYPES = {}
for _names, _size in (
    (("float32", "float"), 4), (("float64", "double"), 8), (("float16", "half"), 2), (("bfloat16",), 2),
    (("int64", "long"), 8), (("int32", "int"), 4), (("int16", "short"), 2), (("int8",), 1), (("uint8",), 1),
    (("bool",), 1), (("complex64", "cfloat"), 8), (("complex128", "cdouble"), 16), (("complex32", "chalf"), 4),
    (("qint8",), 1), (("quint8",), 1), (("qint32",), 4), (("quint4x2",), 1), (("quint2x4",), 1),
    (("float8_e4m3fn",), 1), (("float8_e5m2",), 1), (("float8_e4m3fnuz",), 1), (("float8_e5m2fnuz",), 1),
    (("float8_e8m0fnu",), 1), (("float4_e2m1fn_x2",), 1), (("uint16",), 2), (("uint32",), 4), (("uint64",), 8),
    (("bits8",), 1), (("bits16",), 2), (("bits1x8",), 1), (("bits2x4",), 1), (("bits4x2",), 1),
):
    for _n in _names:
        _DTYPES[_n] = (_names[0], _size)

_STORAGE_DTYPES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16", "BFloat16Storage": "bfloat16",
    "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16", "CharStorage": "int8",
    "ByteStorage": "uint8", "BoolStorage": "bool", "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128", "ComplexHalfStorage": "complex32", "QInt8Storage": "qint8",
    "QUInt8Storage": "quint8", "QInt32Storage": "qint32", "QUInt4x2Storage": "quint4x2",
    "QUInt2x4Storage": "quint2x4", "UntypedStorage": "uint8", "TypedStorage": "uint8",
}

# Other torch globals that are plain names (layouts, memory formats, qschemes).
_TORCH_NAMES = frozenset((
    "strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc", "_mkldnn", "jagged",
    "contiguous_format", "channels_last", "channels_last_3d", "preserve_format", "per_tensor_affine",
    "per_channel_affine", "per_tensor_symmetric", "per_channel_symmetric", "per_channel_affine_float_qparams",
))

_SAFETENSORS_SIZES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2,
    "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "C64": 8, "F4": 1, "F6_E2M3": 1, "F6_E3M2": 1,
}

# Modules whose every global is a way to run code, touch files or the network.
_UNSAFE_MODULES = frozenset((
    "os", "posix", "nt", "subprocess", "sys", "shutil", "importlib", "runpy", "pty", "socket", "ctypes", "pickle",
    "_pickle", "cPickle", "marshal", "code", "codeop", "commands", "webbrowser", "multiprocessing", "asyncio",
    "pdb", "bdb", "timeit", "platform", "signal", "_thread", "thread", "threading", "ftplib", "http", "urllib",
    "urllib2", "requests", "tempfile", "io", "_io", "types", "inspect", "zipimport", "pkgutil",
    "builtins.__import__", "dill", "cloudpickle", "joblib", "_posixsubprocess", "sysconfig", "distutils",
    "setuptools", "pip", "telnetlib", "smtplib", "poplib", "imaplib", "xmlrpc", "atexit",
))
_UNSAFE_BUILTINS = frozenset((
    "eval", "exec", "execfile", "compile", "__import__", "getattr", "setattr", "delattr", "open", "file", "input",
    "raw_input", "globals", "locals", "vars", "breakpoint", "exit", "quit", "reload", "apply", "type",
    "__builtins__",
))
_UNSAFE_QUALIFIED = frozenset((
    "operator.attrgetter", "operator.methodcaller", "operator.itemgetter", "functools.partial", "functools.reduce",
    "torch.load", "torch.serialization.load", "torch.jit.load", "torch.hub.load", "torch.ops", "numpy.load",
    "numpy.testing._private.utils.runstring", "numpy.lib.npyio.load", "copyreg.__newobj_ex__",
))
_UNSAFE_NAMES = frozenset(("system", "popen", "spawn", "exec", "eval", "run_path", "run_module", "check_output",
                           "check_call", "getoutput", "getstatusoutput", "Popen", "execv", "execve", "execl"))


def _is_unsafe(module, name):
    root = module.split(".", 1)[0]
    if root in _UNSAFE_MODULES or module in _UNSAFE_MODULES:
        return True
    if root in ("builtins", "__builtin__") and name.split(".", 1)[0] in _UNSAFE_BUILTINS:
        return True
    if module + "." + name in _UNSAFE_QUALIFIED:
        return True
    return name.split(".")[-1] in _UNSAFE_NAMES


# --------------------------------------------------------------------------------------------------------------------
# What decoded objects are made of.  Classes the file can reach are sealed: a hostile BUILD cannot set attributes on
# them, so nothing decoded from one file changes how the next one is read in the resident helper.


class _Sealed(type):
    def __setattr__(cls, name, value):
        raise pickle.UnpicklingError("the pickle tried to set attribute %r on class %s" % (name, cls.__name__))

    def __delattr__(cls, name):
        raise pickle.UnpicklingError("the pickle tried to delete attribute %r on class %s" % (name, cls.__name__))


class _Name(object):
    """A torch/numpy name such as torch.float16 or torch.strided: shown as its text."""
    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


class _StorageClass(_Name):
    __slots__ = ("dtype",)

    def __init__(self, text, dtype):
        _Name.__init__(self, text)
        self.dtype = dtype


class _Storage(object):
    __slots__ = ("dtype", "itemsize", "numel", "key", "location")

    def __init__(self, dtype, numel, key, location):
        self.dtype = dtype
        self.itemsize = _DTYPES.get(dtype, (dtype, 1))[1]
        self.numel = numel if isinstance(numel, int) else 0
        self.key = key
        self.location = location

    @property
    def nbytes(self):
        return self.numel * self.itemsize


class _Tensor(object):
    """What a tensor or parameter is shown as: dtype, shape and bytes (numel * itemsize), never its values."""
    __slots__ = ("dtype", "shape", "nbytes")

    def __init__(self, dtype, shape):
        self.dtype = dtype
        self.shape = [int(d) for d in shape] if isinstance(shape, (list, tuple)) else []
        numel = 1
        for d in self.shape:
            numel *= d
        self.nbytes = numel * _DTYPES.get(dtype, (dtype, 1))[1]

    def json(self):
        return {"dtype": self.dtype, "shape": list(self.shape), "bytes": self.nbytes}


class _StandIn(object, metaclass=_Sealed):
    """An object of a class the reader does not import: records how the pickle built it, runs nothing."""
    _kg_name = "?"
    _kg_unsafe = False
    _kg_ref = False  # a bare reference (an enum member): shown as its name
    __slots__ = ("_kg",)

    def __new__(cls, *args, **kwargs):
        self = object.__new__(cls)
        object.__setattr__(self, "_kg", {"args": list(args), "kwargs": dict(kwargs), "state": None, "items": [],
                                         "list": [], "attrs": {}})
        return self

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        kg = self._kg
        if isinstance(state, tuple) and len(state) == 2 and all(s is None or isinstance(s, dict) for s in state):
            merged = {}
            for s in state:
                merged.update(s or {})
            state = merged
        if isinstance(kg["state"], dict) and isinstance(state, dict):
            kg["state"].update(state)
        else:
            kg["state"] = state

    def __setattr__(self, name, value):
        self._kg["attrs"][name] = value

    def __setitem__(self, key, value):
        self._kg["items"].append((key, value))

    def append(self, value):
        self._kg["list"].append(value)

    def extend(self, values):
        self._kg["list"].extend(values)

    def __call__(self, *args, **kwargs):
        return _call_result(self, args, kwargs)

    def __repr__(self):
        return "<%s object>" % self._kg_name


def _call_result(target, args, kwargs):
    cls = _Sealed("call", (_StandIn,), {"_kg_name": "%s(...)" % _describe(target), "__slots__": ()})
    return cls(*args, **kwargs)


def _describe(obj):
    if isinstance(obj, _StandIn):
        return obj._kg_name
    if isinstance(obj, type) and issubclass(obj, _StandIn):
        return obj._kg_name
    return type(obj).__name__


class _Namespace(object, metaclass=_Sealed):
    """argparse.Namespace: its attributes, as a dict."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)

    def __setstate__(self, state):
        if isinstance(state, dict):
            self.__dict__.update(state)
        elif isinstance(state, tuple):
            for s in state:
                if isinstance(s, dict):
                    self.__dict__.update(s)


class _ODict(dict, metaclass=_Sealed):
    """collections.OrderedDict (a state_dict carries `_metadata` through BUILD: kept aside, not shown)."""

    def __setstate__(self, state):
        self.__dict__["_kg_state"] = state


class _NpDtype(object, metaclass=_Sealed):
    """numpy.dtype('f8', False, True) followed by BUILD (3, '<', ...)."""
    __slots__ = ("code", "order")

    def __init__(self, code="", *_rest):
        self.code = str(code)
        self.order = "<"

    def __setstate__(self, state):
        if isinstance(state, tuple) and len(state) > 1 and state[1] in ("<", ">", "|", "="):
            self.order = state[1]

    @property
    def name(self):
        kind, size = self.code[:1], self.code[1:]
        if kind == "b":
            return "bool"
        if kind in _NP_KINDS and size.isdigit():
            return _NP_KINDS[kind] + str(int(size) * 8)
        return self.code

    def decode(self, data):
        fmt = {"f2": "e", "f4": "f", "f8": "d", "i1": "b", "i2": "h", "i4": "i", "i8": "q", "u1": "B", "u2": "H",
               "u4": "I", "u8": "Q", "b1": "?"}.get(self.code)
        if fmt is None or not isinstance(data, (bytes, bytearray)) or len(data) != struct.calcsize(fmt):
            return None
        return struct.unpack((">" if self.order == ">" else "<") + fmt, bytes(data))[0]


_NP_KINDS = {"f": "float", "i": "int", "u": "uint", "c": "complex"}


class _NpArray(object, metaclass=_Sealed):
    """numpy.core.multiarray._reconstruct(ndarray, (0,), b'b') then BUILD (1, shape, dtype, fortran, raw)."""
    __slots__ = ("dtype", "shape", "values")

    def __init__(self, *_args):
        self.dtype = None
        self.shape = []
        self.values = None

    def __setstate__(self, state):
        if not (isinstance(state, tuple) and len(state) >= 5):
            return
        shape, dtype, raw = state[1], state[2], state[4]
        self.shape = [int(d) for d in shape] if isinstance(shape, (tuple, list)) else []
        self.dtype = dtype
        if isinstance(dtype, _NpDtype) and isinstance(raw, (bytes, bytearray)):
            size = 1
            for d in self.shape:
                size *= d
            width = len(raw) // size if size else 0
            if 0 < size <= 16 and width:
                vals = [dtype.decode(raw[i * width:(i + 1) * width]) for i in range(size)]
                if all(v is not None for v in vals):
                    self.values = vals
        elif isinstance(raw, list) and len(raw) <= 16:
            self.values = raw


# --------------------------------------------------------------------------------------------------------------------


class _Reader(object):
    """One decoding: the globals seen, the tensors met, the stand-in classes made (fresh for every file)."""

    def __init__(self):
        self.unsafe = []
        self.globals_seen = set()
        self.tensor_count = 0
        self.storages = {}
        self.warnings = []
        self._classes = {}
        self._known = self._known_globals()

    # Stand-in classes are made per file so nothing built from one file is shared with another.
    def standin(self, module, name, unsafe=False):
        full = module + "." + name
        cls = self._classes.get(full)
        if cls is None:
            cls = _Sealed(str(name.split(".")[-1]), (_StandIn,),
                          {"_kg_name": full, "_kg_unsafe": unsafe, "__slots__": ()})
            self._classes[full] = cls
        return cls

    def find_class(self, module, name):
        module, name = str(module), str(name)
        if module in ("__builtin__", "exceptions"):  # protocol 2 pickles use the Python 2 names
            module = "builtins"
        elif module == "copy_reg":
            module = "copyreg"
        full = module + "." + name
        self.globals_seen.add(full)
        known = self._known.get(full)
        if known is not None:
            return known
        if module == "torch" and name.endswith("Storage"):
            dtype = _STORAGE_DTYPES.get(name) or _camel_dtype(name[:-len("Storage")])
            return _StorageClass("torch." + name, dtype)
        if module == "torch" and (name in _DTYPES or name in _TORCH_NAMES):
            return _Name("torch." + name)
        if _is_unsafe(module, name):
            if full not in self.unsafe:
                self.unsafe.append(full)
            return self.standin(module, name, unsafe=True)
        return self.standin(module, name)

    def persistent_load(self, pid):
        if isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage":
            cls, key, location, numel = pid[1], pid[2], pid[3], pid[4]
            dtype = cls.dtype if isinstance(cls, _StorageClass) else "uint8"
            st = self.storages.get(str(key))
            if st is None:
                st = _Storage(dtype, numel, key, location)
                self.storages[str(key)] = st
            return st
        if isinstance(pid, tuple) and pid and pid[0] == "module":
            return self.standin("torch.nn", "Module")()
        return self.standin("persistent", "id")(pid)

    # Known globals: safe callables that build plain values.
    def _known_globals(self):
        k = {}

        def tensor(dtype, size):
            self.tensor_count += 1
            return _Tensor(dtype, size)

        def storage_dtype(st):
            return st.dtype if isinstance(st, _Storage) else "uint8"

        def rebuild_tensor(storage, _offset=0, size=(), *_rest):
            return tensor(storage_dtype(storage), size)

        def rebuild_tensor_v3(storage, _offset, size, _stride, _rg, _hooks, dtype=None, *_rest):
            return tensor(dtype.text[6:] if isinstance(dtype, _Name) else storage_dtype(storage), size)

        def rebuild_parameter(data, *_rest):
            return data if isinstance(data, _Tensor) else tensor("?", ())

        def rebuild_qtensor(storage, _offset, size, *_rest):
            return tensor(storage_dtype(storage), size)

        def rebuild_meta(dtype, size, *_rest):
            return tensor(dtype.text[6:] if isinstance(dtype, _Name) else "?", size)

        def rebuild_wrapper(_cls, dtype, size, *_rest):
            return tensor(dtype.text[6:] if isinstance(dtype, _Name) else "?", size)

        def rebuild_numpy(data, dtype, *_rest):
            arr = data if isinstance(data, _NpArray) else None
            return tensor(dtype.text[6:] if isinstance(dtype, _Name) else "?", arr.shape if arr else ())

        def rebuild_opaque(*_args):
            return tensor("?", ())

        def rebuild_from_type(func, _new_type, args, _state=None):
            if callable(func) and (func in k.values()) and isinstance(args, tuple):
                return func(*args)
            return self.standin("torch._tensor", "_rebuild_from_type_v2")(func, _new_type, args)

        for mod in ("torch._utils", "torch._tensor"):
            k[mod + "._rebuild_tensor"] = rebuild_tensor
            k[mod + "._rebuild_tensor_v2"] = rebuild_tensor
            k[mod + "._rebuild_tensor_v3"] = rebuild_tensor_v3
            k[mod + "._rebuild_parameter"] = rebuild_parameter
            k[mod + "._rebuild_parameter_with_state"] = rebuild_parameter
            k[mod + "._rebuild_qtensor"] = rebuild_qtensor
            k[mod + "._rebuild_meta_tensor_no_storage"] = rebuild_meta
            k[mod + "._rebuild_wrapper_subclass"] = rebuild_wrapper
            k[mod + "._rebuild_device_tensor_from_numpy"] = rebuild_numpy
            for opaque in ("_rebuild_sparse_tensor", "_rebuild_sparse_csr_tensor", "_rebuild_nested_tensor",
                           "_rebuild_xla_tensor", "_rebuild_mlc_tensor", "_rebuild_npu_tensor"):
                k[mod + "." + opaque] = rebuild_opaque
        k["torch._tensor._rebuild_from_type"] = rebuild_from_type
        k["torch._tensor._rebuild_from_type_v2"] = rebuild_from_type
        k["torch.device"] = _torch_device
        k["torch.Size"] = _safe_list
        k["torch.serialization._get_layout"] = lambda name: _Name(str(name))
        k["torch.torch_version.TorchVersion"] = _safe_str

        for b in ("builtins", "__builtin__"):
            k[b + ".set"] = _safe_set
            k[b + ".frozenset"] = _safe_set
            k[b + ".list"] = _safe_list
            k[b + ".tuple"] = _safe_tuple
            k[b + ".dict"] = _safe_dict
            k[b + ".bytearray"] = _safe_bytes
            k[b + ".bytes"] = _safe_bytes
            k[b + ".complex"] = _safe_complex
            k[b + ".slice"] = slice
            k[b + ".int"] = _safe_int
            k[b + ".float"] = _safe_float
            k[b + ".str"] = _safe_str
            k[b + ".unicode"] = _safe_str
            k[b + ".bool"] = bool
            k[b + ".object"] = _OBJECT
            k[b + ".range"] = _safe_range
            k[b + ".xrange"] = _safe_range
        k["builtins.getattr"] = self._getattr
        k["_codecs.encode"] = _codecs_encode
        k["collections.OrderedDict"] = _ODict
        k["collections.defaultdict"] = _defaultdict
        k["collections.Counter"] = _safe_dict
        k["collections.deque"] = _deque
        k["argparse.Namespace"] = _Namespace
        for name in ("datetime", "date", "time", "timedelta", "timezone"):
            k["datetime." + name] = getattr(datetime, name)
        for name in ("Path", "PosixPath", "PurePath", "PurePosixPath", "WindowsPath", "PureWindowsPath"):
            k["pathlib." + name] = _path
        k["decimal.Decimal"] = _safe_str
        k["fractions.Fraction"] = _fraction
        for np in ("numpy", "numpy.core", "numpy._core"):
            k[np + ".multiarray.scalar"] = _np_scalar
            k[np + ".multiarray._reconstruct"] = _NpArray
            k[np + ".numeric._frombuffer"] = _np_frombuffer
            k[np + ".dtype"] = _NpDtype
        k["numpy.ndarray"] = _NpArray
        k["numpy.dtype"] = _NpDtype
        for reg in ("copyreg", "copy_reg"):
            k[reg + "._reconstructor"] = self._reconstructor
            k[reg + ".__newobj__"] = self._newobj
        return k

    def _reconstructor(self, cls, base=None, state=None):
        if isinstance(cls, type) and isinstance(cls, _Sealed):
            obj = cls.__new__(cls)
            if state is not None and hasattr(obj, "__setstate__"):
                obj.__setstate__(state)
            return obj
        return self.standin("copyreg", "_reconstructor")(cls, base, state)

    def _getattr(self, obj, name, *_default):
        """getattr(SomeEnum, 'MEMBER') is how Python 3.11+ pickles enum members: a named reference, never looked up.
        Calling what it names is shown, and is unsafe when the object was."""
        target = obj._kg_name if isinstance(obj, (_StandIn, _Sealed)) and hasattr(obj, "_kg_name") else _describe(obj)
        full = "%s.%s" % (target, name if isinstance(name, str) else "?")
        unsafe = bool(getattr(obj, "_kg_unsafe", False))
        cls = self._classes.get(("attr", full))
        if cls is None:
            cls = _Sealed("attr", (_StandIn,), {"_kg_name": full, "_kg_unsafe": unsafe, "_kg_ref": True,
                                                 "__slots__": ()})
            self._classes[("attr", full)] = cls
        return cls()

    def _newobj(self, cls, *args):
        if isinstance(cls, type) and isinstance(cls, _Sealed):
            return cls.__new__(cls, *args)
        return self.standin("copyreg", "__newobj__")(cls, *args)

    def unpickler(self, fileobj):
        reader = self

        class Unpickler(pickle.Unpickler):
            def find_class(self, module, name):
                return reader.find_class(module, name)

            def persistent_load(self, pid):
                return reader.persistent_load(pid)

        return Unpickler(fileobj, encoding="latin1")

    def load(self, fileobj):
        return self.unpickler(fileobj).load()

    @property
    def tensor_bytes(self):
        return sum(s.nbytes for s in self.storages.values())


_OBJECT = _Sealed("object", (_StandIn,), {"_kg_name": "builtins.object", "__slots__": ()})


def _codecs_encode(text, encoding="utf-8", *_rest):
    # protocol 2 writes bytes as _codecs.encode(str, 'latin1')
    if isinstance(text, str) and encoding in ("latin1", "latin-1", "utf-8", "utf8", "ascii"):
        return text.encode(encoding)
    return b""


def _camel_dtype(stem):
    snake = ""
    for i, c in enumerate(stem):
        if c.isupper() and i and not stem[i - 1].isupper():
            snake += "_"
        snake += c.lower()
    for cand in (stem.lower(), snake, stem[:1].lower() + stem[1:]):
        if cand in _DTYPES:
            return _DTYPES[cand][0]
    return stem[:1].lower() + stem[1:]


def _torch_device(kind="cpu", index=None):
    kind = str(kind)
    return kind if index is None else "%s:%s" % (kind, index)


def _iterable(v):
    return isinstance(v, (list, tuple, set, frozenset, dict, str, bytes, _ODict))


def _safe_list(v=()):
    return list(v) if _iterable(v) else [v]


def _safe_tuple(v=()):
    return tuple(v) if _iterable(v) else (v,)


def _safe_set(v=()):
    try:
        return frozenset(v) if _iterable(v) else frozenset()
    except TypeError:  # unhashable members: keep them as a list
        return list(v)


def _safe_dict(v=None, **kw):
    d = dict(v) if isinstance(v, (dict, list, tuple)) else {}
    d.update(kw)
    return d


def _defaultdict(_factory=None, *rest):
    return _safe_dict(rest[0]) if rest else {}


def _deque(v=(), *_rest):
    return _safe_list(v)


def _safe_bytes(v=b"", *rest):
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    if isinstance(v, str):
        return v.encode(rest[0] if rest and isinstance(rest[0], str) and rest[0] in ("latin1", "latin-1", "utf-8",
                                                                                   "ascii") else "latin-1")
    if isinstance(v, (list, tuple)) and len(v) <= 1 << 20 and all(isinstance(i, int) and 0 <= i < 256 for i in v):
        return bytes(v)
    return b""  # bytes(n) of a huge n would only fill memory


def _safe_int(v=0, *rest):
    if isinstance(v, (int, float, bool)):
        return int(v)
    if isinstance(v, (str, bytes)) and len(v) <= 4300:
        try:
            return int(v, *[b for b in rest if isinstance(b, int)][:1])
        except ValueError:
            return str(v)
    return 0


def _safe_float(v=0.0):
    try:
        return float(v) if isinstance(v, (int, float, str, bytes)) else float("nan")
    except ValueError:
        return float("nan")


def _safe_str(v="", *_rest):
    return v if isinstance(v, str) else v.decode("latin-1") if isinstance(v, bytes) else repr(v)


def _safe_complex(re=0.0, im=0.0):
    if isinstance(re, (int, float)) and isinstance(im, (int, float)):
        return complex(re, im)
    return complex(0)


def _safe_range(*args):
    return "range(%s)" % ", ".join(str(a) for a in args if isinstance(a, int))


def _path(*parts):
    return posixpath.join(*[p for p in parts if isinstance(p, str)]) if parts else "."


def _fraction(*args):
    return "/".join(str(a) for a in args if isinstance(a, (int, str)))


def _np_scalar(dtype, data=None):
    if isinstance(dtype, _NpDtype):
        v = dtype.decode(data)
        if v is not None:
            return v
    return _safe_str(data) if isinstance(data, bytes) else None


def _np_frombuffer(buf, dtype, shape, *_rest):
    arr = _NpArray()
    arr.__setstate__((1, shape, dtype, False, buf))
    return arr


# --------------------------------------------------------------------------------------------------------------------
# Decoded objects -> JSON-able values.


class _Converter(object):
    def __init__(self, prune_tensors=False):
        self.nodes = 0
        self.truncated = False
        self.prune = prune_tensors

    def __call__(self, obj, depth=0, path=()):
        self.nodes += 1
        if self.nodes > MAX_NODES:
            self.truncated = True
            return "<truncated>"
        if depth > MAX_DEPTH:
            self.truncated = True
            return "<too deep>"
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return obj
        if isinstance(obj, (bytes, bytearray)):
            return repr(bytes(obj)) if len(obj) <= 64 else "<%d bytes>" % len(obj)
        if isinstance(obj, complex):
            return repr(obj)
        if isinstance(obj, _Tensor):
            return obj.json()
        if isinstance(obj, _Storage):
            return {"storage": obj.dtype, "numel": obj.numel, "bytes": obj.nbytes}
        if isinstance(obj, _Name):
            return obj.text
        if isinstance(obj, _NpDtype):
            return obj.name
        if isinstance(obj, _NpArray):
            out = {"dtype": obj.dtype.name if isinstance(obj.dtype, _NpDtype) else "?", "shape": list(obj.shape)}
            if obj.values is not None:
                out["values"] = [self(v, depth + 1, path) for v in obj.values]
            return out
        if isinstance(obj, (datetime.datetime, datetime.date, datetime.time)):
            return obj.isoformat()
        if isinstance(obj, (datetime.timedelta, datetime.timezone, slice)):
            return str(obj)
        if isinstance(obj, type):
            return "<%s>" % (obj._kg_name if issubclass(obj, _StandIn) else obj.__name__)
        oid = id(obj)
        if oid in path:
            return "<cycle>"
        path = path + (oid,)
        if isinstance(obj, dict):
            return self._dict(obj.items(), depth, path)
        if isinstance(obj, (list, tuple)):
            return self._list(obj, depth, path)
        if isinstance(obj, (set, frozenset)):
            return self._list(sorted(obj, key=repr), depth, path)
        if isinstance(obj, _Namespace):
            return self._dict(obj.__dict__.items(), depth, path)
        if isinstance(obj, _StandIn):
            return self._standin(obj, depth, path)
        return repr(obj)

    def _value(self, v, depth, path):
        if self.prune and _has_tensor_only(v):
            return _tensor_summary(v)
        return self(v, depth + 1, path)

    def _list(self, items, depth, path):
        return [self._value(v, depth, path) for v in items]

    def _dict(self, items, depth, path):
        out = {}
        for k, v in items:
            out[_key(k)] = self._value(v, depth, path)
        return out

    def _standin(self, obj, depth, path):
        kg = obj._kg
        state, args, items, lst, attrs = kg["state"], kg["args"], kg["items"], kg["list"], kg["attrs"]
        bare = state is None and not items and not lst and not attrs and not kg["kwargs"] and not args
        if obj._kg_ref and bare:
            return obj._kg_name
        if (not obj._kg_unsafe and state is None and not items and not lst and not attrs and not kg["kwargs"] and len(args) == 1
                and (args[0] is None or isinstance(args[0], (bool, int, float, str)))):
            return args[0]  # an enum value, or a str/int subclass
        out = {"$class": obj._kg_name}
        if obj._kg_unsafe:
            out["$unsafe"] = True
        if args:
            out["$args"] = self(list(args), depth + 1, path)
        if kg["kwargs"]:
            out["$kwargs"] = self(kg["kwargs"], depth + 1, path)
        if isinstance(state, dict):
            for k, v in self(state, depth + 1, path).items():
                out.setdefault(k, v)
        elif state is not None:
            out["$state"] = self(state, depth + 1, path)
        if attrs:
            for k, v in self(attrs, depth + 1, path).items():
                out.setdefault(k, v)
        if items:
            out["$items"] = self._dict(items, depth + 1, path)
        if lst:
            out["$list"] = self._list(lst, depth + 1, path)
        return out


def _has_tensor_only(v):
    """True for a tensor, or a container whose leaves are all tensors (a state_dict, optimizer moments)."""
    if isinstance(v, (_Tensor, _Storage)):
        return True
    if isinstance(v, dict):
        return bool(v) and all(_has_tensor_only(x) for x in v.values())
    if isinstance(v, (list, tuple)):
        return bool(v) and all(_has_tensor_only(x) for x in v)
    return False


def _tensor_summary(v):
    """'<tensor float32[3, 2]>' or '<12 tensors, 1.5 MB>' in place of tensors in a summary."""
    if isinstance(v, _Tensor):
        return "<tensor %s%s>" % (v.dtype, v.shape)
    leaves = []
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
        else:
            leaves.append(x)
    nbytes = sum(x.nbytes for x in leaves)
    return "<%d tensor%s, %s>" % (len(leaves), "" if len(leaves) == 1 else "s", _human(nbytes))


def _human(n):
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return ("%d %s" if unit == "bytes" else "%.1f %s") % (n, unit)
        n /= 1024.0
    return str(n)


def _key(k):
    if isinstance(k, str):
        return k
    if isinstance(k, (int, float, bool)) or k is None:
        return json.dumps(k)
    if isinstance(k, _Name):
        return k.text
    if isinstance(k, _StandIn):
        state = k._kg["state"]
        if isinstance(state, dict) and isinstance(state.get("fqn"), str):
            return state["fqn"]
    return repr(k)


def _args_type(obj):
    if isinstance(obj, _Namespace):
        return "argparse.Namespace"
    if isinstance(obj, _StandIn):
        return obj._kg_name
    if isinstance(obj, _ODict):
        return "collections.OrderedDict"
    if obj is None:
        return None
    return type(obj).__name__


def _standin_state(obj):
    """The attributes of a stand-in (a TrainingArguments, a Metadata) as a dict, or None."""
    if not isinstance(obj, _StandIn):
        return None
    state = obj._kg["state"]
    out = dict(state) if isinstance(state, dict) else {}
    out.update(obj._kg["attrs"])
    return out


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
    try:
        raw = open(path, "rb", buffering=0)
    except FileNotFoundError:
        raise kg_common.ProbeError("no such file: %s" % path, "not-found")
    except PermissionError:
        raise kg_common.ProbeError("permission denied: %s" % path, "permission-denied")
    except IsADirectoryError:
        raise kg_common.ProbeError("is a folder: %s" % path, "not-a-checkpoint")
    except OSError as e:
        raise kg_common.ProbeError("cannot read %s: %s" % (path, e.strerror or e), "unreadable")
    return _CountingFile(raw)


def _unpickle(reader, fileobj, what, path):
    try:
        return reader.load(fileobj)
    except kg_common.ProbeError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, KeyError, IndexError,
            struct.error, UnicodeDecodeError, zipfile.BadZipFile, OverflowError, RecursionError) as e:
        if reader.unsafe:
            # A hostile file is still reported (what it wanted to call), not just refused.
            reader.warnings.append("could not decode %s: %s: %s" % (what, type(e).__name__, e))
            return _FAILED
        if isinstance(e, EOFError):
            raise kg_common.ProbeError("truncated %s in %s" % (what, path), "corrupt")
        raise kg_common.ProbeError("corrupt %s in %s (%s: %s)" % (what, path, type(e).__name__, e), "corrupt")
    except MemoryError:
        raise kg_common.ProbeError("%s in %s is too large to decode" % (what, path), "corrupt")


_FAILED = object()


def _read_torch_zip(fileobj, path, reader):
    try:
        zf = zipfile.ZipFile(fileobj)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
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
        if info.file_size > MAX_PICKLE_BYTES:
            raise kg_common.ProbeError("the pickle in %s is %d MB: too large to read safely"
                                       % (path, info.file_size >> 20), "corrupt")
        prefix = info.filename[:-len("data.pkl")]
        names = set(i.filename for i in infos)
        if prefix + "byteorder" in names:
            order = zf.read(prefix + "byteorder").strip()
            if order not in (b"little", b""):
                reader.warnings.append("tensors stored %s-endian" % order.decode("latin-1"))
        if any(n.startswith(prefix + "code/") for n in names):
            reader.warnings.append("a TorchScript archive: only its data.pkl is shown")
        try:
            member = zf.open(info)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
            raise kg_common.ProbeError("truncated or corrupt zip archive: %s (%s)" % (path, e), "corrupt")
        with member:
            return _unpickle(reader, member, "pickle", path)
    finally:
        zf.close()


def _read_legacy(fileobj, path, reader):
    """Legacy torch format: magic number, protocol version, sys_info, then the object; the storages follow it."""
    buffered = io.BufferedReader(fileobj, 65536)
    first = _unpickle(reader, buffered, "pickle", path)
    if first is _FAILED:
        return "pickle", _FAILED
    if first != LEGACY_MAGIC:
        return "pickle", first  # a plain pickle file
    version = _unpickle(reader, buffered, "legacy header", path)
    if version != 1001:
        reader.warnings.append("unexpected legacy protocol version %r" % (version,))
    _unpickle(reader, buffered, "legacy header", path)  # sys_info: byte order and type sizes
    return "torch-legacy", _unpickle(reader, buffered, "pickle", path)


def _read_safetensors_header(fileobj, path, size):
    head = fileobj.read(8)
    if len(head) < 8:
        raise kg_common.ProbeError("truncated safetensors file: %s" % path, "corrupt")
    n = struct.unpack("<Q", head)[0]
    if n > MAX_SAFETENSORS_HEADER or n + 8 > size:
        raise kg_common.ProbeError("truncated or corrupt safetensors header: %s" % path, "corrupt")
    raw = fileobj.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
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
        nbytes = (offs[1] - offs[0]) if len(offs) == 2 else 0
        data_end = max(data_end, offs[1] if len(offs) == 2 else 0)
        tensors[name] = {"dtype": dtype, "shape": shape, "bytes": nbytes}
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
            except ValueError:
                pass
        out[k] = v
    return out


# --------------------------------------------------------------------------------------------------------------------


class _Result(object):
    def __init__(self, path, size):
        self.doc = {"format": None, "path": path, "bytes": size, "key": None, "args": None, "argsType": None,
                    "step": None, "epoch": None, "tensors": {"count": 0, "bytes": 0}, "topLevelKeys": [],
                    "unsafeGlobals": [], "warnings": [], "bytesRead": 0}


def _pick(top, keys, want_all, preferred=ARG_KEYS):
    """(key, value, found) following --key / the default order; key None with found False means 'summary'."""
    if want_all:
        return None, top, True
    if isinstance(top, dict):
        if keys:
            found = [(k, _lookup(top, k)) for k in keys]
            found = [(k, v) for k, v in found if v is not _MISSING]
            if not found:
                raise kg_common.ProbeError("no key %s in the checkpoint (top-level keys: %s)"
                                           % (", ".join(keys), ", ".join(sorted(_key(k) for k in top)[:20])),
                                           "no-key")
            if len(found) == 1:
                return found[0][0], found[0][1], True
            return ",".join(k for k, _ in found), dict(found), True
        for k in preferred:
            if k in top:
                return k, top[k], True
        return None, top, False
    if keys:
        state = _standin_state(top) if not isinstance(top, _Namespace) else top.__dict__
        if state is not None:
            return _pick(state, keys, False)
        raise kg_common.ProbeError("the checkpoint is a %s, not a dict: --key does not apply" % _args_type(top),
                                   "no-key")
    return None, top, True


_MISSING = object()


def _lookup(top, key):
    if key in top:
        return top[key]
    cur = top
    for part in key.split("."):
        if isinstance(cur, _Namespace):
            cur = cur.__dict__
        elif isinstance(cur, _StandIn):
            cur = _standin_state(cur)
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            return _MISSING
    return cur


def _first_int(top, names):
    if not isinstance(top, dict):
        return None
    for n in names:
        v = top.get(n)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def _fill(doc, reader, top, keys, want_all, preferred=ARG_KEYS):
    """Pick the args from the decoded top-level object and turn everything into JSON-able values."""
    if top is _FAILED:
        doc["args"] = None
    else:
        if isinstance(top, _StandIn) and not isinstance(top, _Namespace):
            state = _standin_state(top)
            if state and not keys and not want_all:
                doc["topLevelKeys"] = sorted(_key(k) for k in state)[:MAX_TOP_KEYS]
        key, value, found = _pick(top, keys, want_all, preferred)
        if isinstance(top, dict):
            doc["topLevelKeys"] = [_key(k) for k in top][:MAX_TOP_KEYS]
            doc["step"] = _first_int(top, STEP_KEYS)
            doc["epoch"] = _first_int(top, ("epoch", "epochs", "current_epoch"))
        conv = _Converter(prune_tensors=not found)
        doc["key"] = key
        doc["argsType"] = _args_type(value)
        if isinstance(value, _StandIn) and not want_all:
            # A stand-in's class is already in argsType; its fields are the args.
            value = _unwrap(conv(value))
        else:
            value = conv(value)
        doc["args"] = value
        if not found:
            doc["warnings"].append("no args key (%s): showing the top-level values that are not tensors"
                                   % ", ".join(preferred))
        if conv.truncated:
            doc["warnings"].append("the args are too large or too deep: shown truncated")
    doc["tensors"]["count"] += reader.tensor_count
    doc["tensors"]["bytes"] += reader.tensor_bytes
    _note_unsafe(doc, reader)


def _unwrap(v):
    if isinstance(v, dict) and "$class" in v:
        v = dict(v)
        v.pop("$class", None)
    return v


def _note_unsafe(doc, reader):
    for g in reader.unsafe:
        if g not in doc["unsafeGlobals"]:
            doc["unsafeGlobals"].append(g)
    for w in reader.warnings:
        if w not in doc["warnings"]:
            doc["warnings"].append(w)
    if reader.unsafe:
        msg = ("UNSAFE: this checkpoint's pickle calls %s; loading it with torch.load(weights_only=False) or "
               "pickle would run that code. Nothing was run here." % ", ".join(reader.unsafe))
        if msg not in doc["warnings"]:
            doc["warnings"].insert(0, msg)


def _read_file(path, size, keys, want_all, res):
    doc = res.doc
    f = _open(path)
    try:
        head = f.read(16)
        f.seek(0)
        reader = _Reader()
        if head[:4] == b"PK\x03\x04" or head[:4] == b"PK\x05\x06":
            top = _read_torch_zip(f, path, reader)
            doc["format"] = "torch-zip"
            if _is_dcp(top):  # some torch versions torch.save the .metadata
                doc["format"] = "dcp-metadata"
                _fill_dcp(doc, reader, top, path, keys, want_all)
                return
            if isinstance(top, dict) and ("pytorch-lightning_version" in top or "hyper_parameters" in top):
                doc["format"] = "lightning"
        elif head[:1] == b"\x80" or head[:1] in (b"(", b"}", b"]", b"c", b"K", b"I", b"N"):
            fmt, top = _read_legacy(f, path, reader)
            doc["format"] = fmt
            if fmt == "pickle" and _is_dcp(top):
                doc["format"] = "dcp-metadata"
                _fill_dcp(doc, reader, top, path, keys, want_all)
                return
        elif _looks_like_safetensors(head):
            meta, tensors = _read_safetensors_header(f, path, size)
            _fill_safetensors(doc, meta, tensors, keys, want_all)
            return
        elif size >= 512 and _is_tar(path):
            raise kg_common.ProbeError("torch tar checkpoint (written by torch < 0.4) is not supported: %s" % path,
                                       "not-a-checkpoint")
        else:
            if size == 0:
                raise kg_common.ProbeError("empty file, not a checkpoint: %s" % path, "not-a-checkpoint")
            raise kg_common.ProbeError("not a checkpoint (not a torch zip, legacy torch, pickle or safetensors "
                                       "file): %s" % path, "not-a-checkpoint")
        _fill(doc, reader, top, keys, want_all)
    finally:
        doc["bytesRead"] += f.count
        f.close()


def _is_tar(path):
    try:
        return tarfile.is_tarfile(path)
    except (OSError, tarfile.TarError):
        return False


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
            doc["warnings"].append("%s is stored transformed (%s): not decoded" % (fqn, ist["transform_descriptors"]))
            continue
        if not (isinstance(rel, str) and isinstance(off, int) and isinstance(length, int)) or length > (64 << 20) \
                or "/" in rel or rel.startswith("."):
            continue
        entries[fqn] = _read_dcp_item(doc, reader, os.path.join(folder, rel), off, length, fqn)
    doc["tensors"]["count"] += count
    doc["tensors"]["bytes"] += nbytes
    top_dict = {}
    for k, v in entries.items():
        v = "<bytes item>" if v is _DCP_BYTES else v
        parts = k.split(".")
        if isinstance(v, _Tensor) or len(parts) == 1 or parts[0] in top_dict and not isinstance(top_dict[parts[0]], dict):
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


# --- Hugging Face checkpoint folders ---------------------------------------------------------------------------------


def _read_json(path, doc):
    try:
        with open(path, "rb") as f:
            data = f.read(64 << 20)
            doc["bytesRead"] += len(data)
        return json.loads(data.decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as e:
        doc["warnings"].append("could not read %s: %s" % (os.path.basename(path), e))
        return None


def _read_folder(path, keys, want_all, res):
    doc = res.doc
    try:
        names = set(os.listdir(path))
    except OSError as e:
        raise kg_common.ProbeError("cannot list %s: %s" % (path, e.strerror or e), "unreadable")
    if ".metadata" in names:
        mpath = os.path.join(path, ".metadata")
        st = os.stat(mpath)
        _read_file(mpath, st.st_size, keys, want_all, res)
        doc["path"] = path
        return
    hf = [n for n in ("training_args.bin", "config.json", "trainer_state.json") if n in names]
    if not hf:
        raise kg_common.ProbeError("not a checkpoint folder (no training_args.bin, config.json, trainer_state.json "
                                   "or .metadata): %s" % path, "not-a-checkpoint")
    doc["format"] = "hf-folder"
    top = {}
    reader = _Reader()
    if "training_args.bin" in names:
        f = _open(os.path.join(path, "training_args.bin"))
        try:
            head = f.read(4)
            f.seek(0)
            if head == b"PK\x03\x04":
                top["training_args"] = _read_torch_zip(f, path + "/training_args.bin", reader)
            else:
                top["training_args"] = _read_legacy(f, path + "/training_args.bin", reader)[1]
        finally:
            doc["bytesRead"] += f.count
            f.close()
    if "config.json" in names:
        top["config"] = _read_json(os.path.join(path, "config.json"), doc)
    if "trainer_state.json" in names:
        ts = _read_json(os.path.join(path, "trainer_state.json"), doc)
        if isinstance(ts, dict):
            history = ts.pop("log_history", None)
            if isinstance(history, list):
                ts["log_history"] = "<%d entries>" % len(history)
                if history and isinstance(history[-1], dict):
                    ts["last_log"] = history[-1]
            if isinstance(ts.get("global_step"), int):
                doc["step"] = ts["global_step"]
            if isinstance(ts.get("epoch"), (int, float)):
                doc["epoch"] = ts["epoch"]
        top["trainer_state"] = ts
    for n in sorted(names):
        if n.endswith(".safetensors"):
            f = _open(os.path.join(path, n))
            try:
                st = os.fstat(f.f.fileno())
                _meta, tensors = _read_safetensors_header(f, os.path.join(path, n), st.st_size)
            except kg_common.ProbeError as e:
                doc["warnings"].append(str(e))
                continue
            finally:
                doc["bytesRead"] += f.count
                f.close()
            doc["tensors"]["count"] += len(tensors)
            doc["tensors"]["bytes"] += sum(t["bytes"] for t in tensors.values() if isinstance(t["bytes"], int))
    step, epoch = doc["step"], doc["epoch"]
    _fill(doc, reader, top, keys, want_all, preferred=("training_args",) + ARG_KEYS)
    doc["step"], doc["epoch"] = step, epoch
    if doc["key"] == "training_args":
        doc["argsType"] = _args_type(top.get("training_args"))


# --------------------------------------------------------------------------------------------------------------------


def _stat_only(path, st):
    """Size and newest mtime, read cheaply: a folder's is the newest of itself and the files the reader reads."""
    mtime, size = st.st_mtime, st.st_size
    if stat.S_ISDIR(st.st_mode):
        size = 0
        for n in ("training_args.bin", "config.json", "trainer_state.json", ".metadata"):
            try:
                s = os.stat(os.path.join(path, n))
            except OSError:
                continue
            mtime = max(mtime, s.st_mtime)
            size += s.st_size
    return {"path": path, "bytes": size, "mtime": mtime, "dir": stat.S_ISDIR(st.st_mode)}


def _parse_argv(argv):
    path, keys, want_all, want_stat = None, [], False, False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--key":
            if i + 1 >= len(argv):
                raise kg_common.ProbeError("--key needs a value", "usage")
            keys.append(argv[i + 1])
            i += 2
            continue
        if a.startswith("--key="):
            keys.append(a[len("--key="):])
        elif a == "--all":
            want_all = True
        elif a == "--stat":
            want_stat = True
        elif a.startswith("--") and a != "--":
            raise kg_common.ProbeError(
                "unknown option %s (usage: ckpt_args.py PATH [--key KEY]... [--all] | PATH --stat)" % a, "usage")
        elif path is None:
            path = a
        else:
            raise kg_common.ProbeError("one PATH only (usage: ckpt_args.py PATH [--key KEY]... [--all])", "usage")
        i += 1
    if path is None:
        raise kg_common.ProbeError("usage: ckpt_args.py PATH [--key KEY]... [--all]", "usage")
    return os.path.expanduser(path), keys, want_all, want_stat


def main(argv):
    path, keys, want_all, want_stat = _parse_argv(argv)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise kg_common.ProbeError("no such file: %s" % path, "not-found")
    except PermissionError:
        raise kg_common.ProbeError("permission denied: %s" % path, "permission-denied")
    except OSError as e:
        raise kg_common.ProbeError("cannot read %s: %s" % (path, e.strerror or e), "unreadable")
    if want_stat:
        return _stat_only(path, st)
    res = _Result(path, st.st_size)
    if stat.S_ISDIR(st.st_mode):
        res.doc["bytes"] = 0
        _read_folder(path, keys, want_all, res)
    else:
        _read_file(path, st.st_size, keys, want_all, res)
    res.doc["mtime"] = st.st_mtime
    # Secrets in the args (HF's hub_token, a wandb_api_key, a URL with a password) never leave the host.
    res.doc["args"] = kg_common.redact_tree(res.doc["args"])
    return res.doc


if __name__ == "__main__":
    kg_common.run(main)
