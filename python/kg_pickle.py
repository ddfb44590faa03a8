"""The restricted unpickler of ckpt_args: a stack machine over a pickle's bytes, bounded by kg_common.LIMITS."""
import codecs
import itertools
import pickle
import struct

import kg_common
from kg_pickle_objects import _BigInt, _INT_DIGITS, _hkey

_repeat = itertools.repeat
_UINT4 = struct.Struct("<I")


# --------------------------------------------------------------------------------------------------------------------
# The restricted unpickler: a stack machine of our own over the pickle's bytes in memory (never pickle.Unpickler,
# whose C memo is an array a 24-byte file can size to gigabytes). Every opcode is counted, the memo is a dict capped
# at LIMITS["items"], MARK nesting at LIMITS["depth"], containers and the stack at LIMITS["items"]; BUILD, SETITEM and
# APPEND act only on objects this read made; the only callables are the reader's own.


class _NeedMore(Exception):
    """The pickle runs past the bytes read so far (a legacy file is read in growing chunks)."""


def _decode_str(raw, what="utf-8"):
    return raw.decode(what, "surrogatepass") if what == "utf-8" else raw.decode(what)


def _text_int(line):
    """The decimal integer of a text opcode (INT, LONG, PUT, GET)."""
    s = line.strip()
    if s.endswith(b"L"):
        s = s[:-1]
    digits = len(s.lstrip(b"+-"))
    if digits > _INT_DIGITS:
        return _BigInt(digits, s.startswith(b"-"))
    return int(s)


