"""What a checkpoint's pickle decodes to (for kg_pickle): plain names, tensors from their storage metadata, inert
named stand-ins for every other class, and the few safe constructors a pickle may call.  Which globals are unsafe.
"""
import datetime
import pickle
import posixpath
import struct

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
        self.numel = numel if isinstance(numel, int) and 0 <= numel < 1 << 63 else 0
        self.key = key
        # a location is a short word ("cpu", "cuda:0", "mps"); anything else a file says is shown cut, never used
        self.location = location if isinstance(location, str) and len(location) <= 64 else _short_repr(location)

    @property
    def nbytes(self):
        return self.numel * self.itemsize


def _shape(shape):
    """A tensor's shape as a list of ints; a hostile one (not ints, huge, too many dims) is shown as []."""
    if not isinstance(shape, (list, tuple)) or len(shape) > 64:
        return []
    out = []
    for d in shape:
        if type(d) is bool or not isinstance(d, int) or not 0 <= d < 1 << 63:
            return []
        out.append(d)
    return out


class _Tensor(object):
    """What a tensor or parameter is shown as: dtype, shape and bytes (numel * itemsize), never its values.
    ``location``: where torch.save found its storage (``cpu``, ``cuda:0``; the pickle's own text, as torch.load reads
    it before any map_location), None when the pickle does not say (a meta or wrapper tensor, DCP metadata)."""
    __slots__ = ("dtype", "shape", "nbytes", "location")

    def __init__(self, dtype, shape, location=None):
        self.dtype = dtype
        self.location = location
        self.shape = _shape(shape)
        numel = 1
        for d in self.shape:
            numel *= d
        self.nbytes = numel * _DTYPES.get(dtype, (dtype, 1))[1]

    def json(self):
        return {"dtype": self.dtype, "shape": list(self.shape), "bytes": self.nbytes}


class _Record(object):
    """How the pickle built a stand-in (kept small: a hostile pickle may make half a million of them).  ``reduced``:
    the class itself was called (REDUCE), as Enum pickles a member, rather than made by NEWOBJ or copyreg."""
    __slots__ = ("args", "kwargs", "state", "items", "list", "attrs", "reduced")

    def __init__(self, args, kwargs):
        self.args = args
        self.kwargs = kwargs or None
        self.state = None
        self.items = ()  # made a list, a list and a dict when first used
        self.list = ()
        self.attrs = None
        self.reduced = False

    def __getitem__(self, name):
        return getattr(self, name) or ({} if name in ("attrs", "kwargs") else [] if name in ("items", "list") else
                                       getattr(self, name))

    def __setitem__(self, name, value):
        setattr(self, name, value)


class _StandIn(object, metaclass=_Sealed):
    """An object of a class the reader does not import: records how the pickle built it, runs nothing."""
    _kg_name = "?"
    _kg_unsafe = False
    _kg_ref = None  # getattr(<class>, "NAME"): (the class's name, "NAME"), a member named, never looked up
    __slots__ = ("_kg",)

    def __new__(cls, *args, **kwargs):
        self = object.__new__(cls)
        object.__setattr__(self, "_kg", _Record(args, kwargs))
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
        kg = self._kg
        if not kg.attrs:
            kg.attrs = {}
        kg.attrs[name] = value

    def __setitem__(self, key, value):
        kg = self._kg
        if not kg.items:
            kg.items = []
        kg.items.append((key, value))

    def append(self, value):
        self.extend((value,))

    def extend(self, values):
        kg = self._kg
        if not kg.list:
            kg.list = []
        kg.list.extend(values)

    def __repr__(self):
        return "<%s object>" % self._kg_name


def _describe(obj):
    if isinstance(obj, _StandIn):
        return obj._kg_name
    if isinstance(obj, type) and issubclass(obj, _StandIn):
        return obj._kg_name
    if isinstance(obj, type):
        return getattr(obj, "_kg_name", obj.__name__)
    if callable(obj):
        return getattr(obj, "__name__", type(obj).__name__)
    return type(obj).__name__


