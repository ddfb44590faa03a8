"""Tests of python/ckpt_args.py on real checkpoints written at test time by Debian's torch (/usr/bin/python3)."""
import codecs
import enum
import io
import json
import os
import pickle
import shutil
import struct
import subprocess
import sys
import tempfile
import textwrap
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
REAL_FIXTURES = os.path.join(ROOT, "test", "fixtures", "real")
PYDIR = os.path.join(ROOT, "python")
sys.path.insert(0, PYDIR)

import ckpt_args  # noqa: E402
import ckpt_formats  # noqa: E402
import kg_common  # noqa: E402
import kg_redact  # noqa: E402

from kg_test_env import TORCH_PY, needs_torch  # noqa: E402

# Written into the temp dir and run by /usr/bin/python3: every torch checkpoint the tests read.
GEN = r'''
import argparse, collections, dataclasses, datetime, enum, io, json, os, pathlib, pickle, sys, types
import torch
out = sys.argv[1]
big_mb = int(sys.argv[2])
sys.path.insert(0, os.path.join(out, "mods"))
import fake_transformers

torch.manual_seed(0)
lin = torch.nn.Linear(4, 3)

torch.save({"args": {"lr": 0.01, "batch_size": 32, "name": "run-a", "betas": (0.9, 0.999), "nan": float("nan"),
                     "inf": float("inf"), "tags": {"x"}, "none": None},
            "model": lin.state_dict(), "step": 600, "epoch": 2}, os.path.join(out, "dict.pt"))
torch.save({"args": {"lr": 0.02, "batch_size": 32, "name": "run-a", "betas": (0.9, 0.999), "nan": float("nan"),
                     "inf": float("inf"), "tags": {"x"}, "none": None},
            "model": lin.state_dict(), "step": 690, "epoch": 2}, os.path.join(out, "dict_lr2.pt"))

ns = argparse.Namespace(lr=3e-4, batch_size=16, data=pathlib.PosixPath("/data/train"), started=datetime.datetime(2024, 5, 1, 12, 30),
                        warmup=datetime.timedelta(minutes=5), optimizer="adamw")
opt = torch.optim.AdamW(lin.parameters(), lr=3e-4)
lin(torch.randn(2, 4)).sum().backward()
opt.step()
torch.save({"args": ns, "model": lin.state_dict(), "optimizer": opt.state_dict(), "global_step": 1200},
           os.path.join(out, "namespace.pt"))

nested = {"config": {"model": {"dtype": torch.bfloat16, "device": torch.device("cuda", 1), "cpu": torch.device("cpu"),
                               "size": torch.Size([2, 3]), "layers": [{"d": 64}, {"d": 128}]},
                     "train": {"lr": 1e-3, "schedule": collections.OrderedDict([("warmup", 100), ("decay", "cosine")])}},
          "param": torch.nn.Parameter(torch.zeros(5, 2)), "half": torch.zeros(7, dtype=torch.float16),
          "bf": torch.zeros(3, 3, dtype=torch.bfloat16), "ints": torch.arange(10), "mask": torch.ones(4, dtype=torch.bool)}
try:
    import numpy as np
    nested["config"]["np"] = {"f": np.float64(0.5), "i": np.int64(7), "dt": np.dtype("float32"), "arr": np.arange(3)}
except ImportError:
    pass
torch.save(nested, os.path.join(out, "nested.pt"))

torch.save({"epoch": 3, "global_step": 120, "pytorch-lightning_version": "2.1.0", "state_dict": lin.state_dict(),
            "hyper_parameters": {"lr": 5e-4, "hidden": 64, "model_name": "tiny"},
            "optimizer_states": [opt.state_dict()], "lr_schedulers": [], "callbacks": {}},
           os.path.join(out, "lightning.ckpt"))

torch.save({"args": ns, "model": lin.state_dict(), "step": 7}, os.path.join(out, "legacy.pt"),
           _use_new_zipfile_serialization=False)

class Evil(object):
    def __reduce__(self):
        return (os.system, ("touch " + os.path.join(out, "MARKER"),))

class Evil2(object):
    def __reduce__(self):
        return (eval, ("open(%r, 'w').close()" % os.path.join(out, "MARKER2"),))

torch.save({"args": {"lr": 0.1}, "payload": Evil(), "more": Evil2(), "step": 1}, os.path.join(out, "hostile.pt"))
torch.save({"args": {"lr": 0.1}, "payload": Evil()}, os.path.join(out, "hostile_legacy.pt"),
           _use_new_zipfile_serialization=False)

hf = os.path.join(out, "checkpoint-500")
os.makedirs(hf)
ta = fake_transformers.TrainingArguments(output_dir="/out", learning_rate=5e-5, num_train_epochs=3.0,
                                         evaluation_strategy=fake_transformers.IntervalStrategy.STEPS)
torch.save(ta, os.path.join(hf, "training_args.bin"))
with open(os.path.join(hf, "config.json"), "w") as f:
    json.dump({"model_type": "gpt2", "n_layer": 2, "torch_dtype": "float32"}, f)
with open(os.path.join(hf, "trainer_state.json"), "w") as f:
    json.dump({"global_step": 500, "epoch": 1.5, "log_history": [{"loss": 2.0, "step": 250}, {"loss": 1.5, "step": 500}]}, f)

# Secrets in args: HF's hub_token, a wandb key, a URL with a password holding an unencoded / and @.
hf6 = os.path.join(out, "checkpoint-600")
os.makedirs(hf6)
torch.save(fake_transformers.TrainingArguments(output_dir="/out", hub_token="hf_SecretHubToken0123456789abcdefgh"),
           os.path.join(hf6, "training_args.bin"))
for tag, key in (("a", "wandb-key-AAA111"), ("b", "wandb-key-BBB222")):
    sns = argparse.Namespace(lr=1e-4, wandb_api_key=key, hf_token="hf_tok_" + tag, pad_token="<pad>",
                             data_url="https://u:pa/ss@w0rd-%s@data.example/x" % tag)
    torch.save({"args": sns, "model": lin.state_dict(), "step": 1}, os.path.join(out, "secrets_%s.pt" % tag))

# torch.distributed.checkpoint's .metadata (torch 1.13 here has no DCP: same-named dataclasses, real pickle).
names = ["torch.distributed.checkpoint", "torch.distributed.checkpoint.metadata",
         "torch.distributed.checkpoint.filesystem"]
for n in names:
    sys.modules[n] = types.ModuleType(n)
def dc(modname, name, fields):
    cls = dataclasses.make_dataclass(name, fields)
    cls.__module__ = modname
    setattr(sys.modules[modname], name, cls)
    return cls
M = "torch.distributed.checkpoint.metadata"
ChunkStorageMetadata = dc(M, "ChunkStorageMetadata", ["offsets", "sizes"])
TensorProperties = dc(M, "TensorProperties", ["dtype", "layout", "requires_grad", "memory_format", "pin_memory"])
TensorStorageMetadata = dc(M, "TensorStorageMetadata", ["properties", "size", "chunks"])
BytesStorageMetadata = dc(M, "BytesStorageMetadata", [])
MetadataIndex = dataclasses.make_dataclass("MetadataIndex", ["fqn", "offset", "index"], frozen=True)
MetadataIndex.__module__ = M
sys.modules[M].MetadataIndex = MetadataIndex
Metadata = dc(M, "Metadata", ["state_dict_metadata", "planner_data", "storage_data"])
StorageInfo = dc("torch.distributed.checkpoint.filesystem", "_StorageInfo", ["relative_path", "offset", "length"])
dcp = os.path.join(out, "dcp")
os.makedirs(dcp)
blob = io.BytesIO()
torch.save({"lr": 0.125, "layers": 4}, blob)
blob = blob.getvalue()
blob2 = io.BytesIO()
torch.save(3, blob2)  # dcp.save flattens {"cfg": {"depth": 3}} into the item "cfg.depth"
blob2 = blob2.getvalue()
with open(os.path.join(dcp, "__0_0.distcp"), "wb") as f:
    f.write(b"\0" * 100)
    f.write(blob)
    f.write(blob2)
props = TensorProperties(torch.float32, torch.strided, False, torch.contiguous_format, False)
md = Metadata(
    state_dict_metadata={"model.weight": TensorStorageMetadata(props, torch.Size([3, 4]), [ChunkStorageMetadata(torch.Size([0, 0]), torch.Size([3, 4]))]),
                         "args": BytesStorageMetadata(), "cfg.depth": BytesStorageMetadata()},
    planner_data=None,
    storage_data={MetadataIndex("args", None, None): StorageInfo("__0_0.distcp", 100, len(blob)),
                  MetadataIndex("cfg.depth", None, None): StorageInfo("__0_0.distcp", 100 + len(blob), len(blob2)),
                  MetadataIndex("model.weight", torch.Size([0, 0]), None): StorageInfo("__0_0.distcp", 0, 48)})
with open(os.path.join(dcp, ".metadata"), "wb") as f:
    pickle.dump(md, f)

if big_mb:
    torch.save({"args": {"lr": 0.01}, "blob": torch.zeros(big_mb * 1024 * 1024 // 4)}, os.path.join(out, "big.pt"))
print("ok")
'''

