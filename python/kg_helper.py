"""Known Good resident helper (stdlib only, Python 3.8+).

Started once per host connection as ``python3 -u -c <loader>``; the loader reads
this source as the first stdin line (JSON-encoded string) and executes it.  Then
it answers JSON-line requests on the same channel, each on its own thread so a
slow request does not hold up the others:

  -> {"id": 1, "op": "probe", "name": "list_runs", "hash": "...", "src": "...", "args": [...]}
  <- {"id": 1, "ok": true, "result": {...}, "python": {...}}
  <- {"id": 1, "ok": false, "error": {"message": "...", "code": "..."}}

``src`` is sent only the first time a probe (by hash) is used; afterwards the
client sends the hash alone, and an unknown hash is answered with code
"need-source".  Probe modules are executed with their ``__name__`` set to
``kg_probe_<name>`` so their ``if __name__ == "__main__"`` block does not run.
"""
import json
import sys
import threading
import types

_out = sys.stdout
# Probes must not write to the protocol channel by accident.
sys.stdout = sys.stderr
_lock = threading.Lock()
_modules = {}
_modules_lock = threading.Lock()


def _send(doc):
    kg_common = sys.modules["kg_common"]
    line = kg_common.dumps(doc)
    with _lock:
        _out.write(line + "\n")
        _out.flush()


def _load(name, digest, src):
    with _modules_lock:
        mod = _modules.get(digest)
        if mod is None:
            if src is None:
                return None
            mod = types.ModuleType("kg_probe_" + name)
            mod.__file__ = name + ".py"
            exec(compile(src, name + ".py", "exec"), mod.__dict__)
            _modules[digest] = mod
        return mod


def _handle(req):
    kg_common = sys.modules["kg_common"]
    rid = req.get("id")
    try:
        op = req.get("op")
        if op == "ping":
            _send({"id": rid, "ok": True, "result": "pong", "python": kg_common.interpreter()})
            return
        if op != "probe":
            raise kg_common.ProbeError("unknown op %r" % (op,), "bad-request")
        mod = _load(req["name"], req["hash"], req.get("src"))
        if mod is None:
            _send({"id": rid, "ok": False, "error": {"message": "source needed", "code": "need-source"}})
            return
        result = mod.main(list(req.get("args") or []))
        doc = kg_common.envelope_ok(result)
    except kg_common.ProbeError as e:
        doc = kg_common.envelope_error(str(e), e.code)
    except SystemExit as e:
        doc = kg_common.envelope_error("probe exited (%s)" % (e.code,), "exit")
    except BaseException as e:
        doc = kg_common.envelope_error("%s: %s" % (type(e).__name__, e), "internal")
    doc["id"] = rid
    _send(doc)


def serve(nonce):
    _send({"ready": nonce, "python": sys.modules["kg_common"].interpreter()})
    stdin = sys.stdin
    while True:
        line = stdin.readline()
        if not line:
            return
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
        except ValueError:
            continue
        t = threading.Thread(target=_handle, args=(req,))
        t.daemon = True
        t.start()
