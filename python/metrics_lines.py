"""metrics_reduce, one line at a time: the numbers of a JSON line (json.loads, the reference) and line shapes.

Real logs repeat a handful of line shapes (same keys in the same order, only the numbers change), so each shape seen
is turned into a regular expression that captures its numbers (metrics_pass matches a whole block with them).  A
shape is only trusted after it reproduced ``json.loads`` on the line it came from.
"""
import json
import re
import sys

import kg_common

# Lines with more numbers than this are read by json.loads: a regex of thousands of groups compiles for seconds.
MAX_SHAPE_KEYS = 512

_NUM = rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
# The same numbers, matched twice as fast where the regex engine has possessive quantifiers (Python 3.11+): the
# token after a number is always a fixed character, so giving up backtracking changes no match.
_NUM_FAST = rb"-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?+(?:[eE][-+]?[0-9]++)?+" if sys.version_info >= (3, 11) else _NUM
# A string, in memory a small multiple of its length: a repeated group pushes onto the regex engine's stack once per
# repetition (a 30 MB string took 5 GB with ``(?:[^"\\]|\\.)*``), so characters are taken in runs, possessively where
# the engine can (3.11+); before 3.11 the stack grows once per escape only.
_STR = (rb'"(?:[^"\\\n]++|\\.)*+"' if sys.version_info >= (3, 11) else rb'"[^"\\\n]*(?:\\.[^"\\\n]*)*"')
_TOKEN = re.compile(
    rb"([ \t]*)(?:(" + _STR + rb")|(" + _NUM + rb")|(true|false|null)|([{}\[\]:,])|(NaN|-?Infinity))"
)



# ---------------------------------------------------------------------------------------------------------------
# Lines one by one (the reference; every line of no known shape goes here)


class _Skip(Exception):
    """A line skipped for a limit; ``what`` is the count it goes to (tooManyKeys, tooDeep)."""

    def __init__(self, what):
        Exception.__init__(self, what)
        self.what = what


def _flatten(d, prefix, out, counts, budget=None):
    """Numeric leaves of d into out (``a.b`` keys); budget = [keys left, depth left] bounds what one line may cost."""
    if budget is None:
        budget = [kg_common.LIMITS["keys"], kg_common.LIMITS["depth"]]
    budget[0] -= len(d)
    if budget[0] < 0:
        raise _Skip("tooManyKeys")
    for k, v in d.items():
        t = type(v)
        if t is float:
            if v - v == 0.0:
                out[prefix + k] = v
            else:
                counts["nonFinite"] += 1
        elif t is int:
            try:
                out[prefix + k] = float(v)
            except OverflowError:
                counts["nonFinite"] += 1
        elif t is dict:
            budget[1] -= 1
            if budget[1] < 0:
                raise _Skip("tooDeep")
            _flatten(v, prefix + k + ".", out, counts, budget)
            budget[1] += 1


def numbers_of(line, counts):
    """The flattened numeric values of one line, or None (counted as malformed / not numeric)."""
    try:
        doc = json.loads(line)
    except ValueError:
        counts["malformed"] += 1
        return None
    except RecursionError:  # nested deeper than the interpreter's recursion limit: that line only
        counts["tooDeep"] += 1
        return None
    if type(doc) is not dict:
        counts["malformed"] += 1
        return None
    out = {}
    try:
        _flatten(doc, "", out, counts)
    except _Skip as e:
        counts[e.what] += 1
        return None
    if not out:
        counts["nonNumeric"] += 1
        return None
    return out


def new_counts():
    # Lines skipped, by why: tooLong (over LIMITS["line"], never held whole), tooManyKeys (over LIMITS["keys"]),
    # tooDeep (nested over LIMITS["depth"]); never fatal for the rest of the file.
    return {"malformed": 0, "nonNumeric": 0, "nonFinite": 0, "noX": 0, "tooLong": 0, "tooManyKeys": 0, "tooDeep": 0}


# ---------------------------------------------------------------------------------------------------------------
# Line shapes


class Shape(object):
    """A line shape: the regex source that matches lines like it, and the key path of each captured number."""

    def __init__(self, pattern, paths):
        self.pattern = pattern
        self.paths = paths  # one per group, in order
        self.first = 0  # index of its first group in the combined pattern


def shape_of(line):
    """The shape of one line, or None when it has none worth keeping (no numbers, NaN, arrays of objects...)."""
    pos = 0
    parts = []
    paths = []
    # Stack of [kind, path prefix, expecting a key, current key, inside an array].
    stack = []
    in_array = False
    first = True
    tokens = 0
    while True:
        m = _TOKEN.match(line, pos)
        if m is None:
            break
        tokens += 1
        if tokens > 16 * MAX_SHAPE_KEYS:
            return None  # a line this big is read by json.loads
        ws, s, num, lit, punct, nonfinite = m.groups()
        if nonfinite is not None:
            return None
        if first:
            if punct != b"{" or ws:
                return None
            first = False
        elif not stack:
            return None  # something after the closing brace
        if ws:
            parts.append(re.escape(ws))
        pos = m.end()
        top = stack[-1] if stack else None
        if punct is not None:
            parts.append(re.escape(punct))
            if punct == b"{":
                prefix = ""
                if top is not None:
                    prefix = top[1] + (top[3] + "." if top[0] == "obj" else "")
                stack.append(["obj", prefix, True, None, in_array])
            elif punct == b"[":
                stack.append(["arr", "", False, None, in_array])
                in_array = True
            elif punct in (b"}", b"]"):
                if top is None:
                    return None
                stack.pop()
                in_array = top[4]
                if not stack:
                    break
            elif punct == b",":
                if top is not None and top[0] == "obj":
                    top[2] = True
            continue
        if s is not None:
            if top is not None and top[0] == "obj" and top[2]:
                try:
                    key = json.loads(s)
                except ValueError:
                    return None
                top[3] = key
                top[2] = False
                parts.append(re.escape(s))
            else:
                parts.append(_STR)
            continue
        if num is not None:
            if top is not None and top[0] == "obj" and not in_array:
                parts.append(b"(" + _NUM_FAST + b")")
                paths.append(top[1] + top[3])
            else:
                parts.append(_NUM)
            continue
        parts.append(rb"(?:true|false|null)")
    if stack or first:
        return None
    if line[pos:] not in (b"", b"\r"):
        return None
    parts.append(rb"\r?")
    if not paths or len(paths) > MAX_SHAPE_KEYS:
        return None
    return Shape(b"".join(parts), paths)


def verified_shape(line):
    """A shape only counts when its captures give exactly what json.loads gives on the line it came from."""
    shape = shape_of(line)
    if shape is None:
        return None
    try:
        m = re.compile(shape.pattern).fullmatch(line)
    except (re.error, OverflowError, RecursionError):
        return None
    if m is None:
        return None
    counts = new_counts()
    want = numbers_of(line, counts)
    if want is None or counts["nonFinite"]:
        return None
    got = {}
    for path, g in zip(shape.paths, m.groups()):
        got[path] = float(g)
    if got != want:
        return None  # duplicate keys and the like: leave such lines to json.loads
    return shape