FAKE_TRANSFORMERS = '''
import dataclasses, enum
class IntervalStrategy(enum.Enum):
    NO = "no"
    STEPS = "steps"
@dataclasses.dataclass
class TrainingArguments:
    output_dir: str
    learning_rate: float = 5e-5
    num_train_epochs: float = 3.0
    evaluation_strategy: IntervalStrategy = IntervalStrategy.NO
    hub_token: str = None
'''


def _u(text):
    """A BINUNICODE opcode for text."""
    raw = text.encode("utf-8")
    return pickle.BINUNICODE + struct.pack("<I", len(raw)) + raw


class _ByName(enum.Enum):
    """An enum that pickles its members by name (getattr(_ByName, "COSINE"))."""
    __reduce_ex__ = enum.pickle_by_enum_name
    LINEAR = 1
    COSINE = 3


def run_probe(*argv):
    """The probe as the extension's one-shot path runs it: a fresh interpreter, JSON on stdout."""
    return subprocess.run([sys.executable, os.path.join(PYDIR, "ckpt_args.py")] + list(argv),
                          capture_output=True, text=True, timeout=60)


def probe_json(*argv):
    r = run_probe(*argv)
    if r.returncode != 0:
        raise AssertionError("probe failed (%d): %s" % (r.returncode, r.stderr))
    return json.loads(r.stdout)


def safetensors_bytes(tensors, metadata=None):
    header, data, off = {}, b"", 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


