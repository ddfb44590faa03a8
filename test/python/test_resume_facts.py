"""Tests of python/resume_facts.py on real torch checkpoints written at test time by Debian's torch (CPU only).

A checkpoint whose optimizer state says ``cuda:0`` is written without a GPU through torch's own serialization
registry: ``torch.serialization.register_package(priority, tagger, deserializer)`` puts a tagger ahead of torch's cpu
one (priority 10), and ``torch.save`` asks the taggers, in priority order, for each storage's location
(``location_tag``) and writes the first answer into the pickle's persistent id.  Ours answers ``cuda:0`` for the
storages of AdamW's ``step`` tensors and nothing for the others, so the file is a genuine torch checkpoint whose
pickle says ``cuda:0`` exactly where a resume with ``map_location="cuda"`` puts it.  Checked with Debian's torch
1.13.1: the file loads with ``map_location="cpu"``, and without it torch refuses it on this CPU-only machine because
it names a CUDA device (on a GPU box, KG_TORCH_PYTHON, it loads the counters onto cuda:0); both are asserted below, so
a torch that tagged differently would fail the test, not pass it.
"""
import os
import pickle
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PY_DIR = os.path.join(HERE, "..", "..", "python")
sys.path.insert(0, PY_DIR)

import kg_common  # noqa: E402
import resume_facts  # noqa: E402

from kg_test_env import TORCH_PY, needs_torch  # noqa: E402

WRITER = os.path.join(HERE, "resume_ckpt_writer.py")

# Loads the tagged file as a resume does, to show it is a real checkpoint that names a CUDA device.
LOAD = r'''
import sys, torch
ck = torch.load(sys.argv[1], map_location="cpu")
print(type(ck["optimizer"]["state"][0]["step"]).__name__)
try:
    print("loaded onto " + str(torch.load(sys.argv[1])["optimizer"]["state"][0]["step"].device))
except RuntimeError as e:
    print("refused: " + str(e).splitlines()[0])
'''

N_PARAMS = 4  # two Linear layers: weight and bias each


def _where(entry):
    return [(w["location"], w["dtype"], w["count"]) for w in entry["tensors"]]


