"""One decoding of a checkpoint's pickle (for kg_pickle): which global a name resolves to (a safe constructor, a
tensor rebuilder or a stand-in), what the pickle may call, and the work it is allowed.
"""
import datetime
import pickle

import kg_common
from kg_pickle import _Unpickler
from kg_pickle_objects import (
    _DTYPES, _Name, _Namespace, _NpArray, _NpDtype, _ODict, _SIZED, _STORAGE_DTYPES, _Sealed, _StandIn, _Storage,
    _StorageClass, _TORCH_NAMES, _Tensor, _camel_dtype, _defaultdict, _deque, _describe, _fraction, _hkey, _is_unsafe,
    _np_frombuffer, _np_scalar, _path, _safe_bytes, _safe_complex, _safe_dict, _safe_float, _safe_int, _safe_list,
    _safe_range, _safe_set, _safe_slice, _safe_str, _safe_tuple, _torch_device,
)


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
        # What the pickle may call: the reader's own functions and classes (by identity), and stand-ins.
        self._callables = set(map(id, self._known.values()))
        self._copiers = set(map(id, (_safe_list, _safe_tuple, _safe_set, _safe_dict, _deque, _defaultdict,
                                     _safe_bytes)))
        self._rebuilders = set(id(v) for k, v in self._known.items() if "._rebuild_" in k)
        # The pickle's work: opcodes, and items copied by the calls and BUILDs it makes (each 2 x LIMITS["items"],
        # so a hostile file's objects stay within the memory limit; a real state_dict takes ~30 opcodes a tensor).
        self.op_budget = 2 * kg_common.LIMITS["items"]
        self.work_left = self.op_budget
        self._ignored = set()
        self._unsafe_seen = set()

    def charge(self, n):
        self.work_left -= n
        if self.work_left < 0:
            raise kg_common.LimitError("items", "the pickle's work (items copied)", self.op_budget)

    def call(self, func, args, kwargs, how):
        """REDUCE/NEWOBJ/OBJ/INST: only the reader's own callables run; a stand-in records the call."""
        if type(args) is not tuple:
            raise pickle.UnpicklingError("%s arguments must be a tuple, not %s" % (how, type(args).__name__))
        n = len(args) + (len(kwargs) if kwargs else 0)
        if kwargs is None and id(func) in self._rebuilders:  # tensors: nothing copied
            self.work_left -= n
            if self.work_left < 0:
                self.charge(0)
            return func(*args)
        if id(func) in self._copiers or func is _ODict:
            for a in args:  # what the call copies (list(a_long_string) makes a string per character)
                if type(a) in _SIZED:
                    n += len(a)
        self.work_left -= n
        if self.work_left < 0:
            self.charge(0)
        if kwargs is None and id(func) in self._callables:
            return func(*args)
        if isinstance(func, _StandIn):
            target = "%s(...)" % func._kg_name[:200]
            cls = self._classes.get(("call", target))
            if cls is None:
                cls = self._new_class(target, "call", False, None)
                self._classes[("call", target)] = cls
            return cls(*args, **(kwargs or {}))
        if func is _ODict:
            return _ODict(_safe_dict(*args, **(kwargs or {})))
        if isinstance(func, _Sealed):
            if how == "NEWOBJ":
                # A class made by _Sealed: pyright takes its __new__ for the metaclass's (type.__new__).
                obj = func.__new__(func, *args, **(kwargs or {}))  # pyright: ignore[reportCallIssue, reportArgumentType]
                return obj
            obj = func(*args, **(kwargs or {}))
            if how == "REDUCE" and isinstance(obj, _StandIn):
                obj._kg.reduced = True
            return obj
        if id(func) not in self._callables:
            raise pickle.UnpicklingError("the pickle calls %s, which is not a class or function" % _describe(func))
        if kwargs and any(not isinstance(k, str) for k in kwargs):
            raise pickle.UnpicklingError("keyword names must be strings")
        return func(*args, **(kwargs or {}))

    def _ignore(self, what):
        if what not in self._ignored and len(self._ignored) < 20:
            self._ignored.add(what)
            self.warnings.append("the pickle tried to %s: ignored" % what)

    def setitem(self, target, k, v):
        t = type(target)
        if t is dict or t is _ODict:
            if len(target) >= kg_common.LIMITS["items"]:
                raise kg_common.LimitError("items", "one dict in the pickle")
            target[_hkey(k)] = v
        elif isinstance(target, _StandIn):
            self.charge(1)
            target.__setitem__(k, v)
        else:
            self._ignore("set an item on a %s" % _describe(target))

    def extend(self, target, values):
        t = type(target)
        if t is list:
            if len(target) + len(values) > kg_common.LIMITS["items"]:
                raise kg_common.LimitError("items", "one list in the pickle")
            target.extend(values)
        elif isinstance(target, _StandIn):
            self.charge(len(values))
            target.extend(values)
        else:
            self._ignore("append to a %s" % _describe(target))

    def additems(self, target, values):
        if type(target) is set:
            if len(target) + len(values) > kg_common.LIMITS["items"]:
                raise kg_common.LimitError("items", "one set in the pickle")
            for x in values:
                target.add(_hkey(x))
        else:
            self._ignore("add set items to a %s" % _describe(target))

    def build(self, inst, state):
        """BUILD sets state only on an object this read made (never a class, a function or a shared object)."""
        if isinstance(inst, type) or not isinstance(inst, (_StandIn, _Namespace, _ODict, _NpDtype, _NpArray)):
            self._ignore("set the state of %s" % (("the class " + _describe(inst)) if isinstance(inst, type)
                                                   else "a " + _describe(inst)))
            return
        if isinstance(state, (dict, tuple, list)):
            n = len(state)
            if isinstance(state, tuple):  # (state, slotstate): both dicts are merged
                n += sum(len(x) for x in state[:4] if isinstance(x, dict))
            self.charge(n)
        inst.__setstate__(state)

    # Stand-in classes are made per file so nothing built from one file is shared with another.
    def standin(self, module, name, unsafe=False):
        full = module[:200] + "." + name[:200]
        cls = self._classes.get(full)
        if cls is None:
            cls = self._new_class(full, str(name.split(".")[-1]), unsafe, None)
            self._classes[full] = cls
        return cls

    def _new_class(self, full, short, unsafe, ref):
        # a class takes ~1 KB: a pickle naming a million globals would take a gigabyte
        if len(self._classes) >= kg_common.LIMITS["items"] // 100:
            raise kg_common.LimitError("items", "the classes the pickle names", kg_common.LIMITS["items"] // 100)
        return _Sealed(short, (_StandIn,), {"_kg_name": full, "_kg_unsafe": unsafe, "_kg_ref": ref, "__slots__": ()})

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
            self.note_unsafe(full)
            return self.standin(module, name, unsafe=True)
        return self.standin(module, name)

    def note_unsafe(self, full):
        if full not in self._unsafe_seen:
            self._unsafe_seen.add(full)
            if len(self.unsafe) < 100:
                self.unsafe.append(full)
            elif len(self.unsafe) == 100:
                self.warnings.append("more than 100 dangerous globals: the first 100 are listed")

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
            # Legacy torch.save writes a reference to an nn.Module class as ('module', cls, source_file, source):
            # torch.load gives back cls itself, so the reference is the class the pickle named (as in a zip file).
            cls = pid[1] if len(pid) > 1 else None
            if isinstance(cls, type) and issubclass(cls, _StandIn):
                return cls
            return self.standin("torch.nn", "Module")
        return self.standin("persistent", "id")(pid)

    # Known globals: safe callables that build plain values.
    def _known_globals(self):
        k = {}

        def tensor(dtype, size, location=None):
            self.tensor_count += 1
            return _Tensor(dtype, size, location)

        def storage_dtype(st):
            return st.dtype if isinstance(st, _Storage) else "uint8"

        def where(st):
            return st.location if isinstance(st, _Storage) else None

        def rebuild_tensor(storage, _offset=0, size=(), *_rest):
            return tensor(storage_dtype(storage), size, where(storage))

        def rebuild_tensor_v3(storage, _offset, size, _stride, _rg, _hooks, dtype=None, *_rest):
            return tensor(dtype.text[6:] if isinstance(dtype, _Name) else storage_dtype(storage), size,
                          where(storage))

        def rebuild_parameter(data, *_rest):
            return data if isinstance(data, _Tensor) else tensor("?", ())

        def rebuild_qtensor(storage, _offset, size, *_rest):
            return tensor(storage_dtype(storage), size, where(storage))

        def rebuild_meta(dtype, size, *_rest):
            return tensor(dtype.text[6:] if isinstance(dtype, _Name) else "?", size, "meta")

        def rebuild_wrapper(_cls, dtype, size, *_rest):
            return tensor(dtype.text[6:] if isinstance(dtype, _Name) else "?", size)

        def rebuild_numpy(data, dtype, *_rest):
            arr = data if isinstance(data, _NpArray) else None
            return tensor(dtype.text[6:] if isinstance(dtype, _Name) else "?", arr.shape if arr else ())

        def rebuild_opaque(*_args):
            return tensor("?", ())

        def rebuild_from_type(func, _new_type, args, _state=None):
            if id(func) in self._callables and isinstance(args, tuple):
                self.charge(len(args))
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
            k[b + ".slice"] = _safe_slice
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
            obj = cls.__new__(cls)  # pyright: ignore[reportCallIssue] (the class's __new__, not _Sealed's)
            if state is not None:
                self.build(obj, state)
            return obj
        return self.standin("copyreg", "_reconstructor")(cls, base, state)

    def _getattr(self, obj, name, *default):
        """getattr(SomeEnum, 'MEMBER'): how an enum pickles a member by name (``enum.pickle_by_enum_name``): a
        named reference, never looked up.  Allowed only in that shape, a class the pickle named and a plain name (an
        identifier, not a __dunder__); calling what it names is recorded (and unsafe when the class was).  Any other
        getattr is a way to reach code: listed under unsafeGlobals, and an inert stand-in."""
        if not (isinstance(obj, type) and issubclass(obj, _StandIn) and obj is not _OBJECT and type(name) is str
                and not default and name.isidentifier() and not name.startswith("__")):
            self.note_unsafe("builtins.getattr")
            return self.standin("builtins", "getattr", unsafe=True)(obj, name, *default)
        target = obj._kg_name[:200]
        full = "%s.%s" % (target, name[:200])
        cls = self._classes.get(("attr", full))
        if cls is None:
            cls = self._new_class(full, "attr", obj._kg_unsafe, (target, name[:200]))
            self._classes[("attr", full)] = cls
        return cls()

    def _newobj(self, cls, *args):
        if isinstance(cls, type) and isinstance(cls, _Sealed):
            return cls.__new__(cls, *args)
        return self.standin("copyreg", "__newobj__")(cls, *args)

    def save(self):
        return (len(self.unsafe), set(self.globals_seen), self.tensor_count, dict(self.storages), len(self.warnings),
                self.work_left)

    def restore(self, saved):
        n_unsafe, self.globals_seen, self.tensor_count, self.storages, n_warn, self.work_left = saved
        del self.unsafe[n_unsafe:]
        del self.warnings[n_warn:]

    def load(self, data, pos=0, complete=True):
        """(object, position after it) from the pickle at data[pos:]."""
        return _Unpickler(self, data, pos, complete).load()

    @property
    def tensor_bytes(self):
        return sum(s.nbytes for s in self.storages.values())


_OBJECT = _Sealed("object", (_StandIn,), {"_kg_name": "builtins.object", "__slots__": ()})


def _codecs_encode(text, encoding="utf-8", *_rest):
    # protocol 2 writes bytes as _codecs.encode(str, 'latin1')
    if isinstance(text, str) and encoding in ("latin1", "latin-1", "utf-8", "utf8", "ascii"):
        return text.encode(encoding)
    return b""