class _Namespace(object, metaclass=_Sealed):
    """argparse.Namespace: its attributes, as a dict."""
    _kg_name = "argparse.Namespace"

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)  # pyright: ignore[reportAttributeAccessIssue] (a plain dict at run time)

    def __setstate__(self, state):
        if isinstance(state, dict):
            self.__dict__.update(state)  # pyright: ignore[reportAttributeAccessIssue]
        elif isinstance(state, tuple):
            for s in state:
                if isinstance(s, dict):
                    self.__dict__.update(s)  # pyright: ignore[reportAttributeAccessIssue]


class _ODict(dict, metaclass=_Sealed):
    """collections.OrderedDict (a state_dict carries `_metadata` through BUILD: kept aside, not shown)."""
    _kg_name = "collections.OrderedDict"

    def __setstate__(self, state):
        self.__dict__["_kg_state"] = state  # pyright: ignore[reportIndexIssue] (a plain dict at run time)


class _NpDtype(object, metaclass=_Sealed):
    """numpy.dtype('f8', False, True) followed by BUILD (3, '<', ...)."""
    _kg_name = "numpy.dtype"
    __slots__ = ("code", "order")

    def __init__(self, code="", *_rest):
        self.code = code if isinstance(code, str) else _short_repr(code)
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
    _kg_name = "numpy.ndarray"
    __slots__ = ("dtype", "shape", "values")

    def __init__(self, *_args):
        self.dtype = None
        self.shape = []
        self.values = None

    def __setstate__(self, state):
        if not (isinstance(state, tuple) and len(state) >= 5):
            return
        shape, dtype, raw = state[1], state[2], state[4]
        self.shape = _shape(shape)
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
    kind = kind if isinstance(kind, str) else _short_repr(kind)
    return kind if index is None else "%s:%s" % (kind, index if isinstance(index, int) else _short_repr(index))


def _iterable(v):
    return isinstance(v, (list, tuple, set, frozenset, dict, str, bytes, _ODict))


def _safe_list(v=()):
    return list(v) if _iterable(v) else [v]


def _safe_tuple(v=()):
    return tuple(v) if _iterable(v) else (v,)


def _safe_set(v=()):
    return frozenset(_hkey(x) for x in v) if _iterable(v) else frozenset()


def _safe_dict(v=None, **kw):
    d = {}
    if isinstance(v, dict):
        d.update(v)
    elif isinstance(v, (list, tuple)):
        for pair in v:
            if isinstance(pair, (list, tuple)) and len(pair) == 2:
                d[_hkey(pair[0])] = pair[1]
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
    if isinstance(v, (list, tuple)) and len(v) <= 1 << 20 and all(
            isinstance(i, int) and 0 <= i < 256 for i in v):  # pyright: ignore[reportGeneralTypeIssues]
        return bytes(v)
    return b""  # bytes(n) of a huge n would only fill memory


def _safe_int(v=0, *rest):
    if isinstance(v, float):
        return int(v) if v == v and v not in (float("inf"), float("-inf")) else v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, (str, bytes)):
        text = v.strip()
        sign = text[:1] in ("-", b"-")
        if len(text) > _INT_DIGITS:  # described, never parsed (Python 3.11+ refuses, 3.8 takes quadratic time)
            return _BigInt(len(text) - sign, sign)
        try:
            return int(v, *[b for b in rest if isinstance(b, int) and (b == 0 or 2 <= b <= 36)][:1])
        except ValueError:
            return _safe_str(v)
    return 0


def _safe_float(v=0.0):
    if isinstance(v, (str, bytes)) and len(v) > 1000:  # float('1' * 10**7) is slow, and its error repeats the text
        return float("nan")
    try:
        return float(v) if isinstance(v, (int, float, str, bytes)) else float("nan")
    except ValueError:
        return float("nan")


def _safe_str(v="", *_rest):
    # type: (object, *object) -> str
    return v if isinstance(v, str) else v.decode("latin-1") if isinstance(v, bytes) else _short_repr(v)


def _safe_complex(re=0.0, im=0.0):
    if isinstance(re, (int, float)) and isinstance(im, (int, float)):
        return complex(re, im)
    return complex(0)


def _safe_slice(*args):
    return "slice(%s)" % ", ".join(_short_repr(a, 1) for a in args[:3])


