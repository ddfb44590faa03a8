"""Read the args of a training checkpoint without torch, without the weights and without running code from the file.

Usage: python3 ckpt_args.py PATH [--key KEY]... [--all]
       python3 ckpt_args.py PATH --stat    (only {path, bytes, mtime, dir}: what a cache of results is keyed by;
                                            a read's result carries the same bytes and mtime as "stat")

stdlib only.  Formats: torch zip checkpoints (only the one ``*/data.pkl`` member is read, never the tensor storages),
the legacy non-zip torch format (stops before the storages), Lightning ``.ckpt``, a Hugging Face checkpoint folder
(``training_args.bin``, ``config.json``, ``trainer_state.json``), a ``.safetensors`` header and a
torch.distributed.checkpoint ``.metadata`` file (or its folder).

Pickles are decoded by a restricted unpickler: the globals it knows become plain values, tensors become
``{dtype, shape, bytes}`` from their storage metadata, and every other global becomes an inert, named stand-in that
records how the pickle tried to build it.  Nothing named by the file is ever imported or called; dangerous globals
(``os.system``, ``subprocess.*``, ``builtins.eval``...) are listed under ``unsafeGlobals``.

Enum members are ``{"$enum": "<module>.<Class>", "value": V}`` or ``{"$enum": "<module>.<Class>", "name": "MEMBER"}``.
Python's Enum pickles a member by value, ``Class(V)`` (``__reduce_ex__`` returns ``(Class, (V,))``: Python 3.11.7 and
3.12, which wrote test/fixtures/real, the form torch.save and Lightning write there): the member's name is not in the
file, and only importing the class and calling it (running the file's code) would find it, so it is not shown.  Early
3.11 releases (Debian 12's 3.11.2) and enums with ``enum.pickle_by_enum_name`` pickle it by name instead,
``getattr(Class, "MEMBER")``: the name is shown, and the value is not in the file.  ``builtins.getattr`` is allowed in
that shape only (a class the pickle named, a string); any other getattr is listed as unsafe.  The value form is any
class called (REDUCE) with one plain value and nothing else: a few other classes pickle that way too
(``ipaddress.IPv4Address(n)``) and show the same.  A class itself (``layer_cls=nn.Linear``) is ``"<module.Class>"``,
in the legacy format too, where torch.save writes an nn.Module class as ``('module', cls, source file, source)``.

Folders: a Hugging Face checkpoint (``training_args.bin``, ``config.json``, ``trainer_state.json``); a peft adapter
(``adapter_config.json``: its JSON is the args, key ``adapter_config``, and ``baseModel`` the
``base_model_name_or_path`` it names; in an HF folder that holds one too, the args stay ``training_args``); an
accelerate ``save_state`` folder (``custom_checkpoint_N.pkl``: the state_dict() of the first object registered for
checkpointing is the args, format ``accelerate``; ``N`` is accelerate's index of the object, never a step); a DCP
folder.

Hostile files are bounded by ``kg_common.LIMITS`` (never limits of its own): the pickle is decoded by a stack machine
of this module (never ``pickle.Unpickler``) whose memo is a dict of at most LIMITS["items"] entries, whose opcodes and
copied items are budgeted (2 x LIMITS["items"] each), and whose MARK nesting stops at LIMITS["depth"]; a zip member is
inflated streaming up to LIMITS["read"] bytes whatever its header says; a FIFO or a device is refused unread. BUILD,
SETITEM and APPEND act only on objects the read itself made, so one file cannot change how the next is read. A limit
hit is a LimitError naming it.

What is shown stays small: a value the pickle shares (its memo) is shown in full where it first appears and as
``{"$ref": "<JSONPath of that place>"}`` after (``$`` the shown args, ``.key`` or ``["key"]``, ``[index]``; a cycle
refers to its ancestor), strings past TEXT_SHOWN characters are cut with their length said, integers of more than
4,300 digits are ``{"$bigint": {bits, digits, negative}}``, and the whole rendering stops at MAX_NODES values or
RENDER_BUDGET characters (with a warning).

Result: ``{format, path, bytes, key, args, argsType, step, epoch, tensors: {count, bytes}, topLevelKeys,
unsafeGlobals, warnings, bytesRead, baseModel}`` (``baseModel`` null unless a peft adapter names one).

The modules it travels with: kg_pickle (the restricted unpickler), kg_pickle_objects (what a pickle decodes to: names,
tensors, stand-ins, safe constructors), kg_pickle_reader (one decoding: globals, budget), ckpt_convert (decoded
objects to JSON, which of them are the args), ckpt_formats (torch zip, legacy, safetensors, accelerate, DCP).  This
file holds the command line, the choice of reader for a file and the folders (Hugging Face, peft, accelerate).
"""
import os
import stat

