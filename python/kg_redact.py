"""Redaction for Known Good probes (stdlib only, Python 3.8+): one set of rules for everything that leaves a host.

Env snapshots, checkpoint args, log lines and launch records are redacted here before they are printed.  The same
rules live in src/core/redact.ts; both are tested against test/fixtures/redaction/cases.json.  A secret becomes
``<redacted sha256:XXXXXXXXXXXX>`` (the first 12 hex digits of its sha256), so a rotated secret still shows as
changed.
"""
import hashlib
import re

# Words of a name (split at `_`, `-`, `.`, camelCase) that make its value a secret.
_SECRET_WORDS = frozenset((
    "token", "tokens", "key", "keys", "secret", "secrets", "password", "passwords", "passwd", "pass", "passphrase",
    "credential", "credentials", "auth", "authorization", "pat", "apikey", "privatekey", "accesskey", "secretkey",
    "sig", "signature", "bearer", "cookie", "cookies",
    # `--pwd`, `MYSQL_PWD`, `db_pwd`: but not the shell's own `PWD` (the working folder, _NOT_SECRET)
    "pwd"))
# Names that hold a secret word and are known to hold none: the shell's working folder.
_NOT_SECRET = frozenset(("PWD", "OLDPWD"))
# One-word compounds: `hftoken`, `dbpassword`, `clientsecret`.
_SECRET_SUFFIXES = ("token", "password", "passwd", "secret", "apikey")
# Harmless names that hold a secret word: a tokenizer's `pad_token`, a dataset's `text_key`.
_HARMLESS_BEFORE = {
    "token": frozenset(("pad", "eos", "bos", "unk", "sep", "cls", "mask", "special", "additional", "start", "end",
                        "stop", "image", "audio", "video", "eot", "sentinel",
                        # counts: HF's include_num_input_tokens_seen ("no"), max_tokens, prompt_tokens
                        "input", "inputs", "output", "outputs", "prompt", "completion", "num", "max", "min",
                        "total")),
    "key": frozenset(("text", "label", "labels", "input", "inputs", "image", "images", "audio", "video", "sort",
                      "metric", "monitor", "primary", "foreign", "column", "dataset", "data", "target", "output",
                      "outputs", "prompt", "response", "answer", "feature", "field", "cache", "chosen", "rejected",
                      "message", "messages", "reward", "sample", "group", "partition", "lookup", "hash", "dict")),
}
_HARMLESS_BEFORE["tokens"] = _HARMLESS_BEFORE["token"]
# `-p` in a command line given as words (argv): mysql's `-pSECRET`, sshpass's `-p SECRET`, 7z's and rar's `-pSECRET`.
# It is also ssh's, docker's and many servers' port flag, so a separate word that is a port or a port mapping
# (`-p 2222`, `-p 8080:80`, `-p 127.0.0.1:8888:8888`, `-p 8000-8010/udp`) is kept; anything else after `-p` is held
# (srun's partition, pytest's plugin: a hash costs little there, a password in clear costs much). Joined to the flag
# (`-pVALUE`) it is always held: mysql reads a password only that way, a port is rarely written so. Only argv: in free
# text `-p` is too common (`mkdir -p out`, prose) to be read as a password.
_PORTS = re.compile(r"[0-9][0-9.:\-]*(?:/(?:tcp|udp|sctp))?")
_HARMLESS_BEFORE["keys"] = _HARMLESS_BEFORE["key"]
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_REDACTED = re.compile(r"<redacted sha256:[0-9a-f]{12}>")
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://)([^\s\"'<>`]+)")
_URL_USER_PASSWORD = re.compile(r"([^:/@?#]*):(.*)@")
_PORT = re.compile(r"[0-9]*(?:[/?#]|$)")
_TOKEN_LIKE = re.compile(r"[A-Za-z0-9_\-]{20,}")
_KNOWN_TOKEN = re.compile(r"(?<![A-Za-z0-9_\-])(?:hf_[A-Za-z0-9]{30,}|gh[pousr]_[A-Za-z0-9]{30,}"
                          r"|github_pat_[A-Za-z0-9_]{30,}|glpat-[A-Za-z0-9_\-]{20,}|xox[abprs]-[A-Za-z0-9\-]{10,}"
                          r"|sk-[A-Za-z0-9_\-]{20,}"
                          r"|AKIA[0-9A-Z]{16})(?![A-Za-z0-9_\-])")
# `name=value` (also `?token=…&sig=…` in a URL, `--hub_token=…`, `HF_TOKEN=… cmd`, `?to%6Ben=…`: a name may be
# percent-encoded).  A value ends at `,` or `;` (`a=1,b=2`), but a secret one runs on to _ASSIGN_SECRET_END.
_ASSIGN = re.compile(r"(?<![A-Za-z0-9_.%\-])(-{0,2}(?:[A-Za-z_]|%[0-9A-Fa-f]{2})(?:[A-Za-z0-9_.\-]|%[0-9A-Fa-f]{2})*)"
                     r"=([^\s\"'<>`&#,;]+)")