class _Unpickler(object):
    """One pickle, decoded from ``data[pos:]``; ``complete`` False means more bytes may follow (raise _NeedMore)."""

    def __init__(self, reader, data, pos=0, complete=True):
        self.reader = reader
        self.data = data
        self.pos = pos
        self.complete = complete
        limits = kg_common.LIMITS
        self.items = limits["items"]
        self.depth = limits["depth"]

    def short(self):
        if self.complete:
            raise EOFError("the pickle ends early")
        raise _NeedMore()

    def line(self, pos):
        data = self.data
        end = data.find(b"\n", pos, pos + kg_common.LIMITS["line"])
        if end < 0:
            if len(data) - pos >= kg_common.LIMITS["line"]:
                raise kg_common.LimitError("line", "a text opcode of the pickle")
            self.short()
        return data[pos:end], end + 1

    def too_many(self, what):
        raise kg_common.LimitError("items", what, self.items)

    def load(self):
        """(value, position after STOP)."""
        reader = self.reader
        data = self.data
        end = len(data)
        pos = self.pos
        stack = []
        metastack = []
        memo = {}
        items, depth = self.items, self.depth
        # The opcode budget is counted by the loop itself; ops_left is a second one of the same size for the items
        # that opcodes move into containers, and sets (216 bytes each) count 3 more.
        ops_left = reader.op_budget
        unpack_from = struct.unpack_from
        unpack_I = _UINT4.unpack_from
        append = stack.append
        call = reader.call
        try:
            for _ in _repeat(None, reader.op_budget):
                op = data[pos]
                pos += 1
                # most frequent first (in a torch state_dict): LONG_BINPUT, BINGET, BININT1, MARK, REDUCE, TUPLE...
                if op == 0x72 or op == 0x71 or op == 0x94:  # LONG_BINPUT r, BINPUT q, MEMOIZE
                    if op == 0x72:
                        idx = unpack_I(data, pos)[0]
                        pos += 4
                    elif op == 0x71:
                        idx = data[pos]
                        pos += 1
                    else:
                        idx = len(memo)
                    # while every index is below the item limit, so is the memo's size
                    if idx >= items and len(memo) >= items and idx not in memo:
                        self.too_many("the pickle's memo")
                    memo[idx] = stack[-1]
                elif op == 0x68 or op == 0x6A:  # BINGET h, LONG_BINGET j
                    if op == 0x68:
                        idx = data[pos]
                        pos += 1
                    else:
                        idx = unpack_I(data, pos)[0]
                        pos += 4
                    try:
                        append(memo[idx])
                    except KeyError:
                        raise pickle.UnpicklingError("memo key %d missing" % idx)
                elif op == 0x4B:  # BININT1 K
                    append(data[pos])
                    pos += 1
                elif op == 0x28:  # MARK (
                    if len(metastack) >= depth:
                        raise kg_common.LimitError("depth", "the pickle's nesting", depth)
                    metastack.append(stack)
                    stack = []
                    append = stack.append
                elif op == 0x52:  # REDUCE R
                    args = stack.pop()
                    stack[-1] = call(stack[-1], args, None, "REDUCE")
                elif op == 0x74 and metastack:  # TUPLE t
                    got = stack
                    stack = metastack.pop()
                    append = stack.append
                    if len(got) > items:
                        self.too_many("one container in the pickle")
                    ops_left -= len(got)
                    if ops_left < 0:
                        break
                    append(tuple(got))
                elif op == 0x29:  # EMPTY_TUPLE )
                    append(())
                elif op == 0x58 or op == 0x8C or op == 0x8D:  # BINUNICODE X, SHORT_BINUNICODE, BINUNICODE8
                    if op == 0x58:
                        n = unpack_I(data, pos)[0]
                        pos += 4
                    elif op == 0x8C:
                        n = data[pos]
                        pos += 1
                    else:
                        n = unpack_from("<Q", data, pos)[0]
                        pos += 8
                    if pos + n > end:
                        self.short()
                    if n < 65536:
                        append(data[pos:pos + n].decode("utf-8", "surrogatepass"))
                    else:  # decoded in place: a 60 MB string is not copied twice
                        with memoryview(data) as mv:
                            append(codecs.utf_8_decode(mv[pos:pos + n], "surrogatepass", True)[0])
                    pos += n
                elif op == 0x89:  # NEWFALSE
                    append(False)
                elif op == 0x51:  # BINPERSID Q
                    stack[-1] = reader.persistent_load(stack[-1])
                elif op == 0x85 or op == 0x86 or op == 0x87:  # TUPLE1-3
                    n = op - 0x84
                    if len(stack) < n:
                        raise pickle.UnpicklingError("stack underflow")
                    t = tuple(stack[-n:])
                    del stack[-n:]
                    append(t)
                elif op == 0x7D:  # EMPTY_DICT }
                    append({})
                elif op == 0x74 or op == 0x6C or op == 0x65 or op == 0x75 or op == 0x64 or op == 0x91 or op == 0x90 \
                        or op == 0x31 or op == 0x6F or op == 0x69:
                    # ops that pop a MARK: TUPLE t, LIST l, APPENDS e, SETITEMS u, DICT d, FROZENSET, ADDITEMS,
                    # POP_MARK 1, OBJ o, INST i
                    if op == 0x69:
                        mod, pos = self.line(pos)
                        name, pos = self.line(pos)
                    if not metastack:
                        raise pickle.UnpicklingError("no MARK on the stack")
                    got = stack
                    stack = metastack.pop()
                    append = stack.append
                    n = len(got)
                    if n > items:
                        self.too_many("one container in the pickle")
                    ops_left -= n
                    if ops_left < 0:
                        break
                    if op == 0x74:
                        append(tuple(got))
                    elif op == 0x6C:
                        append(got)
                    elif op == 0x65 or op == 0x75 or op == 0x90:
                        if not stack:
                            raise pickle.UnpicklingError("no container under the MARK")
                        target = stack[-1]
                        if op == 0x65:
                            reader.extend(target, got)
                        elif op == 0x75:
                            if n % 2:
                                raise pickle.UnpicklingError("odd number of items for SETITEMS")
                            for i in range(0, n, 2):
                                reader.setitem(target, got[i], got[i + 1])
                        else:
                            reader.additems(target, got)
                    elif op == 0x64:
                        if n % 2:
                            raise pickle.UnpicklingError("odd number of items for DICT")
                        d = {}
                        for i in range(0, n, 2):
                            reader.setitem(d, got[i], got[i + 1])
                        append(d)
                    elif op == 0x91:
                        ops_left -= 3  # a set is 216 bytes or more
                        if ops_left < 0:
                            break
                        if n > items:
                            self.too_many("a frozenset in the pickle")
                        append(frozenset(_hkey(x) for x in got))
                    elif op == 0x6F:
                        if not got:
                            raise pickle.UnpicklingError("OBJ without a class")
                        append(call(got[0], tuple(got[1:]), None, "OBJ"))
                    elif op == 0x69:
                        cls = reader.find_class(mod.decode("ascii"), name.decode("ascii"))  # pyright: ignore
                        append(call(cls, tuple(got), None, "INST"))
                    # POP_MARK: nothing more
                elif op == 0x5D:  # EMPTY_LIST ]
                    append([])
                elif op == 0x8F:  # EMPTY_SET (216 bytes: counted as 4 opcodes)
                    ops_left -= 3
                    if ops_left < 0:
                        break
                    append(set())
                elif op == 0x73:  # SETITEM s
                    if len(stack) < 3:
                        raise pickle.UnpicklingError("stack underflow")
                    v = stack.pop()
                    k = stack.pop()
                    reader.setitem(stack[-1], k, v)
                elif op == 0x61:  # APPEND a
                    if len(stack) < 2:
                        raise pickle.UnpicklingError("stack underflow")
                    v = stack.pop()
                    reader.extend(stack[-1], (v,))
                elif op == 0x50:  # PERSID P
                    pid, pos = self.line(pos)
                    append(reader.persistent_load(pid.decode("ascii")))
                elif op == 0x4D:  # BININT2 M
                    if pos + 2 > end:
                        self.short()
                    append(data[pos] | data[pos + 1] << 8)
                    pos += 2
                elif op == 0x4A:  # BININT J
                    if pos + 4 > end:
                        self.short()
                    append(unpack_from("<i", data, pos)[0])
                    pos += 4
                elif op == 0x4E:  # NONE N
                    append(None)
                elif op == 0x88:  # NEWTRUE
                    append(True)
                elif op == 0x47:  # BINFLOAT G
                    if pos + 8 > end:
                        self.short()
                    append(unpack_from(">d", data, pos)[0])
                    pos += 8
                elif op == 0x62:  # BUILD b
                    if len(stack) < 2:
                        raise pickle.UnpicklingError("stack underflow")
                    state = stack.pop()
                    reader.build(stack[-1], state)
                elif op == 0x63:  # GLOBAL c
                    mod, pos = self.line(pos)
                    name, pos = self.line(pos)
                    append(reader.find_class(mod.decode("utf-8", "replace"), name.decode("utf-8", "replace")))
                elif op == 0x93:  # STACK_GLOBAL
                    if len(stack) < 2:
                        raise pickle.UnpicklingError("stack underflow")
                    name = stack.pop()
                    mod = stack.pop()
                    if not isinstance(mod, str) or not isinstance(name, str):
                        raise pickle.UnpicklingError("STACK_GLOBAL needs two strings")
                    append(reader.find_class(mod, name))
                elif op == 0x81 or op == 0x92:  # NEWOBJ, NEWOBJ_EX
                    kwargs = None
                    if op == 0x92:
                        if len(stack) < 3:
                            raise pickle.UnpicklingError("stack underflow")
                        kwargs = stack.pop()
                        if not isinstance(kwargs, dict):
                            raise pickle.UnpicklingError("NEWOBJ_EX kwargs must be a dict")
                    if len(stack) < 2:
                        raise pickle.UnpicklingError("stack underflow")
                    args = stack.pop()
                    stack[-1] = call(stack[-1], args, kwargs, "NEWOBJ")
                elif op == 0x80:  # PROTO
                    if pos + 1 > end:
                        self.short()
                    if data[pos] > pickle.HIGHEST_PROTOCOL and data[pos] > 5:
                        raise ValueError("unsupported pickle protocol: %d" % data[pos])
                    pos += 1
                elif op == 0x95:  # FRAME: the bytes are all here already
                    if pos + 8 > end:
                        self.short()
                    pos += 8
                elif op == 0x2E:  # STOP .
                    if not stack:
                        raise pickle.UnpicklingError("STOP on an empty stack")
                    return stack[-1], pos
                elif op == 0x30:  # POP 0
                    if stack:
                        stack.pop()
                    elif metastack:
                        stack = metastack.pop()
                        append = stack.append
                    else:
                        raise pickle.UnpicklingError("stack underflow")
                elif op == 0x32:  # DUP 2
                    if not stack:
                        raise pickle.UnpicklingError("stack underflow")
                    append(stack[-1])
                elif op == 0x8A or op == 0x8B:  # LONG1, LONG4
                    width = 1 if op == 0x8A else 4
                    if pos + width > end:
                        self.short()
                    n = data[pos] if width == 1 else unpack_from("<i", data, pos)[0]
                    pos += width
                    if n < 0:
                        raise pickle.UnpicklingError("LONG4 with a negative length")
                    if pos + n > end:
                        self.short()
                    append(int.from_bytes(data[pos:pos + n], "little", signed=True))
                    pos += n
                elif op == 0x54 or op == 0x55 or op == 0x42 or op == 0x43 or op == 0x8E or op == 0x96:
                    # BINSTRING T, SHORT_BINSTRING U, BINBYTES B, SHORT_BINBYTES C, BINBYTES8, BYTEARRAY8
                    width = 1 if op in (0x55, 0x43) else 8 if op in (0x8E, 0x96) else 4
                    if pos + width > end:
                        self.short()
                    n = data[pos] if width == 1 else unpack_from("<i" if op == 0x54 else "<I" if width == 4 else "<Q",
                                                                  data, pos)[0]
                    pos += width
                    if n < 0:
                        raise pickle.UnpicklingError("negative byte count")
                    if pos + n > end:
                        self.short()
                    raw = bytes(data[pos:pos + n])
                    pos += n
                    append(raw.decode("latin-1") if op in (0x54, 0x55) else raw)
                elif op == 0x49 or op == 0x4C:  # INT I, LONG L (text)
                    line, pos = self.line(pos)
                    if op == 0x49 and line == b"00":
                        append(False)
                    elif op == 0x49 and line == b"01":
                        append(True)
                    else:
                        append(_text_int(line))
                elif op == 0x46:  # FLOAT F
                    line, pos = self.line(pos)
                    append(float(line))
                elif op == 0x53:  # STRING S
                    line, pos = self.line(pos)
                    line = line.strip()
                    if len(line) < 2 or line[:1] != line[-1:] or line[:1] not in (b"'", b'"'):
                        raise pickle.UnpicklingError("the STRING opcode argument must be quoted")
                    append(codecs.escape_decode(line[1:-1])[0].decode("latin-1"))
                elif op == 0x56:  # UNICODE V
                    line, pos = self.line(pos)
                    append(line.decode("raw-unicode-escape"))
                elif op == 0x70:  # PUT p
                    line, pos = self.line(pos)
                    idx = _text_int(line)
                    if not isinstance(idx, int) or not stack:
                        raise pickle.UnpicklingError("bad PUT")
                    if idx not in memo and len(memo) >= items:
                        self.too_many("the pickle's memo")
                    memo[idx] = stack[-1]
                elif op == 0x67:  # GET g
                    line, pos = self.line(pos)
                    idx = _text_int(line)
                    try:
                        append(memo[idx])
                    except (KeyError, TypeError):
                        raise pickle.UnpicklingError("memo key missing")
                elif op == 0x82 or op == 0x83 or op == 0x84:  # EXT1, EXT2, EXT4: the copyreg extension registry
                    width = {0x82: 1, 0x83: 2, 0x84: 4}[op]
                    if pos + width > end:
                        self.short()
                    code = int.from_bytes(data[pos:pos + width], "little")
                    pos += width
                    append(reader.standin("copyreg", "extension_%d" % code))
                elif op == 0x98:  # READONLY_BUFFER: nothing to do
                    pass
                elif op == 0x97:  # NEXT_BUFFER
                    raise pickle.UnpicklingError("out-of-band buffers are not in the file")
                else:
                    raise pickle.UnpicklingError("invalid opcode 0x%02x at byte %d" % (op, pos - 1))
        except (IndexError, struct.error):
            if pos >= end - 8:  # a read past the bytes there are
                self.short()
            raise pickle.UnpicklingError("stack underflow at byte %d" % (pos - 1))
        raise kg_common.LimitError("items", "the pickle's opcodes", reader.op_budget)