def _safe_range(*args):
    return "range(%s)" % ", ".join(str(a) if a.bit_length() <= _BIG_BITS else "<big integer>"
                                   for a in args if isinstance(a, int))


def _path(*parts):
    return posixpath.join(*[p for p in parts if isinstance(p, str)]) if parts else "."


def _fraction(*args):
    return "/".join(a if isinstance(a, str) else str(a) if a.bit_length() <= _BIG_BITS else "<big integer>"
                    for a in args if isinstance(a, (int, str)))


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


class _BigInt(object):
    """An integer written in decimal with more than 4,300 digits: described, never parsed (quadratic in Python)."""
    __slots__ = ("digits", "negative")

    def __init__(self, digits, negative):
        self.digits = digits
        self.negative = negative

    def json(self):
        return {"$bigint": {"bits": int(self.digits * 3.3219) + 1, "digits": self.digits, "negative": self.negative}}

    def __repr__(self):
        return "<integer of %d digits>" % self.digits


class _Key(object):
    """A dict key or set member too big or unhashable to hash safely: kept by identity, shown by a short repr."""
    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __repr__(self):
        return _short_repr(self.obj)

    def __str__(self):
        return _short_repr(self.obj)


_SIZED = frozenset((list, tuple, dict, set, frozenset, str, bytes, _ODict))
_INT_DIGITS = 4300  # Python 3.11+ refuses str<->int beyond this; 3.8 would take quadratic time
_BIG_BITS = 14284  # about 4,300 decimal digits
_SIMPLE_KEYS = (str, bytes, float, bool, type(None))


def _hkey(k):
    """``k`` if hashing it is cheap (its hash cannot take exponential time or deep recursion), else a _Key."""
    t = type(k)
    if t in _SIMPLE_KEYS or t is int:
        return k
    if t is tuple or t is frozenset:
        n, stack = 0, [k]
        while stack:
            x = stack.pop()
            n += 1
            if n > 256:
                return _Key(k)
            tx = type(x)
            if tx is tuple or tx is frozenset:
                stack.extend(x)
            elif not (tx in _SIMPLE_KEYS or tx is int or tx is _Name or isinstance(x, _StandIn)):
                return _Key(k)
        return k
    if t is _Name or isinstance(k, (_StandIn, _BigInt, _Key, datetime.date, datetime.time, datetime.timedelta)):
        return k
    return _Key(k)


def _short_repr(obj, level=3):
    """A repr of at most ~600 parts of 60 characters, whatever obj is: repr() of a shared or deep structure a pickle
    built would take exponential time or recurse past the stack (reprlib falls back to repr() for dict subclasses)."""
    t = type(obj)
    if obj is None or t is bool or t is float or t is complex:
        return repr(obj)
    if t is int:
        return repr(obj) if obj.bit_length() <= 200 else "<integer of %d bits>" % obj.bit_length()
    if isinstance(obj, str):
        return repr(str(obj[:60])) + ("..." if len(obj) > 60 else "")
    if isinstance(obj, (bytes, bytearray)):
        return repr(bytes(obj[:40])) + ("..." if len(obj) > 40 else "")
    if isinstance(obj, (tuple, list, set, frozenset, dict)):
        kind = tuple if isinstance(obj, tuple) else list if isinstance(obj, list) else dict \
            if isinstance(obj, dict) else set
        opening, closing = {tuple: "()", list: "[]", dict: "{}", set: "{}"}[kind]
        if level <= 0:
            return opening + "..." + closing
        parts = []
        for i, x in enumerate(obj.items() if isinstance(obj, dict) else obj):
            if i == 8:
                parts.append("...")
                break
            parts.append("%s: %s" % (_short_repr(x[0], level - 1), _short_repr(x[1], level - 1)) if kind is dict
                         else _short_repr(x, level - 1))
        return opening + ", ".join(parts) + ("," if kind is tuple and len(parts) == 1 else "") + closing
    if isinstance(obj, (_StandIn, _Name, _BigInt)):
        return repr(obj)
    if isinstance(obj, _Key):
        return _short_repr(obj.obj, level)
    if isinstance(obj, (datetime.date, datetime.time, datetime.timedelta)):
        return repr(obj)
    return "<%s>" % _describe(obj)
