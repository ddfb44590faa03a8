"""What a code change really is: Python compared token by token (``tokenize``), the changed hunks and their functions.

stdlib only, 3.8+.  A module of what_changed.py: ``compare(old, new, name)`` says whether two versions of a file
differ only in comments, docstrings and whitespace (``cosmetic``), and otherwise gives the changed hunks (bounded) with
the ``def``/``class`` each sits in, so a report can show what changed instead of "a commit touched train.py".
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
_SKIP = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING,
         tokenize.ENDMARKER)


def code_tokens(text):
    """The tokens that run: no comments, no docstrings, no layout.  None when the text is not Python."""
    out = []
    prev = tokenize.NEWLINE
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    for i, t in enumerate(toks):
        if t.type in _SKIP:
            if t.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                prev = t.type
            continue
        if t.type == token.STRING and prev in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            # a string that is a statement of its own (a docstring) is documentation, not code
            nxt = next((u for u in toks[i + 1:] if u.type not in (tokenize.COMMENT, tokenize.NL)), None)
            if nxt is None or nxt.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                prev = token.STRING
                continue
        out.append((t.type, t.string))
        prev = t.type
    return out


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


def compare(old, new, name):
    """``{"file", "cosmetic", "python", "hunks": [{"function", "old", "new", "lines"}], "functions"}``."""
    out = {"file": name, "python": name.endswith(".py"), "cosmetic": False, "hunks": [], "functions": []}
    if out["python"]:
        a, b = code_tokens(old), code_tokens(new)
        if a is not None and b is not None and a == b:
            out["cosmetic"] = True
    ol, nl = old.splitlines(), new.splitlines()
    funcs = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ol, nl, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        fn = _enclosing(nl, j1) if j2 > j1 or nl else None
        if fn is None and ol:
            fn = _enclosing(ol, i1)
        if fn and fn not in funcs:
            funcs.append(fn)
        if len(out["hunks"]) < MAX_HUNKS:
            out["hunks"].append({
                "function": fn,
                "lines": [i1 + 1, j1 + 1],
                "old": [s[:MAX_LINE] for s in ol[i1:i2][:MAX_HUNK_LINES]],
                "new": [s[:MAX_LINE] for s in nl[j1:j2][:MAX_HUNK_LINES]],
            })
    out["functions"] = funcs
    return out
