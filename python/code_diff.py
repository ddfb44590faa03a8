"""What a code change really is: Python compared token by token (``tokenize``), the changed hunks and their functions.

stdlib only, 3.8+.  A module of what_changed.py: ``compare(old, new, name)`` says whether two versions of a file
differ only in comments, docstrings and whitespace (``cosmetic``), and otherwise gives the changed hunks (bounded) with
the ``def``/``class`` each sits in, so a report can show what changed instead of "a commit touched train.py".  Each
hunk says whether it alone is cosmetic and which lines of code (comments and docstrings taken out) it removed and
added: what the report classifies (precision, compile, a host sync …), never a word of a comment.
"""
import difflib
import io
import re
import token
import tokenize

MAX_HUNKS = 8
MAX_HUNK_LINES = 12
MAX_LINE = 200
_DEF = re.compile(r"^\s*(async\s+def|def|class)\s+([A-Za-z_][A-Za-z0-9_]*)")
# Layout that does not run: comments, blank lines and line breaks inside brackets. NEWLINE, INDENT and DEDENT stay:
# they are the statements and the blocks (a line moved out of a loop changes only its indentation).
_SKIP = (tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER)


def _lines(text):
    """The lines as tokenize numbers them (split at \\n only, so a form feed inside a line does not shift rows)."""
    return [line.rstrip("\r\n") for line in io.StringIO(text)] if text else []


def _analyse(text):
    """``(tokens, code)``: the tokens that run, each with its row (1-based), and each line with its comment and any
    docstring cut out.  None when the text is not Python (tokenize fails)."""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    lines = _lines(text)
    cuts = {}  # row -> [(start col, end col)] to cut out of that line

    def cut(start, end):
        for row in range(start[0], end[0] + 1):
            a = start[1] if row == start[0] else 0
            b = end[1] if row == end[0] else None
            cuts.setdefault(row, []).append((a, b))

    out = []
    prev = tokenize.NEWLINE
    skip_newline = False
    for i, t in enumerate(toks):
        if t.type in _SKIP:
            if t.type == tokenize.COMMENT:
                cut(t.start, t.end)
            continue
        if skip_newline and t.type == tokenize.NEWLINE:
            skip_newline = False
            prev = t.type
            continue
        skip_newline = False
        if t.type == token.STRING and prev in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            # a string that is a statement of its own (a docstring) is documentation, not code
            nxt = next((u for u in toks[i + 1:] if u.type not in (tokenize.COMMENT, tokenize.NL)), None)
            if nxt is None or nxt.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                cut(t.start, t.end)
                prev = token.STRING
                skip_newline = True
                continue
        # an indent's width is layout (2 spaces or 4); that there is one is the block
        out.append((t.start[0], (t.type, "" if t.type == tokenize.INDENT else t.string)))
        prev = t.type
    code = list(lines)
    for row, spans in cuts.items():
        if 1 <= row <= len(code):
            line = code[row - 1]
            for a, b in sorted(spans, key=lambda s: s[0], reverse=True):
                line = line[:a] + ("" if b is None else line[b:])
            code[row - 1] = line
    return out, code


def code_tokens(text):
    """The tokens that run: no comments, no docstrings, no blank lines.  None when the text is not Python."""
    a = _analyse(text)
    return None if a is None else [t for _, t in a[0]]


def _enclosing(lines, index):
    """The def/class line index sits in: the nearest one above it with less indentation."""
    if index >= len(lines):
        index = len(lines) - 1
    indent = None
    for j in range(index, -1, -1):
        line = lines[j]
        if not line.strip():
            continue
        ind = len(line) - len(line.lstrip())
        if indent is None:
            indent = ind
        m = _DEF.match(line)
        if m and (ind < indent or j == index):
            return m.group(2)
    return None


def _changed_code(a, b):
    """The lines of code only one side has (blank ones left out; a line indented anew is in another block, so it
    counts), stripped: what a hunk removed and added."""
    ca = [s.rstrip() for s in a if s.strip()]
    cb = [s.rstrip() for s in b if s.strip()]
    removed = [s.strip()[:MAX_LINE] for s in ca if s not in cb][:MAX_HUNK_LINES]
    added = [s.strip()[:MAX_LINE] for s in cb if s not in ca][:MAX_HUNK_LINES]
    return removed, added


def compare(old, new, name):
    """``{"file", "cosmetic", "python", "hunks": [{"function", "old", "new", "lines", "cosmetic", "removed",
    "added"}], "hunkCount", "functions"}``: ``old``/``new`` the lines as written, ``removed``/``added`` the lines of
    code that differ (comments and docstrings out), ``cosmetic`` a hunk that changes no token that runs."""
    out = {"file": name, "python": name.endswith(".py"), "cosmetic": False, "hunks": [], "hunkCount": 0,
           "functions": []}
    pa = pb = None
    if out["python"]:
        pa, pb = _analyse(old), _analyse(new)
        if pa is not None and pb is not None and [t for _, t in pa[0]] == [t for _, t in pb[0]]:
            out["cosmetic"] = True
    ol, nl = _lines(old), _lines(new)
    funcs = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ol, nl, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        out["hunkCount"] += 1
        fn = _enclosing(nl, j1) if j2 > j1 or nl else None
        if fn is None and ol:
            fn = _enclosing(ol, i1)
        if fn and fn not in funcs:
            funcs.append(fn)
        if len(out["hunks"]) >= MAX_HUNKS:
            continue
        if pa is not None and pb is not None:
            ta = [t for row, t in pa[0] if i1 < row <= i2]
            tb = [t for row, t in pb[0] if j1 < row <= j2]
            cosmetic = ta == tb
            removed, added = _changed_code(pa[1][i1:i2], pb[1][j1:j2])
        else:
            cosmetic = False
            removed, added = _changed_code(ol[i1:i2], nl[j1:j2])
        out["hunks"].append({
            "function": fn,
            "lines": [i1 + 1, j1 + 1],
            "old": [s[:MAX_LINE] for s in ol[i1:i2][:MAX_HUNK_LINES]],
            "new": [s[:MAX_LINE] for s in nl[j1:j2][:MAX_HUNK_LINES]],
            "cosmetic": cosmetic,
            "removed": removed,
            "added": added,
        })
    out["functions"] = funcs
    return out
