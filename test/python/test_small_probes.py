"""The small probes, run by hand as a person would: one JSON document on stdout, progress on stderr."""
import json
import os
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PY_DIR = os.path.join(HERE, "..", "..", "python")
TORCH_PYTHON = os.environ.get("KG_TORCH_PYTHON", "/usr/bin/python3")


def run(probe, *args, python=sys.executable, env=None):
    r = subprocess.run(
        [python, os.path.join(PY_DIR, probe + ".py")] + list(args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        timeout=120,
    )
    return r.returncode, r.stdout.decode(), r.stderr.decode()


class GpuStatus(unittest.TestCase):
    def test_without_nvidia_smi_it_says_so(self):
        env = dict(os.environ, PATH="/nonexistent")
        code, out, _ = run("gpu_status", env=env)
        self.assertEqual(code, 0)
        doc = json.loads(out)
        self.assertEqual(doc["gpus"], [])
        self.assertIn(doc["source"], ("none", "proc"))

    def test_reads_a_fake_nvidia_smi(self):
        d = tempfile.mkdtemp()
        smi = os.path.join(d, "nvidia-smi")
        with open(smi, "w") as f:
            f.write(
                "#!/bin/sh\n"
                'case "$*" in\n'
                '  *query-gpu*) echo "0, NVIDIA H200, 580.159.04, 1024, 143771, 97, 54, 512.3, 700.00, GPU-abc" ;;\n'
                '  *query-compute-apps*) echo "GPU-abc, 4242, python3, 1000" ;;\n'
                "esac\n"
            )
        os.chmod(smi, os.stat(smi).st_mode | stat.S_IEXEC)
        code, out, err = run("gpu_status", env=dict(os.environ, PATH=d + os.pathsep + os.environ["PATH"]))
        self.assertEqual(code, 0, err)
        doc = json.loads(out)
        self.assertEqual(doc["source"], "nvidia-smi")
        self.assertEqual(len(doc["gpus"]), 1)
        self.assertIn("H200", json.dumps(doc["gpus"][0]))


SLOT_GPU_QUERY = "--query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits"
SLOT_APP_QUERY = "--query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits"


def fake_smi(gpu_body, apps_body='true'):
    """A FAKE nvidia-smi (no GPU here) answering the two queries of ``--slots`` in the CSV nvidia-smi documents
    (``--format=csv,noheader,nounits``); any other arguments fail, so a changed query fails the test."""
    d = tempfile.mkdtemp()
    smi = os.path.join(d, "nvidia-smi")
    with open(smi, "w") as f:
        f.write('#!/bin/sh\ncase "$*" in\n  "%s") %s ;;\n  "%s") %s ;;\n  *) echo "bad query: $*" >&2; exit 9 ;;\nesac\n'
                % (SLOT_GPU_QUERY, gpu_body, SLOT_APP_QUERY, apps_body))
    os.chmod(smi, 0o755)
    return dict(os.environ, PATH=d + os.pathsep + os.environ["PATH"])


class GpuSlots(unittest.TestCase):
    """gpu_status.py --slots: the GPUs a replay may run on (core/replay/gpus.ts decides which are free)."""

    def slots(self, env, *args):
        code, out, err = run("gpu_status", "--slots", *args, env=env)
        self.assertEqual(code, 0, err)
        return json.loads(out)

    def test_reads_every_gpu_and_the_processes_on_each(self):
        env = fake_smi(
            "printf '0, GPU-aaa, NVIDIA H200, 0, 1, 143771\\n1, GPU-bbb, NVIDIA H200, 97, 70000, 143771\\n"
            "2, GPU-ccc, Tesla, Rev 2, [N/A], 20, 143771\\n'",
            "printf 'GPU-bbb, 4242, 69000\\nGPU-ccc, 77, [N/A]\\n'")
        doc = self.slots(env)
        self.assertEqual(doc["source"], "nvidia-smi")
        self.assertEqual([g["index"] for g in doc["gpus"]], [0, 1, 2])
        self.assertEqual(doc["gpus"][1], {"index": 1, "uuid": "GPU-bbb", "name": "NVIDIA H200", "utilizationPct": 97,
                                          "memoryUsedMiB": 70000, "memoryTotalMiB": 143771})
        # a comma in a name does not shift the columns after it; [N/A] is null
        self.assertEqual(doc["gpus"][2]["name"], "Tesla, Rev 2")
        self.assertIsNone(doc["gpus"][2]["utilizationPct"])
        self.assertEqual(doc["gpus"][2]["memoryTotalMiB"], 143771)
        self.assertEqual(doc["processes"], [{"gpu": 1, "uuid": "GPU-bbb", "pid": 4242, "memoryMiB": 69000},
                                            {"gpu": 2, "uuid": "GPU-ccc", "pid": 77, "memoryMiB": None}])
        self.assertIsNone(doc["error"])
        self.assertIsNone(doc["processesError"])

    def test_an_nvidia_smi_that_exits_after_closing_its_output_is_waited_for(self):
        # its streams end before it exits (a driver call after the last row): the answer is its rows, not a kill
        doc = self.slots(fake_smi("echo '0, GPU-aaa, NVIDIA H200, 0, 1, 143771'; exec >&- 2>&-; sleep 0.3"))
        self.assertEqual((doc["source"], len(doc["gpus"]), doc["error"]), ("nvidia-smi", 1, None))

    def test_no_nvidia_smi_is_no_gpu_said_once(self):
        code, out, err = run("gpu_status", "--slots", env=dict(os.environ, PATH="/nonexistent"))
        self.assertEqual(code, 0, err)
        doc = json.loads(out)
        self.assertEqual((doc["source"], doc["gpus"]), ("none", []))
        self.assertEqual(err.count("nvidia-smi not found"), 1)

    def test_a_failing_nvidia_smi_is_an_answer_with_its_reason(self):
        env = fake_smi("echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.' >&2; "
                       "echo noise; exit 9")
        doc = self.slots(env)
        self.assertEqual((doc["source"], doc["gpus"]), ("failed", []))
        self.assertIn("could not communicate with the NVIDIA driver", doc["error"])

    def test_processes_not_listed_are_said(self):
        doc = self.slots(fake_smi("echo '0, GPU-aaa, NVIDIA H200, 0, 1, 143771'", "echo nope >&2; exit 3"))
        self.assertEqual(len(doc["gpus"]), 1)
        self.assertIn("nope", doc["processesError"])

    def test_a_hung_nvidia_smi_is_stopped_at_the_timeout(self):
        # the fake never answers (blocks on a FIFO nobody writes): only the probe's own timeout can end it
        d = tempfile.mkdtemp()
        fifo = os.path.join(d, "never")
        os.mkfifo(fifo)
        doc = self.slots(fake_smi("exec cat %s" % fifo), "--timeout", "0.5")
        self.assertEqual(doc["source"], "failed")
        self.assertIn("no answer within 0.5 s", doc["error"])

    def test_endless_output_is_cut_and_said(self):
        doc = self.slots(fake_smi("exec yes '0, GPU-aaa, NVIDIA H200, 0, 1, 143771'"))
        self.assertEqual(len(doc["gpus"]), 256)
        self.assertRegex(doc["limited"], r"first 256 GPUs")


class TorchCheck(unittest.TestCase):
    def test_real_torch_imports_and_reports_its_version(self):
        self.assertTrue(os.path.exists(TORCH_PYTHON), "install python3-torch (Debian) or set KG_TORCH_PYTHON")
        code, out, err = run("torch_check", python=TORCH_PYTHON)
        self.assertEqual(code, 0, err)
        doc = json.loads(out)
        self.assertTrue(doc["imported"], doc)
        self.assertRegex(doc["version"], r"^\d+\.\d+")
        self.assertGreater(doc["importSeconds"], 0)

    def test_an_interpreter_without_torch_is_a_result_not_an_error(self):
        env = dict(os.environ, PYTHONPATH="", PYTHONNOUSERSITE="1")
        code, out, _ = run("torch_check", python=sys.executable, env=env)
        self.assertEqual(code, 0)
        doc = json.loads(out)
        if not doc["imported"]:
            self.assertTrue(doc["error"])


class CacheArchive(unittest.TestCase):
    def test_reports_caches_and_free_space_of_the_root(self):
        root = tempfile.mkdtemp()
        cache = tempfile.mkdtemp()
        with open(os.path.join(cache, "kernel.py"), "w") as f:
            f.write("x" * 1000)
        code, out, err = run("cache_archive", "--root", root, "--cache-dir", cache)
        self.assertEqual(code, 0, err)
        doc = json.loads(out)
        text = json.dumps(doc)
        self.assertIn(cache, text)
        self.assertIn("1000", text)

    def test_archives_go_under_the_home_and_old_ones_in_the_root_are_still_listed(self):
        home = tempfile.mkdtemp()
        root = tempfile.mkdtemp()
        os.makedirs(os.path.join(root, ".known-good"))
        old = os.path.join(root, ".known-good", "cache-2026-01-01T00-00-00Z.tar.gz")
        with open(old, "wb") as f:
            f.write(b"x")
        code, out, err = run("cache_archive", "--root", root, env=dict(os.environ, HOME=home))
        self.assertEqual(code, 0, err)
        doc = json.loads(out)
        self.assertEqual(doc["dest"]["dir"], os.path.join(home, ".known-good", "cache-archives"))
        self.assertEqual([a["path"] for a in doc["archives"]], [old])
        # without a root: the home's archives only
        code, out, err = run("cache_archive", env=dict(os.environ, HOME=home))
        self.assertEqual(code, 0, err)
        self.assertEqual((json.loads(out)["root"], json.loads(out)["archives"]), (None, []))

    def test_a_bad_argument_is_one_line_and_non_zero(self):
        code, out, err = run("cache_archive", "--bogus")
        self.assertNotEqual(code, 0)
        self.assertEqual(out, "")
        self.assertEqual(len(err.strip().splitlines()), 1, err)


if __name__ == "__main__":
    unittest.main()