@needs_torch
class RealCheckpoints(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kg-resume-facts-")
        r = subprocess.run([TORCH_PY, WRITER, cls.tmp], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError("writing checkpoints with %s failed: %s" % (TORCH_PY, r.stderr[-3000:]))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def read(self, name):
        return resume_facts.main([os.path.join(self.tmp, name)])

    def test_adamw_after_a_step_keeps_its_step_counters_on_the_cpu(self):
        doc = self.read("adamw.pt")
        self.assertEqual(doc["format"], "torch-zip")
        self.assertEqual(doc["step"], 500)
        [opt] = doc["optimizers"]
        self.assertEqual(opt["source"], "optimizer")
        self.assertEqual(opt["paramsWithState"], N_PARAMS)
        self.assertEqual(sorted(opt["state"]), ["exp_avg", "exp_avg_sq", "step"])
        self.assertEqual(opt["state"]["step"]["kind"], "tensor")
        self.assertEqual(_where(opt["state"]["step"]), [("cpu", "float32", N_PARAMS)])
        self.assertEqual(_where(opt["state"]["exp_avg"]), [("cpu", "float32", N_PARAMS)])
        [group] = opt["paramGroups"]
        self.assertEqual(group["params"], N_PARAMS)
        self.assertEqual(group["values"]["lr"], 3e-4)
        self.assertEqual(group["values"]["weight_decay"], 0.1)
        self.assertEqual(group["values"]["betas"], [0.9, 0.999])
        self.assertIs(group["values"]["capturable"], False)
        self.assertIn("foreach", group["values"])
        self.assertEqual(doc["weights"], [{"source": "model", "tensors": N_PARAMS, "bytes": (32 + 8 + 16 + 2) * 4,
                                           "where": [{"location": "cpu", "dtype": "float32", "count": N_PARAMS}]}])
        self.assertEqual(doc["scheduler"], ["scheduler"])
        self.assertEqual(doc["rng"], ["rng_state"])
        self.assertEqual(doc["loader"], ["sampler"])
        self.assertEqual(doc["unsafeGlobals"], [])
        # nothing of the tensors' bytes was read: the pickle is a small part of the file
        self.assertLess(doc["bytesRead"], doc["bytes"])
        kg_common.dumps(doc)

    def test_step_counters_tagged_cuda_are_read_as_cuda(self):
        r = subprocess.run([TORCH_PY, "-c", LOAD, os.path.join(self.tmp, "adamw-step-cuda.pt")],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        loaded, plain = r.stdout.strip().splitlines()
        self.assertEqual(loaded, "Tensor")
        # without map_location torch restores where the pickle says: refused without a GPU, onto it with one
        self.assertTrue((plain.startswith("refused: ") and "CUDA" in plain) or plain == "loaded onto cuda:0", plain)
        for name, fmt in (("adamw-step-cuda.pt", "torch-zip"), ("adamw-step-cuda-legacy.pt", "torch-legacy")):
            doc = self.read(name)
            self.assertEqual(doc["format"], fmt)
            [opt] = doc["optimizers"]
            self.assertEqual(_where(opt["state"]["step"]), [("cuda:0", "float32", N_PARAMS)], name)
            # only the step counters moved: the moments and the weights are where they were
            self.assertEqual(_where(opt["state"]["exp_avg"]), [("cpu", "float32", N_PARAMS)], name)
            self.assertEqual(_where(opt["state"]["exp_avg_sq"]), [("cpu", "float32", N_PARAMS)], name)
            self.assertEqual(doc["weights"][0]["where"], [{"location": "cpu", "dtype": "float32", "count": N_PARAMS}])

    def test_a_gpu_run_resumed_onto_the_gpu_differs_in_its_step_counters_only(self):
        before, after = self.read("gpu-before.pt"), self.read("gpu-after.pt")
        gpu = [("cuda:0", "float32", N_PARAMS)]
        self.assertEqual(_where(before["optimizers"][0]["state"]["step"]), [("cpu", "float32", N_PARAMS)])
        self.assertEqual(_where(after["optimizers"][0]["state"]["step"]), gpu)
        for doc in (before, after):
            self.assertEqual(_where(doc["optimizers"][0]["state"]["exp_avg"]), gpu)
            self.assertEqual(doc["weights"][0]["where"], [{"location": "cuda:0", "dtype": "float32", "count": 4}])
        # the RNG state torch.get_rng_state() returns stays a CPU tensor in both, and is not taken for weights
        self.assertEqual(before["rng"], ["rng_state"])
        self.assertEqual(len(before["weights"]), 1)

    def test_legacy_format_reads_the_same_facts(self):
        zipped, legacy = self.read("adamw.pt"), self.read("adamw-legacy.pt")
        self.assertEqual(legacy["format"], "torch-legacy")
        for key in ("optimizers", "weights", "scheduler", "rng", "loader", "step"):
            self.assertEqual(legacy[key], zipped[key], key)

    def test_sgd_momentum_buffers(self):
        [opt] = self.read("sgd.pt")["optimizers"]
        self.assertEqual(list(opt["state"]), ["momentum_buffer"])
        self.assertEqual(_where(opt["state"]["momentum_buffer"]), [("cpu", "float32", N_PARAMS)])
        self.assertEqual(opt["paramGroups"][0]["values"]["momentum"], 0.9)

    def test_lightning_optimizer_states_list(self):
        doc = self.read("lightning.ckpt")
        self.assertEqual(doc["format"], "lightning")
        self.assertEqual(doc["step"], 700)
        [opt] = doc["optimizers"]
        self.assertEqual(opt["source"], "optimizer_states[0]")
        self.assertEqual(_where(opt["state"]["step"]), [("cpu", "float32", N_PARAMS)])
        self.assertEqual(doc["weights"][0]["source"], "state_dict")
        # the scheduler's state, not hyper_parameters.sched = "cosine"
        self.assertEqual(doc["scheduler"], ["lr_schedulers"])

    def test_step_as_a_number(self):
        [opt] = self.read("adamw-number-step.pt")["optimizers"]
        step = opt["state"]["step"]
        self.assertEqual((step["kind"], step["numbers"], step["tensors"]), ("number", N_PARAMS, []))

    def test_hugging_face_checkpoint_folder(self):
        doc = self.read("checkpoint-500")
        self.assertEqual(doc["format"], "hf-folder")
        self.assertEqual(doc["step"], 500)
        [opt] = doc["optimizers"]
        self.assertEqual(opt["source"], "optimizer.pt")
        self.assertEqual(_where(opt["state"]["step"]), [("cpu", "float32", N_PARAMS)])
        self.assertEqual([(w["source"], w["tensors"]) for w in doc["weights"]], [("pytorch_model.bin", N_PARAMS)])
        self.assertEqual(doc["scheduler"], ["scheduler.pt"])
        self.assertEqual(doc["rng"], ["rng_state.pth"])

    def test_accelerate_folder(self):
        doc = self.read("step_500")
        self.assertEqual(doc["format"], "accelerate")
        [opt] = doc["optimizers"]
        self.assertEqual(opt["source"], "optimizer.bin")
        self.assertEqual(opt["paramsWithState"], N_PARAMS)
        self.assertEqual(doc["rng"], ["random_states_0.pkl"])


class NotCheckpoints(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kg-resume-facts-")
        self.saved_limits = dict(kg_common.LIMITS)

    def tearDown(self):
        kg_common.LIMITS.clear()
        kg_common.LIMITS.update(self.saved_limits)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def p(self, name):
        return os.path.join(self.tmp, name)

    def zp(self, name, pkl):
        with zipfile.ZipFile(self.p(name), "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("x/data.pkl", pkl)
            zf.writestr("x/version", "3\n")
        return self.p(name)

    def code_of(self, path):
        with self.assertRaises(kg_common.ProbeError) as cm:
            resume_facts.main([path])
        return cm.exception.code, str(cm.exception)

    def test_a_text_file_an_empty_file_and_a_plain_folder_are_not_checkpoints(self):
        with open(self.p("notes.txt"), "w") as f:
            f.write("step 500: loss 2.1\n")
        open(self.p("empty.pt"), "w").close()
        os.mkdir(self.p("logs"))
        with open(self.p("logs/train.log"), "w") as f:
            f.write("x\n")
        for name in ("notes.txt", "empty.pt", "logs"):
            code, message = self.code_of(self.p(name))
            self.assertEqual(code, "not-a-checkpoint", message)
            self.assertIn(self.p(name), message)
        self.assertEqual(self.code_of(self.p("missing.pt"))[0], "not-found")

    def test_a_zip_that_is_not_a_torch_file(self):
        with zipfile.ZipFile(self.p("data.zip"), "w") as zf:
            zf.writestr("readme.txt", "hello")
        self.assertEqual(self.code_of(self.p("data.zip"))[0], "not-a-checkpoint")

    def test_a_pickle_inflating_past_the_read_limit_is_a_named_limit(self):
        kg_common.LIMITS["read"] = 1 << 20
        n = 4 << 20
        pkl = pickle.PROTO + b"\x04" + b"\x8d" + struct.pack("<Q", n) + b"a" * n + pickle.STOP
        code, message = self.code_of(self.zp("inflate.pt", pkl))
        self.assertEqual(code, "limit-read", message)
        self.assertIn("read limit", message)

    def test_an_optimizer_state_of_too_many_params_is_a_named_limit(self):
        # {"optimizer": {"state": {0: S, 1: S, ...}, "param_groups": []}} with one shared per-param dict S: the
        # pickle's own work ends it at the item limit, before any walk
        kg_common.LIMITS["items"] = 20000
        pkl = bytearray(pickle.PROTO + b"\x04" + pickle.EMPTY_DICT + pickle.SHORT_BINUNICODE + b"\x09optimizer"
                        + pickle.EMPTY_DICT + pickle.SHORT_BINUNICODE + b"\x05state" + pickle.EMPTY_DICT
                        + pickle.MARK)
        pkl += pickle.BININT1 + b"\x00" + pickle.EMPTY_DICT + pickle.BINPUT + b"\x01"
        for i in range(1, 50000):
            pkl += pickle.BININT + struct.pack("<i", i) + pickle.BINGET + b"\x01"
        pkl += pickle.SETITEMS + pickle.SHORT_BINUNICODE + b"\x0cparam_groups" + pickle.EMPTY_LIST + pickle.SETITEM
        pkl += pickle.SETITEM + pickle.STOP
        code, message = self.code_of(self.zp("params.pt", bytes(pkl)))
        self.assertEqual(code, "limit-items", message)
        self.assertIn("item-count limit", message)

    def test_a_shared_state_within_the_limits_is_counted_and_bounded(self):
        # the same per-param dict under 5,000 param ids, each holding 3 keys: read, counted, and the walk of the
        # decoded objects stops at the item limit with a warning rather than running on
        kg_common.LIMITS["items"] = 12000
        state = {"step": 1.0, "exp_avg": None, "exp_avg_sq": None}
        obj = {"optimizer": {"state": dict((i, state) for i in range(5000)), "param_groups": [{"params": [0]}]}}
        path = self.zp("shared.pt", pickle.dumps(obj, protocol=2))
        doc = resume_facts.main([path])
        [opt] = doc["optimizers"]
        self.assertLess(opt["paramsWithState"], 5000)
        self.assertTrue(any("item-count limit" in w for w in doc["warnings"]), doc["warnings"])

    def test_a_dangerous_global_is_listed_and_never_called(self):
        marker = self.p("PWNED")

        class Evil(object):
            def __reduce__(self):
                return (os.system, ("touch " + marker,))

        obj = {"optimizer": {"state": {}, "param_groups": [{"params": [], "lr": 0.1}]}, "evil": Evil()}
        doc = resume_facts.main([self.zp("evil.pt", pickle.dumps(obj, protocol=2))])
        self.assertFalse(os.path.exists(marker))
        self.assertTrue(any(g.endswith(".system") for g in doc["unsafeGlobals"]), doc["unsafeGlobals"])
        self.assertEqual(doc["optimizers"][0]["paramGroups"][0]["values"], {"lr": 0.1})


if __name__ == "__main__":
    unittest.main()