_ASSIGN_SECRET_END = re.compile(r"[\s\"'<>`&#]|$")
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")
# `--hub_token VALUE` on a command line
_FLAG = re.compile(r"(?<![A-Za-z0-9_.\-])(--?[A-Za-z_][A-Za-z0-9_.\-]*)([ \t]+)([^\s\"'<>`\-][^\s\"'<>`]*)")
# `"hub_token": "…"` / `'api_key': '…'` in printed JSON or a printed dict
_QUOTED = re.compile(r"([\"'])([A-Za-z_][A-Za-z0-9_.\-]*)\1(\s*[:=]\s*)([\"'])([^\"'<>]+)\4")
# `Authorization: Bearer …` in a printed header or a curl command line
_AUTH_HEADER = re.compile(r"((?:proxy-)?authorization\s*:\s*(?:(?:bearer|basic|token)\s+|(?!(?:bearer|basic|token)\b)))"
                          r"([^\s\"'<>]+)", re.I)
_PLAIN_VALUE = re.compile(r"(?:[+\-]?[0-9][0-9_.eE+\-]*|true|false|none|null|True|False|None)$")
_secret_names = {}
# Whatever any rule above could redact holds one of these (lower-cased): a cheap test that lets a metrics line skip
# the walk (substring tests: a regex of alternatives is three times slower here).
_MAYBE = ("=", "token", "key", "pass", "pwd", "secret", "auth", "credential", "pat", "sig", "bearer", "cookie", "://",
          "hf_", "gh", "xox", "sk-", "akia", "-p")
_MAYBE_BYTES = tuple(w.encode("ascii") for w in _MAYBE)


def might_hold_secret(data):
    """False when nothing in `data` (str or bytes, e.g. a log line before it is parsed) could be redacted."""
    low = data.lower()
    for w in _MAYBE_BYTES if isinstance(data, bytes) else _MAYBE:
        if w in low:
            return True
    return False


def redact_secret(value):
    """The `<redacted sha256:…>` stand-in of a secret value."""
    digest = hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()
    return "<redacted sha256:%s>" % digest[:12]


def is_secret_name(name):
    """Whether a variable, argument or query parameter named `name` holds a secret (by whole words of the name)."""
    hit = _secret_names.get(name)
    if hit is None:
        hit = False
        if name in _NOT_SECRET:
            return False
        words = [w.lower() for w in _WORD.findall(name)]
        for i, w in enumerate(words):
            if w in _SECRET_WORDS:
                if i > 0 and words[i - 1] in _HARMLESS_BEFORE.get(w, ()):
                    continue
                hit = True
                break
            if len(w) > 6 and w.endswith(_SECRET_SUFFIXES):
                hit = True
                break
        if len(_secret_names) < 10000:
            _secret_names[name] = hit
    return hit


def _url(m):
    scheme, rest = m.group(1), m.group(2)
    up = _URL_USER_PASSWORD.match(rest)
    if up and up.group(2) and not _PORT.match(up.group(2)):
        # user:password@host; an unencoded `/` or `@` in the password runs it to the word's last `@`
        user = up.group(1)
        if _TOKEN_LIKE.fullmatch(user) and re.search(r"[0-9]", user):
            user = redact_secret(user)
        return scheme + user + ":" + redact_secret(up.group(2)) + rest[up.end() - 1:]
    end = len(rest)
    for c in "/?#":
        i = rest.find(c)
        if 0 <= i < end:
            end = i
    at = rest.rfind("@", 0, end)
    if at <= 0 or rest[:at] == "git":
        return m.group(0)
    return scheme + redact_secret(rest[:at]) + rest[at:]


def _assign_name(name):
    name = name.lstrip("-")
    return _PERCENT.sub(lambda m: chr(int(m.group(1), 16)), name) if "%" in name else name


def _redact_assignments(text):
    """_ASSIGN's matches with a secret name redacted, each value whole: `token=ab;cd,ef` hides all of `ab;cd,ef`
    (re.sub cannot widen a match, so the matches are walked by hand)."""
    out, pos = [], 0
    for m in _ASSIGN.finditer(text):
        if m.start() < pos or not is_secret_name(_assign_name(m.group(1))) or _REDACTED.match(m.group(2)):
            continue
        stop = _ASSIGN_SECRET_END.search(text, m.start(2))
        end = stop.start() if stop else len(text)
        out.append(text[pos:m.start(2)])
        out.append(redact_secret(text[m.start(2):end]))
        pos = end
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