import kg_common
import kg_redact
from ckpt_convert import ARG_KEYS, _Result, _args_type, _fill
from ckpt_formats import (
    _ACCELERATE_CUSTOM, _fill_dcp, _fill_safetensors, _is_dcp, _is_tar, _looks_like_safetensors, _open, _read_legacy,
    _read_safetensors_header, _read_torch_zip,
)
from kg_pickle_reader import _Reader


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
            elif _ACCELERATE_CUSTOM.match(os.path.basename(path)):
                doc["format"] = "accelerate"
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
        elif size >= 512 and _is_tar(f):
            raise kg_common.ProbeError("torch tar checkpoint (written by torch < 0.4) is not supported: %s" % path,
                                       "not-a-checkpoint")
        else:
            if size == 0:
                raise kg_common.ProbeError("empty file, not a checkpoint: %s" % path, "not-a-checkpoint")
            raise kg_common.ProbeError("not a checkpoint (not a torch zip, legacy torch, pickle or safetensors "
                                       "file): %s" % path, "not-a-checkpoint")
        _fill(doc, reader, top, keys, want_all, whole=doc["format"] == "accelerate")
    finally:
        doc["bytesRead"] += f.count
        f.close()


# --- Hugging Face checkpoint folders ---------------------------------------------------------------------------------


def _read_json(path, doc):
    try:
        with kg_common.open_regular(path) as f:
            data = kg_common.read_bounded(f, None, os.path.basename(path))
            doc["bytesRead"] += len(data)
        return kg_common.loads_bounded(data.decode("utf-8"), os.path.basename(path))
    except kg_common.LimitError as e:
        doc["warnings"].append("could not read %s: %s" % (os.path.basename(path), e))
        return None
    except (kg_common.ProbeError, OSError, ValueError, UnicodeDecodeError) as e:
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
    custom = sorted((int(m.group(1)), n) for n, m in ((n, _ACCELERATE_CUSTOM.match(n)) for n in names) if m)
    if not hf and custom and "adapter_config.json" not in names:
        size = os.stat(os.path.join(path, custom[0][1])).st_size
        _read_file(os.path.join(path, custom[0][1]), size, keys, want_all, res)
        doc["path"], doc["bytes"] = path, size
        if len(custom) > 1:
            doc["warnings"].append("%d objects registered for checkpointing: the args of %s are shown (%s: read "
                                   "that file for its own)" % (len(custom), custom[0][1],
                                                               ", ".join(n for _, n in custom[1:4])))
        return
    if not hf and "adapter_config.json" not in names:
        raise kg_common.ProbeError("not a checkpoint folder (no training_args.bin, config.json, trainer_state.json, "
                                   "adapter_config.json, custom_checkpoint_0.pkl or .metadata): %s" % path,
                                   "not-a-checkpoint")
    doc["format"] = "hf-folder" if hf else "peft"
    top = {}
    reader = _Reader()
    preferred = ("training_args",) + ARG_KEYS
    if "adapter_config.json" in names:
        # a peft adapter: its config is the args (an HF Trainer folder that also holds one keeps its training_args)
        adapter = _read_json(os.path.join(path, "adapter_config.json"), doc)
        top["adapter_config"] = adapter
        if not hf:
            preferred = ("adapter_config",)
        if isinstance(adapter, dict) and isinstance(adapter.get("base_model_name_or_path"), str):
            doc["baseModel"] = kg_redact.redact_text(adapter["base_model_name_or_path"])
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
    _fill(doc, reader, top, keys, want_all, preferred=preferred)
    doc["step"], doc["epoch"] = step, epoch
    if doc["key"] == "training_args":
        doc["argsType"] = _args_type(top.get("training_args"))
    elif doc["key"] == "adapter_config" and isinstance(top["adapter_config"], dict):
        kind = top["adapter_config"].get("peft_type")
        doc["argsType"] = "peft %s adapter" % kind if isinstance(kind, str) and len(kind) < 100 else "peft adapter"


# --------------------------------------------------------------------------------------------------------------------


def _stat_only(path, st):
    """Size and newest mtime, read cheaply: a folder's is the newest of itself and the files the reader reads."""
    mtime, size = st.st_mtime, st.st_size
    if stat.S_ISDIR(st.st_mode):
        size = 0
        for n in ("training_args.bin", "config.json", "trainer_state.json", ".metadata", "adapter_config.json",
                  "custom_checkpoint_0.pkl"):
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
    st = kg_common.stat_or_fail(path)
    if want_stat:
        return _stat_only(path, st)
    # What --stat would answer, taken before the read: a client can cache the result by it without asking again.
    key = _stat_only(path, st)
    res = _Result(path, st.st_size)
    if stat.S_ISDIR(st.st_mode):
        res.doc["bytes"] = 0
        _read_folder(path, keys, want_all, res)
    else:
        _read_file(path, st.st_size, keys, want_all, res)
    res.doc["mtime"] = st.st_mtime
    res.doc["stat"] = {"bytes": key["bytes"], "mtime": key["mtime"]}
    # Secrets in the args (HF's hub_token, a wandb_api_key, a URL with a password) never leave the host.
    res.doc["args"] = kg_redact.redact_tree(res.doc["args"])
    return res.doc


if __name__ == "__main__":
    kg_common.run(main)