@needs_torch
class TorchCheckpoints(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kg-ckpt-args-")
        os.makedirs(os.path.join(cls.tmp, "mods"))
        with open(os.path.join(cls.tmp, "mods", "fake_transformers.py"), "w") as f:
            f.write(FAKE_TRANSFORMERS)
        gen = os.path.join(cls.tmp, "gen.py")
        with open(gen, "w") as f:
            f.write(GEN)
        r = subprocess.run([TORCH_PY, gen, cls.tmp, "200"], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError("torch generator failed: " + r.stderr[-2000:])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def p(self, name):
        return os.path.join(self.tmp, name)

    def test_secrets_in_args_never_leave_the_host(self):
        hf = run_probe(self.p("checkpoint-600/training_args.bin"))
        self.assertNotIn("hf_SecretHubToken", hf.stdout)
        self.assertEqual(json.loads(hf.stdout)["args"]["hub_token"],
                         kg_redact.redact_secret("hf_SecretHubToken0123456789abcdefgh"))
        docs = {}
        for tag in ("a", "b"):
            r = run_probe(self.p("secrets_%s.pt" % tag))
            for clear in ("wandb-key-", "hf_tok_", "pa/ss", "w0rd"):
                self.assertNotIn(clear, r.stdout)
            docs[tag] = json.loads(r.stdout)["args"]
        a, b = docs["a"], docs["b"]
        self.assertRegex(a["wandb_api_key"], r"^<redacted sha256:[0-9a-f]{12}>$")
        self.assertEqual(a["data_url"], "https://u:%s@data.example/x" % kg_redact.redact_secret("pa/ss@w0rd-a"))
        self.assertEqual(a["pad_token"], "<pad>")
        self.assertEqual(a["lr"], 1e-4)
        # a different secret shows as different
        self.assertNotEqual(a["wandb_api_key"], b["wandb_api_key"])
        self.assertNotEqual(a["hf_token"], b["hf_token"])

    def test_dict_args(self):
        doc = probe_json(self.p("dict.pt"))
        self.assertEqual(doc["format"], "torch-zip")
        self.assertEqual(doc["key"], "args")
        self.assertEqual(doc["argsType"], "dict")
        a = doc["args"]
        self.assertEqual(a["lr"], 0.01)
        self.assertEqual(a["batch_size"], 32)
        self.assertEqual(a["betas"], [0.9, 0.999])
        self.assertEqual(a["tags"], ["x"])
        self.assertIsNone(a["none"])
        self.assertNotEqual(a["nan"], a["nan"])  # NaN survives as NaN
        self.assertEqual(a["inf"], float("inf"))
        self.assertIn("NaN", run_probe(self.p("dict.pt")).stdout)
        self.assertEqual(doc["step"], 600)
        self.assertEqual(doc["epoch"], 2)
        self.assertEqual(doc["tensors"], {"count": 2, "bytes": (12 + 3) * 4})
        self.assertEqual(doc["topLevelKeys"], ["args", "model", "step", "epoch"])
        self.assertEqual(doc["unsafeGlobals"], [])
        self.assertEqual(doc["bytes"], os.path.getsize(self.p("dict.pt")))

    def test_namespace_args(self):
        doc = probe_json(self.p("namespace.pt"))
        self.assertEqual(doc["argsType"], "argparse.Namespace")
        a = doc["args"]
        self.assertEqual(a["lr"], 3e-4)
        self.assertEqual(a["data"], "/data/train")
        self.assertEqual(a["started"], "2024-05-01T12:30:00")
        self.assertEqual(a["warmup"], "0:05:00")
        self.assertEqual(doc["step"], 1200)
        # model (2) + AdamW exp_avg/exp_avg_sq (4) + step tensors (torch >= 1.12 keeps step as a tensor)
        self.assertGreaterEqual(doc["tensors"]["count"], 6)

    def test_optimizer_key_and_param_groups(self):
        doc = probe_json(self.p("namespace.pt"), "--key", "optimizer")
        self.assertEqual(doc["key"], "optimizer")
        self.assertEqual(doc["args"]["param_groups"][0]["lr"], 3e-4)
        self.assertEqual(doc["args"]["state"]["0"]["exp_avg"], {"dtype": "float32", "shape": [3, 4], "bytes": 48})

    def test_nested_dtypes_devices_parameters(self):
        doc = probe_json(self.p("nested.pt"))
        self.assertEqual(doc["key"], "config")
        m = doc["args"]["model"]
        self.assertEqual(m["dtype"], "torch.bfloat16")
        self.assertEqual(m["device"], "cuda:1")
        self.assertEqual(m["cpu"], "cpu")
        self.assertEqual(m["size"], [2, 3])
        self.assertEqual(m["layers"], [{"d": 64}, {"d": 128}])
        self.assertEqual(doc["args"]["train"]["schedule"], {"warmup": 100, "decay": "cosine"})
        if "np" in doc["args"]:
            np_ = doc["args"]["np"]
            self.assertEqual(np_["f"], 0.5)
            self.assertEqual(np_["i"], 7)
            self.assertEqual(np_["dt"], "float32")
            self.assertEqual(np_["arr"]["shape"], [3])
            self.assertEqual(np_["arr"]["values"], [0, 1, 2])
        full = probe_json(self.p("nested.pt"), "--all")["args"]
        self.assertEqual(full["param"], {"dtype": "float32", "shape": [5, 2], "bytes": 40})
        self.assertEqual(full["half"], {"dtype": "float16", "shape": [7], "bytes": 14})
        self.assertEqual(full["bf"], {"dtype": "bfloat16", "shape": [3, 3], "bytes": 18})
        self.assertEqual(full["ints"], {"dtype": "int64", "shape": [10], "bytes": 80})
        self.assertEqual(full["mask"], {"dtype": "bool", "shape": [4], "bytes": 4})

    def test_lightning(self):
        doc = probe_json(self.p("lightning.ckpt"))
        self.assertEqual(doc["format"], "lightning")
        self.assertEqual(doc["key"], "hyper_parameters")
        self.assertEqual(doc["args"], {"lr": 5e-4, "hidden": 64, "model_name": "tiny"})
        self.assertEqual(doc["step"], 120)
        self.assertEqual(doc["epoch"], 3)

    def test_legacy_format(self):
        with open(self.p("legacy.pt"), "rb") as f:
            self.assertNotEqual(f.read(2), b"PK")  # really the non-zip format
        doc = probe_json(self.p("legacy.pt"))
        self.assertEqual(doc["format"], "torch-legacy")
        self.assertEqual(doc["args"]["lr"], 3e-4)
        self.assertEqual(doc["step"], 7)
        self.assertEqual(doc["tensors"]["count"], 2)
        # stopped before the storages: the storages are the rest of the file
        self.assertLess(doc["bytesRead"], 64 * 1024)

    def test_summary_without_args_key(self):
        doc = probe_json(self.p("big.pt"), "--key", "args")
        self.assertEqual(doc["args"], {"lr": 0.01})
        with tempfile.TemporaryDirectory() as d:
            # lightning.ckpt read with an order that misses: the summary keeps non-tensor values
            doc = probe_json(self.p("dict.pt"), "--key", "step", "--key", "epoch")
            self.assertEqual(doc["args"], {"step": 600, "epoch": 2})
            self.assertEqual(doc["key"], "step,epoch")
            del d
        doc = ckpt_args.main([self.p("lightning.ckpt"), "--key", "nothing"]) if False else None
        with self.assertRaises(kg_common.ProbeError):
            ckpt_args.main([self.p("lightning.ckpt"), "--key", "nothing"])

    def test_hostile_checkpoint_runs_nothing(self):
        marker = self.p("MARKER")
        marker2 = self.p("MARKER2")
        for m in (marker, marker2):
            if os.path.exists(m):
                os.unlink(m)
        doc = probe_json(self.p("hostile.pt"))
        ckpt_args.main([self.p("hostile.pt")])  # and in-process, as the resident helper runs it
        ckpt_args.main([self.p("hostile_legacy.pt")])
        self.assertFalse(os.path.exists(marker), "the probe ran code from the checkpoint")
        self.assertFalse(os.path.exists(marker2), "the probe ran code from the checkpoint")
        self.assertIn("posix.system", doc["unsafeGlobals"])
        self.assertIn("builtins.eval", doc["unsafeGlobals"])
        self.assertTrue(any("UNSAFE" in w and "posix.system" in w for w in doc["warnings"]))
        self.assertEqual(doc["args"], {"lr": 0.1})
        full = probe_json(self.p("hostile.pt"), "--all")["args"]
        self.assertEqual(full["payload"]["$class"], "posix.system")
        self.assertTrue(full["payload"]["$unsafe"])
        self.assertEqual(full["payload"]["$args"], ["touch " + marker])
        legacy = probe_json(self.p("hostile_legacy.pt"))
        self.assertIn("posix.system", legacy["unsafeGlobals"])
        self.assertFalse(os.path.exists(marker))
        # Proof that the file is really hostile: a plain pickle.load of its data.pkl creates the marker.
        with zipfile.ZipFile(self.p("hostile.pt")) as zf:
            name = [n for n in zf.namelist() if n.endswith("/data.pkl")][0]
            pickle.loads(zf.read(name))
        self.assertTrue(os.path.exists(marker))
        self.assertTrue(os.path.exists(marker2))
        os.unlink(marker)
        os.unlink(marker2)

    def test_hf_folder(self):
        doc = probe_json(self.p("checkpoint-500"))
        self.assertEqual(doc["format"], "hf-folder")
        self.assertEqual(doc["key"], "training_args")
        self.assertEqual(doc["argsType"], "fake_transformers.TrainingArguments")
        self.assertEqual(doc["args"]["learning_rate"], 5e-5)
        self.assertEqual(doc["args"]["output_dir"], "/out")
        # an enum member: by name where the writer pickled it with getattr(cls, name) (Debian 12's Python 3.11.2),
        # by value where it pickled Class(value) (3.11.7+, 3.12)
        self.assertIn(doc["args"]["evaluation_strategy"], (
            {"$enum": "fake_transformers.IntervalStrategy", "name": "STEPS"},
            {"$enum": "fake_transformers.IntervalStrategy", "value": "steps"}))
        self.assertEqual(doc["step"], 500)
        self.assertEqual(doc["epoch"], 1.5)
        self.assertEqual(doc["unsafeGlobals"], [])
        cfg = probe_json(self.p("checkpoint-500"), "--key", "config")
        self.assertEqual(cfg["args"]["model_type"], "gpt2")
        st = probe_json(self.p("checkpoint-500"), "--key", "trainer_state")["args"]
        self.assertEqual(st["log_history"], "<2 entries>")
        self.assertEqual(st["last_log"], {"loss": 1.5, "step": 500})
        # training_args.bin on its own: the stand-in's fields are the args
        one = probe_json(self.p("checkpoint-500/training_args.bin"))
        self.assertEqual(one["argsType"], "fake_transformers.TrainingArguments")
        self.assertEqual(one["args"]["num_train_epochs"], 3.0)

    def test_a_read_carries_the_stat_a_cache_keys_it_by(self):
        # what --stat answers, on a file and on a folder (whose size and mtime are of the files the reader reads):
        # a client caches the first read by it and stats the next time, and the two must agree
        for target in (self.p("dict.pt"), self.p("checkpoint-500")):
            st = probe_json(target, "--stat")
            self.assertEqual(probe_json(target)["stat"], {"bytes": st["bytes"], "mtime": st["mtime"]}, target)

    def test_dcp_metadata(self):
        for target in (self.p("dcp"), self.p("dcp/.metadata")):
            doc = probe_json(target)
            self.assertEqual(doc["format"], "dcp-metadata")
            self.assertEqual(doc["key"], "args")
            self.assertEqual(doc["args"], {"lr": 0.125, "layers": 4})
            self.assertEqual(doc["tensors"], {"count": 1, "bytes": 48})
            self.assertIn("model.weight", doc["topLevelKeys"])
        doc = probe_json(self.p("dcp"), "--key", "cfg")
        self.assertEqual(doc["args"], {"depth": 3})
        full = probe_json(self.p("dcp"), "--all")["args"]
        self.assertEqual(full["model.weight"], {"dtype": "float32", "shape": [3, 4], "bytes": 48})
        self.assertEqual(full["cfg"], {"depth": 3})

    def test_truncated_zip(self):
        with open(self.p("dict.pt"), "rb") as f:
            data = f.read()
        for cut in (len(data) // 2, len(data) - 10, 40):
            bad = self.p("trunc-%d.pt" % cut)
            with open(bad, "wb") as f:
                f.write(data[:cut])
            r = run_probe(bad)
            self.assertNotEqual(r.returncode, 0)
            self.assertEqual(r.stdout, "")
            lines = r.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertIn("truncated or corrupt", lines[0])
            self.assertNotIn("Traceback", r.stderr)

    def test_truncated_legacy(self):
        with open(self.p("legacy.pt"), "rb") as f:
            data = f.read()
        bad = self.p("trunc-legacy.pt")
        with open(bad, "wb") as f:
            f.write(data[:300])
        r = run_probe(bad)
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertRegex(r.stderr, "truncated|corrupt")

    def test_corrupt_pickle_in_zip(self):
        bad = self.p("corrupt-pkl.pt")
        with zipfile.ZipFile(self.p("dict.pt")) as src, zipfile.ZipFile(bad, "w") as dst:
            for info in src.infolist():
                data = src.read(info)
                if info.filename.endswith("/data.pkl"):
                    data = data[:len(data) // 2] + b"\xff" * 8
                dst.writestr(info, data)
        r = run_probe(bad)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("corrupt", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_memory_and_bytes_read_on_200mb(self):
        big = self.p("big.pt")
        self.assertGreater(os.path.getsize(big), 200 * 1024 * 1024)
        code = textwrap.dedent("""
            import json, resource, sys
            sys.path.insert(0, %r)
            import ckpt_args
            doc = ckpt_args.main([%r])
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            # Linux carries ru_maxrss over execve, so a child forked from this big test process would report the
            # parent's size: VmHWM is the peak of this process's own memory since exec.
            try:
                with open("/proc/self/status") as f:
                    rss = [int(l.split()[1]) for l in f if l.startswith("VmHWM:")][0]
            except (OSError, IndexError):
                pass
            print(json.dumps({"rss_kb": rss,
                              "bytesRead": doc["bytesRead"], "tensors": doc["tensors"], "args": doc["args"]}))
        """ % (PYDIR, big))
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["args"], {"lr": 0.01})
        self.assertEqual(out["tensors"]["bytes"], 200 * 1024 * 1024)
        self.assertLess(out["rss_kb"], 32 * 1024, "peak RSS %d KB" % out["rss_kb"])
        self.assertLess(out["bytesRead"], 64 * 1024)


# Newer torch features, each used only where this torch has it (the GPU box with torch 2.x runs them all).
GEN2 = r'''
import argparse, json, os, sys, torch
out = sys.argv[1]
made = {"torch": torch.__version__}
dev = "cuda" if torch.cuda.is_available() else "cpu"
sd = {"args": argparse.Namespace(lr=3e-4, bs=8), "w": torch.zeros(4, 4, device=dev, dtype=torch.bfloat16),
      "p": torch.nn.Parameter(torch.ones(3, device=dev)), "step": 7}
if hasattr(torch, "float8_e4m3fn"):
    sd["f8"] = torch.zeros(8, dtype=torch.float8_e4m3fn)
    made["f8"] = True
torch.save(sd, os.path.join(out, "newer.pt"))
made["device"] = dev
try:
    import torch.distributed.checkpoint as dcp
    if hasattr(dcp, "save"):
        dcp.save({"model": {"w": torch.zeros(3, 4)}, "args": {"lr": 0.125, "name": "x"}, "step": 9},
                 checkpoint_id=os.path.join(out, "realdcp"))
        made["dcp"] = True
except Exception as e:
    made["dcpError"] = repr(e)
try:
    torch.load(os.path.join(out, "newer.pt"))  # torch >= 2.6: weights_only by default, a Namespace is refused
    made["defaultRefusesNamespace"] = False
except Exception:
    made["defaultRefusesNamespace"] = True
print(json.dumps(made))
'''


@needs_torch
class NewerTorch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kg-ckpt-args-new-")
        gen = os.path.join(cls.tmp, "gen2.py")
        with open(gen, "w") as f:
            f.write(GEN2)
        r = subprocess.run([TORCH_PY, gen, cls.tmp], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError("torch generator failed: " + r.stderr[-2000:])
        cls.made = json.loads(r.stdout.strip().splitlines()[-1])
        sys.stderr.write("\n[NewerTorch] %s\n" % json.dumps(cls.made))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_device_tensors_parameters_float8(self):
        doc = probe_json(os.path.join(self.tmp, "newer.pt"))
        self.assertEqual(doc["args"], {"lr": 3e-4, "bs": 8})
        self.assertEqual(doc["argsType"], "argparse.Namespace")
        self.assertEqual(doc["step"], 7)
        full = probe_json(os.path.join(self.tmp, "newer.pt"), "--all")["args"]
        self.assertEqual(full["w"], {"dtype": "bfloat16", "shape": [4, 4], "bytes": 32})
        self.assertEqual(full["p"], {"dtype": "float32", "shape": [3], "bytes": 12})
        if self.made.get("f8"):
            self.assertEqual(full["f8"], {"dtype": "float8_e4m3fn", "shape": [8], "bytes": 8})
        self.assertEqual(doc["unsafeGlobals"], [])

    def test_real_dcp(self):
        if not self.made.get("dcp"):
            # Debian's torch 1.13 cannot write DCP: read the one torch 2.11 wrote on the GPU box instead (its ground
            # truth is checked whole in test_real_args.py).
            doc = probe_json(os.path.join(REAL_FIXTURES, "dcp", "run-dcp", "step_10"))
            self.assertEqual(doc["format"], "dcp-metadata")
            self.assertEqual(doc["step"], 10)
            self.assertEqual(doc["unsafeGlobals"], [])
            return
        doc = probe_json(os.path.join(self.tmp, "realdcp"))
        self.assertEqual(doc["format"], "dcp-metadata")
        self.assertEqual(doc["args"], {"lr": 0.125, "name": "x"})
        self.assertEqual(doc["step"], 9)
        self.assertEqual(doc["tensors"], {"count": 1, "bytes": 48})
        self.assertEqual(doc["unsafeGlobals"], [])


class NoTorchNeeded(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kg-ckpt-args-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def p(self, name):
        return os.path.join(self.tmp, name)

    def test_safetensors_header(self):
        args = {"lr": 0.001, "layers": 2}
        meta = {"format": "pt", "args": json.dumps(args), "step": "600"}
        path = self.p("model.safetensors")
        with open(path, "wb") as f:
            f.write(safetensors_bytes({"w": ("F32", [2, 3], b"\0" * 24), "b": ("BF16", [3], b"\0" * 6)}, meta))
        doc = probe_json(path)
        self.assertEqual(doc["format"], "safetensors")
        self.assertEqual(doc["key"], "args")
        self.assertEqual(doc["args"], args)
        self.assertEqual(doc["step"], 600)
        self.assertEqual(doc["tensors"], {"count": 2, "bytes": 30})
        full = probe_json(path, "--all")["args"]
        self.assertEqual(full["tensors"]["w"], {"dtype": "F32", "shape": [2, 3], "bytes": 24})
        self.assertEqual(full["__metadata__"]["format"], "pt")
        plain = self.p("nometa.safetensors")
        with open(plain, "wb") as f:
            f.write(safetensors_bytes({"w": ("F32", [1], b"\0" * 4)}))
        doc = probe_json(plain)
        self.assertEqual(doc["args"], {})
        self.assertTrue(any("__metadata__" in w for w in doc["warnings"]))
        # truncated: the header promises more data than the file has
        with open(path, "rb") as f:
            data = f.read()
        with open(self.p("trunc.safetensors"), "wb") as f:
            f.write(data[:-10])
        r = run_probe(self.p("trunc.safetensors"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("truncated", r.stderr)

    def test_not_a_checkpoint(self):
        cases = {"notes.txt": b"hello, this is not a checkpoint\n" * 10, "empty.pt": b"",
                 "random.bin": bytes(range(256)) * 4}
        for name, data in cases.items():
            with open(self.p(name), "wb") as f:
                f.write(data)
            r = run_probe(self.p(name))
            self.assertEqual(r.returncode, 2, name)
            self.assertEqual(r.stdout, "")
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn("not a checkpoint", r.stderr)
        with zipfile.ZipFile(self.p("other.zip"), "w") as zf:
            zf.writestr("readme.txt", "hi")
        r = run_probe(self.p("other.zip"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("without data.pkl", r.stderr)
        os.makedirs(self.p("emptydir"))
        r = run_probe(self.p("emptydir"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("not a checkpoint folder", r.stderr)

    def test_missing_and_unreadable(self):
        r = run_probe(self.p("nope.pt"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("no such file", r.stderr)
        with self.assertRaises(kg_common.ProbeError) as cm:
            ckpt_args.main([self.p("nope.pt")])
        self.assertEqual(cm.exception.code, "not-found")
        if os.geteuid() != 0:
            path = self.p("locked.pt")
            with open(path, "wb") as f:
                f.write(b"PK\x03\x04")
            os.chmod(path, 0)
            r = run_probe(path)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("permission denied", r.stderr)

    def test_usage_errors(self):
        for argv in ([], ["a", "b"], ["a", "--bogus"], ["a", "--key"]):
            with self.assertRaises(kg_common.ProbeError):
                ckpt_args.main(argv)

    def _zip_with_pickle(self, name, pkl):
        path = self.p(name)
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("x/data.pkl", pkl)
            zf.writestr("x/version", "3\n")
        return path

    def test_standins_and_reduce_on_them(self):
        # An unknown class rebuilt by NEWOBJ + BUILD, called by REDUCE, appended and set-itemed: nothing runs.
        P = pickle
        pkl = (P.PROTO + b"\x02" + P.EMPTY_DICT + P.MARK
               + P.BINUNICODE + struct.pack("<I", 4) + b"args"
               + P.GLOBAL + b"mylib.config\nConfig\n" + P.EMPTY_TUPLE + P.NEWOBJ
               + P.EMPTY_DICT + P.BINUNICODE + struct.pack("<I", 2) + b"lr" + P.BINFLOAT + struct.pack(">d", 0.5)
               + P.SETITEM + P.BUILD
               + P.BINUNICODE + struct.pack("<I", 5) + b"other"
               + P.GLOBAL + b"mylib\nfactory\n" + P.BININT1 + b"\x07" + P.TUPLE1 + P.REDUCE
               + P.EMPTY_TUPLE + P.REDUCE  # calling the stand-in instance itself
               + P.SETITEMS + P.STOP)
        path = self._zip_with_pickle("standin.pt", pkl)
        doc = ckpt_args.main([path])
        self.assertEqual(doc["argsType"], "mylib.config.Config")
        self.assertEqual(doc["args"], {"lr": 0.5})
        full = ckpt_args.main([path, "--all"])["args"]
        self.assertEqual(full["other"]["$class"], "mylib.factory(...)")
        self.assertEqual(doc["unsafeGlobals"], [])

    def test_bytes_written_as_codecs_encode(self):
        # Protocol 2 writes bytes as _codecs.encode(str, "latin1"); any other call of it gives empty bytes, never
        # None and never the codec run.
        class Encoded(object):
            def __init__(self, text, codec):
                self.args = (text, codec)

            def __reduce__(self):
                return (codecs.encode, self.args)

        pkl = pickle.dumps({"args": {"ok": Encoded("x\xe9", "latin1"), "odd": Encoded("x", "rot13")}}, 2)
        doc = ckpt_args.main([self._zip_with_pickle("codecs.pt", pkl)])
        self.assertEqual(doc["args"], {"ok": repr(b"x\xe9"), "odd": repr(b"")})
        self.assertEqual(doc["unsafeGlobals"], [])

    def _enum_args(self, member, name="e.pt", key=None):
        """The args of {"args": {"s": member}} (``member`` pickle bytes of one value), as the probe shows them."""
        P = pickle
        body = P.EMPTY_DICT + _u("s") + member + P.SETITEM
        if key is not None:
            body += key + _u("as key") + P.SETITEM
        pkl = P.PROTO + b"\x02" + P.EMPTY_DICT + _u("args") + body + P.SETITEM + P.STOP
        return ckpt_args.main([self._zip_with_pickle(name, pkl)])

    def test_enum_by_value_keeps_its_class(self):
        # Enum pickles a member as Class(value) (Python 3.11.7, 3.12: the real fixtures): was shown as the bare value
        P = pickle
        by_value = P.GLOBAL + b"mylib.sched\nSched\n" + P.BININT1 + b"\x03" + P.TUPLE1 + P.REDUCE
        doc = self._enum_args(by_value, key=P.GLOBAL + b"mylib.sched\nSched\n" + P.BININT1 + b"\x02" + P.TUPLE1
                              + P.REDUCE)
        self.assertEqual(doc["args"], {"s": {"$enum": "mylib.sched.Sched", "value": 3},
                                       "mylib.sched.Sched(2)": "as key"})
        self.assertEqual(doc["unsafeGlobals"], [])
        # a str subclass made by NEWOBJ is its value, not an enum
        newobj = P.GLOBAL + b"mylib\nName\n" + _u("gpt2") + P.TUPLE1 + P.NEWOBJ
        self.assertEqual(self._enum_args(newobj, "n.pt")["args"], {"s": "gpt2"})

    def test_enum_by_name_through_getattr_only_in_that_shape(self):
        # getattr(Class, "MEMBER"): early 3.11 (Debian 12's 3.11.2) and enum.pickle_by_enum_name
        P = pickle
        by_name = (P.GLOBAL + b"__builtin__\ngetattr\n" + P.GLOBAL + b"mylib\nSched\n" + _u("COSINE") + P.TUPLE2
                   + P.REDUCE)
        doc = self._enum_args(by_name, key=by_name.replace(b"COSINE", b"LINEAR"))
        self.assertEqual(doc["args"], {"s": {"$enum": "mylib.Sched", "name": "COSINE"}, "mylib.Sched.LINEAR": "as key"})
        self.assertEqual(doc["unsafeGlobals"], [])
        # the same with Python's own pickler, protocols 2 and 4 (STACK_GLOBAL, MEMOIZE)
        for proto in (2, 4):
            member = pickle.dumps(_ByName.COSINE, proto)
            doc = ckpt_args.main([self._zip_with_pickle("p%d.pt" % proto, member)])
            self.assertEqual(doc["args"], {"$enum": __name__ + "._ByName", "name": "COSINE"}, proto)
        # any other getattr is a way to reach code: listed, never looked up
        others = (
            P.GLOBAL + b"builtins\ngetattr\n" + P.GLOBAL + b"mylib\nSched\n" + _u("__class__") + P.TUPLE2,
            P.GLOBAL + b"builtins\ngetattr\n" + P.GLOBAL + b"builtins\nobject\n" + _u("mro") + P.TUPLE2,
            P.GLOBAL + b"builtins\ngetattr\n" + P.EMPTY_DICT + _u("update") + P.TUPLE2,
            P.GLOBAL + b"builtins\ngetattr\n" + P.GLOBAL + b"mylib\nSched\n" + P.BININT1 + b"\x01" + P.TUPLE2,
            P.GLOBAL + b"builtins\ngetattr\n" + P.GLOBAL + b"mylib\nSched\n" + _u("A") + P.NONE + P.TUPLE3,
        )
        for i, call in enumerate(others):
            doc = self._enum_args(call + P.REDUCE + _u("x") + P.TUPLE1 + P.REDUCE, "o%d.pt" % i)
            self.assertIn("builtins.getattr", doc["unsafeGlobals"], i)
            self.assertNotIn("$enum", json.dumps(doc["args"]), i)
        # a member of a dangerous class is not an enum
        doc = self._enum_args(by_name.replace(b"mylib\nSched", b"posix\nsystem"), "u.pt")
        self.assertEqual(doc["unsafeGlobals"], ["posix.system"])
        self.assertEqual(doc["args"]["s"], {"$class": "posix.system.COSINE", "$unsafe": True})

    def test_legacy_module_class_reference(self):
        # legacy torch.save: an nn.Module class is the persistent id ('module', cls, source file, source)
        P = pickle
        head = b"".join(pickle.dumps(v, 2) for v in (ckpt_formats.LEGACY_MAGIC, 1001, {}))
        for mod, want, unsafe in ((b"mylib.layers\nBlock\n", "<mylib.layers.Block>", []),
                                  (b"posix\nsystem\n", "<posix.system>", ["posix.system"]),
                                  (b"", "<torch.nn.Module>", [])):
            cls = (P.GLOBAL + mod) if mod else P.NONE
            pkl = (P.PROTO + b"\x02" + P.EMPTY_DICT + _u("args") + P.EMPTY_DICT + _u("cls") + P.MARK + _u("module")
                   + cls + _u("/x/layers.py") + _u("class Block: ...") + P.TUPLE + P.BINPERSID + P.SETITEM
                   + P.SETITEM + P.STOP)
            path = self.p("legacy.pt")
            with open(path, "wb") as f:
                f.write(head + pkl + pickle.dumps([], 2))
            doc = ckpt_args.main([path])
            self.assertEqual((doc["format"], doc["args"]), ("torch-legacy", {"cls": want}))
            self.assertEqual(doc["unsafeGlobals"], unsafe)

    def test_enum_references_are_bounded(self):
        # every member named makes a class: a file naming 10,001 of them stops at the class limit
        P = pickle
        member = (P.GLOBAL + b"__builtin__\ngetattr\n" + P.GLOBAL + b"mylib\nSched\n" + P.BINUNICODE + b"%s"
                  + P.TUPLE2 + P.REDUCE + P.POP)
        body = b"".join(member.replace(b"%s", struct.pack("<I", 6) + b"M%05d" % i) for i in range(10001))
        path = self._zip_with_pickle("many.pt", P.PROTO + b"\x02" + body + P.NONE + P.STOP)
        with self.assertRaises(kg_common.LimitError) as e:
            ckpt_args.main([path])
        self.assertIn("classes the pickle names", str(e.exception))

    def test_ordered_dict_metadata_and_class_tampering(self):
        P = pickle
        # OrderedDict with _metadata through BUILD (as every state_dict), then a BUILD that tries to set an attribute
        # on the argparse.Namespace stand-in class itself.
        pkl = (P.PROTO + b"\x02" + P.EMPTY_DICT + P.MARK
               + P.BINUNICODE + struct.pack("<I", 2) + b"sd"
               + P.GLOBAL + b"collections\nOrderedDict\n" + P.EMPTY_TUPLE + P.REDUCE
               + P.BINUNICODE + struct.pack("<I", 1) + b"a" + P.BININT1 + b"\x01" + P.SETITEM
               + P.EMPTY_DICT + P.BINUNICODE + struct.pack("<I", 9) + b"_metadata" + P.EMPTY_DICT + P.SETITEM
               + P.BUILD
               + P.SETITEMS + P.STOP)
        doc = ckpt_args.main([self._zip_with_pickle("od.pt", pkl), "--all"])
        self.assertEqual(doc["args"], {"sd": {"a": 1}})
        tamper = (P.PROTO + b"\x02" + P.GLOBAL + b"argparse\nNamespace\n"
                  + P.NONE + P.EMPTY_DICT + P.BINUNICODE + struct.pack("<I", 8) + b"__init__"
                  + P.GLOBAL + b"os\nsystem\n" + P.SETITEM + P.TUPLE2 + P.BUILD + P.STOP)
        doc = ckpt_args.main([self._zip_with_pickle("tamper.pt", tamper)])
        self.assertIn("os.system", doc["unsafeGlobals"])
        self.assertTrue(any("set the state of the class argparse.Namespace: ignored" in w for w in doc["warnings"]),
                        doc["warnings"])
        # the next file is read as before: the class was not changed
        ok = (P.PROTO + b"\x02" + P.GLOBAL + b"argparse\nNamespace\n" + P.EMPTY_TUPLE + P.NEWOBJ
              + P.EMPTY_DICT + P.BINUNICODE + struct.pack("<I", 1) + b"x" + P.BININT1 + b"\x02" + P.SETITEM
              + P.BUILD + P.STOP)
        doc = ckpt_args.main([self._zip_with_pickle("ok.pt", ok)])
        self.assertEqual(doc["args"], {"x": 2})

    def test_pickle_bomb_is_bounded(self):
        # 40 levels of a list holding the same list twice: 2**40 nodes if expanded naively.
        P = pickle
        pkl = P.PROTO + b"\x02" + P.EMPTY_LIST
        for _ in range(40):
            pkl += P.DUP + P.TUPLE2
        pkl += P.STOP
        doc = ckpt_args.main([self._zip_with_pickle("bomb.pt", pkl)])
        self.assertTrue(any("shown once" in w for w in doc["warnings"]), doc["warnings"])
        self.assertLess(len(kg_common.dumps(doc)), 20 * 1024 * 1024)

    def test_bytes_bomb_refused(self):
        P = pickle
        pkl = (P.PROTO + b"\x02" + P.GLOBAL + b"builtins\nbytearray\n" + P.LONG1 + b"\x05\x00\x00\x00\x00\x10"
               + P.TUPLE1 + P.REDUCE + P.STOP)
        doc = ckpt_args.main([self._zip_with_pickle("bytes.pt", pkl)])
        self.assertEqual(doc["args"], "b''")

    def test_output_is_json(self):
        P = pickle
        pkl = (P.PROTO + b"\x02" + P.EMPTY_DICT + P.BINUNICODE + struct.pack("<I", 4) + b"args" + P.EMPTY_DICT
               + P.BININT1 + b"\x01" + P.SHORT_BINBYTES + b"\x03abc" + P.SETITEM
               + P.BINUNICODE + struct.pack("<I", 1) + b"c" + P.GLOBAL + b"builtins\ncomplex\n"
               + P.BINFLOAT + struct.pack(">d", 1.0) + P.BINFLOAT + struct.pack(">d", 2.0) + P.TUPLE2 + P.REDUCE
               + P.SETITEM + P.SETITEM + P.STOP)
        doc = ckpt_args.main([self._zip_with_pickle("j.pt", pkl)])
        again = json.loads(kg_common.dumps(doc))
        self.assertEqual(again["args"], {"1": "b'abc'", "c": "(1+2j)"})


if __name__ == "__main__":
    unittest.main()