def _flag(m):
    if not is_secret_name(m.group(1).lstrip("-")) or _PLAIN_VALUE.match(m.group(3)):
        return m.group(0)
    return m.group(1) + m.group(2) + redact_secret(m.group(3))


def _quoted(m):
    if not is_secret_name(m.group(2)):
        return m.group(0)
    return m.group(1) + m.group(2) + m.group(1) + m.group(3) + m.group(4) + redact_secret(m.group(5)) + m.group(4)


def redact_text(text):
    """`text` with the secrets inside it redacted: URL userinfo, `name=value` and `--name value` with a secret
    name, quoted `"name": "value"`, and tokens of well-known shapes (hf_…, ghp_…, github_pat_…)."""
    if not isinstance(text, str) or len(text) < 4:
        return text
    if "://" in text:
        text = _URL.sub(_url, text)
    if "=" in text:
        text = _redact_assignments(text)
    if "-" in text:
        text = _FLAG.sub(_flag, text)
    if "\"" in text or "'" in text:
        text = _QUOTED.sub(_quoted, text)
    if ":" in text:
        text = _AUTH_HEADER.sub(lambda m: m.group(1) + redact_secret(m.group(2)), text)
    if "_" in text or "-" in text or "AKIA" in text:
        text = _KNOWN_TOKEN.sub(lambda m: redact_secret(m.group(0)), text)
    return text


def _secret_after(flag, value):
    """Whether `value`, the argv word after the flag word `flag`, is a secret: a secret-named flag's (``--token X``),
    or ``-p``'s unless it is a port (_PORTS)."""
    if not value or not flag.startswith("-") or "=" in flag:
        return False
    if flag == "-p":
        return not value.startswith("-") and not _PORTS.fullmatch(value)
    return is_secret_name(flag.lstrip("-"))


def redact_argv(argv):
    """A command line with secrets hidden: a secret flag's next word (``--token X``, ``-p X``: _secret_after), the
    password joined to ``-p`` (``-pX``) and secrets inside words."""
    out = []
    for i, a in enumerate(argv):
        if i > 0 and _secret_after(argv[i - 1], a):
            out.append(_secret_string(a))
        elif a.startswith("-p") and len(a) > 2 and not _REDACTED.fullmatch(a[2:]):
            out.append("-p" + redact_secret(a[2:]))
        else:
            out.append(redact_text(a))
    return out


def redact_value(name, value):
    """A string value of a variable or argument named `name`: all of it if the name is secret, else its text."""
    if not isinstance(value, str):
        return value
    if name is not None and value and is_secret_name(name) and not _REDACTED.fullmatch(value):
        return redact_secret(value)
    return redact_text(value)


_SCALARS = (int, float, bool, type(None))


# A dict under a key whose last word is one of these holds secrets throughout (`credentials: {pw: …}`, `secrets:
# {db: …}`).  Not `key`/`token`: a tensor's `attn.key` or a tokenizer's `added_tokens` are dicts of plain data.
_HOLDER_WORDS = frozenset(("secret", "secrets", "credential", "credentials", "password", "passwords", "passwd",
                           "passphrase", "auth", "authorization", "cookie", "cookies", "privatekey", "accesskey",
                           "secretkey", "apikey"))
# `--hub_token` as a list item of its own: the next item is its value
_FLAG_ITEM = re.compile(r"--?[A-Za-z_][A-Za-z0-9_.\-]*$")


def _holds_secrets(name):
    words = _WORD.findall(name)
    return bool(words) and words[-1].lower() in _HOLDER_WORDS and is_secret_name(name)


def _secret_string(value):
    return redact_secret(value) if value and not _REDACTED.fullmatch(value) else value


def redact_tree(obj, name=None, by_name=True, secret=False):
    """A copy of a JSON-like tree with secrets redacted: string values by their key's name (unless by_name is False:
    a document whose keys are not variable names, like a package list) and by their text; every string under a key
    that holds secrets (``secret``); in a list, the item after a `--secret_flag` item.
    Lists of numbers (a metrics series) are returned as they are, without a walk in Python."""
    if isinstance(obj, str):
        if secret:
            return _secret_string(obj)
        return redact_value(name, obj) if by_name else redact_text(obj)
    if isinstance(obj, dict):
        return {k: redact_tree(v, k if isinstance(k, str) else None, by_name,
                               secret or (by_name and isinstance(k, str) and _holds_secrets(k)))
                for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        if all(type(x) in _SCALARS for x in obj):
            return obj
        out = [redact_tree(x, name, by_name, secret) for x in obj]
        for i in range(len(obj) - 1):
            flag, value = obj[i], obj[i + 1]
            if (isinstance(flag, str) and isinstance(value, str) and _FLAG_ITEM.match(flag)
                    and not value.startswith("-") and not _PLAIN_VALUE.match(value)
                    and _secret_after(flag, value)):
                out[i + 1] = _secret_string(value)
        return out
    return obj
