"""Tests of python/env_snapshot.py: redaction, missing/fake nvidia-smi, caches, nasty script names, torch files."""
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.join(HERE, "..", "..", "python")
sys.path.insert(0, PYDIR)

import env_snapshot  # noqa: E402
import kg_common  # noqa: E402
import kg_redact  # noqa: E402

PROBE = os.path.join(PYDIR, "env_snapshot.py")
DEBIAN_PY = "/usr/bin/python3"
DEBIAN_TORCH = "/usr/lib/python3/dist-packages/torch/version.py"

# What `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` prints on a 2 x H200 box (driver 580).
FAKE_SMI = r'''#!/usr/bin/env python3
import sys
args = sys.argv[1:]
rows = {
    "name": ["NVIDIA H200", "NVIDIA H200"],
    "driver_version": ["580.95.05", "580.95.05"],
    "memory.total": ["143771", "143771"],
    "clocks.max.sm": ["1980", "1980"],
    "clocks.max.mem": ["3201", "3201"],
    "power.limit": ["700.00", "700.00"],
    "persistence_mode": ["Enabled", "Enabled"],
    "compute_mode": ["Default", "Default"],
    "pcie.link.gen.current": ["1", "5"],
    "pcie.link.width.current": ["16", "16"],
    "uuid": ["GPU-1b9c3f0e-7d2a-4c1e-9a51-0f2b7c6d8e01", "GPU-5e2d8a41-0c3b-4f6e-8d27-93a1b4c5d6e7"],
    "pcie.link.gen.max": ["5", "5"],
    "pcie.link.width.max": ["16", "16"],
    "pci.bus_id": ["00000000:19:00.0", "00000000:3B:00.0"],
    "vbios_version": ["[N/A]", "96.00.A5.00.01"],
}
if args and args[0] == "topo":
    sys.stdout.write("\t\x1b[4mGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
                     "GPU0\t X \tNV18\tSYS\t0-47,96-143\t0\t\tN/A\n"
                     "GPU1\tNV18\t X \tSYS\t0-47,96-143\t0\t\tN/A\n"
                     "NIC0\tSYS\tSYS\t X \t\t\t\t\n\n"
                     "Legend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n")
    sys.exit(0)
q = [a for a in args if a.startswith("--query-gpu=")]
if not q:
    sys.exit(4)
fields = q[0].split("=", 1)[1].split(",")
for f in fields:
    if f not in rows or (STRICT and f.startswith(("pcie.link.gen.max", "pcie.link.width.max", "pci.", "vbios"))):
        sys.stdout.write('Field "%s" is not a valid field to query.\n\n' % f)
        sys.exit(2)
for i in range(2):
    sys.stdout.write(", ".join(rows[f][i] for f in fields) + "\n")
'''


def run_probe(args=(), env=None, python=None, uid=None):
    pre = (lambda: os.setuid(uid)) if uid is not None else None
    r = subprocess.run([python or sys.executable, PROBE] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=env, timeout=120, preexec_fn=pre)
    if r.returncode != 0:
        raise AssertionError("probe failed (%d): %s" % (r.returncode, r.stderr.decode("utf-8", "replace")))
    return r.stdout.decode("utf-8"), json.loads(r.stdout.decode("utf-8"))


def base_env(**extra):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith(("WANDB_", "HF_", "AWS_")):
            del env[k]
    env.update(extra)
    return env


class RedactionTest(unittest.TestCase):
    SECRETS = {
        "WANDB_API_KEY": "3f9a1c0e5b7d2468ace13579bdf02468ace13579",
        "HF_TOKEN": "hf_QxYzAbCdEfGhIjKlMnOpQrStUvWxYz123456",
        "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    }

    def test_values_never_leave_the_host(self):
        url_pw = "s3cr3t-pa55-in-url-9f8e7d"
        env = base_env(HF_ENDPOINT="https://alice:%s@hf.internal.example/" % url_pw, **self.SECRETS)
        out, doc = run_probe(["--extra-var", "AWS_SECRET_ACCESS_KEY"], env=env)
        for name, value in self.SECRETS.items():
            self.assertNotIn(value, out, name)
            # nor any long piece of it (an escaped or partial copy)
            self.assertNotIn(value[:16], out, name)
            want = "<redacted sha256:%s>" % hashlib.sha256(value.encode()).hexdigest()[:12]
            self.assertEqual(doc["env"]["vars"][name], want)
        self.assertNotIn(url_pw, out)
        self.assertTrue(doc["env"]["vars"]["HF_ENDPOINT"].startswith("https://alice:<redacted sha256:"))
        self.assertTrue(doc["env"]["vars"]["HF_ENDPOINT"].endswith("@hf.internal.example/"))

    def test_unlisted_variables_are_not_collected(self):
        env = base_env(AWS_SECRET_ACCESS_KEY=self.SECRETS["AWS_SECRET_ACCESS_KEY"], NCCL_DEBUG="INFO",
                       SOME_OTHER="x")
        out, doc = run_probe([], env=env)
        self.assertNotIn("AWS_SECRET_ACCESS_KEY", doc["env"]["vars"])
        self.assertNotIn("SOME_OTHER", doc["env"]["vars"])
        self.assertEqual(doc["env"]["vars"]["NCCL_DEBUG"], "INFO")
        self.assertNotIn(self.SECRETS["AWS_SECRET_ACCESS_KEY"], out)

    def test_secret_names(self):
        for n in ("HF_TOKEN", "WANDB_API_KEY", "MY_PASSWD_PASS", "NCCL_AUTH", "X_CREDENTIALS", "db_password"):
            self.assertTrue(kg_redact.is_secret_name(n), n)
        for n in ("PATH", "CUDA_VISIBLE_DEVICES", "TORCHINDUCTOR_MAX_AUTOTUNE", "NCCL_IB_HCA"):
            self.assertFalse(kg_redact.is_secret_name(n), n)

    def test_url_tokens_extra_vars_and_odd_passwords_never_leave_the_host(self):
        url_token = "ghp_UrlUserToken0123456789abcdefghijkl"
        pat = "github_pat_11AAAAAAA0abcdefghijklmnopqrstuvwxyz"
        odd_pw = "p/ss@w0rd/with@slash"
        query_tok = "q-token-5d6e7f8091a2"
        env = base_env(
            HF_ENDPOINT="https://%s@hf.internal.example/" % url_token,
            GITHUB_PAT=pat,
            PIP_INDEX_URL="https://ci:%s@pypi.internal.example/simple/" % odd_pw,
            WANDB_BASE_URL="https://wandb.internal.example/?token=%s" % query_tok,
            MY_REMOTE="origin https://oauth2:%s@gitlab.example/g/p.git" % odd_pw,
        )
        out, doc = run_probe(["--extra-var", "GITHUB_PAT", "--extra-var", "PIP_INDEX_URL", "--extra-var",
                              "MY_REMOTE"], env=env)
        for secret in (url_token, pat, odd_pw, query_tok, "p/ss", "with@slash", "slash"):
            self.assertNotIn(secret, out, secret)
        v = doc["env"]["vars"]
        self.assertEqual(v["HF_ENDPOINT"], "https://%s@hf.internal.example/" % kg_redact.redact_secret(url_token))
        self.assertEqual(v["GITHUB_PAT"], kg_redact.redact_secret(pat))
        self.assertEqual(v["PIP_INDEX_URL"],
                         "https://ci:%s@pypi.internal.example/simple/" % kg_redact.redact_secret(odd_pw))
        self.assertEqual(v["WANDB_BASE_URL"],
                         "https://wandb.internal.example/?token=%s" % kg_redact.redact_secret(query_tok))
        self.assertTrue(v["MY_REMOTE"].endswith("@gitlab.example/g/p.git"), v["MY_REMOTE"])


class GpuTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def fake_smi(self, strict=False):
        bindir = os.path.join(self.tmp, "bin")
        os.makedirs(bindir, exist_ok=True)
        p = os.path.join(bindir, "nvidia-smi")
        with open(p, "w") as f:
            f.write(FAKE_SMI.replace("#!/usr/bin/env python3", "#!" + sys.executable + "\nSTRICT = %r" % strict))
        os.chmod(p, 0o755)
        return bindir

    def test_missing_nvidia_smi_is_not_an_error(self):
        empty = os.path.join(self.tmp, "empty")
        os.makedirs(empty)
        _, doc = run_probe([], env=base_env(PATH=empty))
        self.assertEqual(doc["gpus"]["status"], "not found")
        self.assertEqual(doc["gpus"]["gpus"], [])
        self.assertIsNone(doc["gpus"]["error"])
        self.assertNotIn("gpus", [e["part"] for e in doc["errors"]])

    def test_fake_nvidia_smi_is_parsed(self):
        bindir = self.fake_smi()
        _, doc = run_probe([], env=base_env(PATH=bindir + os.pathsep + os.environ.get("PATH", "")))
        g = doc["gpus"]
        self.assertEqual(g["status"], "ok", g)
        self.assertEqual(len(g["gpus"]), 2)
        g0, g1 = g["gpus"]
        self.assertEqual(g0["name"], "NVIDIA H200")
        self.assertEqual(g0["driver_version"], "580.95.05")
        self.assertEqual(g0["memory.total"], 143771)
        self.assertEqual(g0["clocks.max.sm"], 1980)
        self.assertEqual(g0["power.limit"], 700.0)
        self.assertEqual(g0["persistence_mode"], "Enabled")
        self.assertEqual(g0["pcie.link.gen.current"], 1)
        self.assertEqual(g1["pcie.link.gen.current"], 5)
        self.assertEqual(g0["pcie.link.width.max"], 16)
        self.assertIsNone(g0["vbios_version"])  # [N/A]
        self.assertEqual(g1["uuid"], "GPU-5e2d8a41-0c3b-4f6e-8d27-93a1b4c5d6e7")
        topo = g["topology"]
        self.assertEqual(topo["columns"][:3], ["GPU0", "GPU1", "NIC0"])
        self.assertEqual([r["name"] for r in topo["rows"]], ["GPU0", "GPU1", "NIC0"])
        self.assertEqual(topo["rows"][0]["cells"][:4], ["X", "NV18", "SYS", "0-47,96-143"])

    def test_old_driver_without_extra_fields(self):
        bindir = self.fake_smi(strict=True)
        _, doc = run_probe([], env=base_env(PATH=bindir + os.pathsep + os.environ.get("PATH", "")))
        g0 = doc["gpus"]["gpus"][0]
        self.assertEqual(g0["name"], "NVIDIA H200")
        self.assertEqual(g0["pcie.link.width.current"], 16)
        self.assertNotIn("pcie.link.gen.max", g0)

    def test_failing_nvidia_smi_is_recorded_and_the_rest_comes_back(self):
        bindir = os.path.join(self.tmp, "bin")
        os.makedirs(bindir)
        p = os.path.join(bindir, "nvidia-smi")
        with open(p, "w") as f:
            f.write("#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                    "driver.\"\nexit 9\n")
        os.chmod(p, 0o755)
        _, doc = run_probe([], env=base_env(PATH=bindir + os.pathsep + os.environ.get("PATH", "")))
        self.assertEqual(doc["gpus"]["status"], "error")
        self.assertIn("couldn't communicate", doc["gpus"]["error"])
        self.assertIn("gpus", [e["part"] for e in doc["errors"]])
        self.assertGreater(doc["packages"]["count"], 0)


class CacheTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        for root, dirs, _ in os.walk(self.tmp):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def make_cache(self):
        c = os.path.join(self.tmp, "cache")
        os.makedirs(os.path.join(c, "ab", "cd"))
        sizes = {os.path.join(c, "a.py"): 10, os.path.join(c, "ab", "b.so"): 2000,
                 os.path.join(c, "ab", "cd", "c.json"): 7}
        for i, (p, n) in enumerate(sorted(sizes.items())):
            with open(p, "wb") as f:
                f.write(b"x" * n)
            os.utime(p, (1700000000 + i, 1700000000 + i))
        return c, sizes

    def test_counts_files_bytes_and_mtimes(self):
        c, sizes = self.make_cache()
        r = env_snapshot.walk_cache("custom1", c)
        self.assertEqual((r["exists"], r["files"], r["bytes"]), (True, 3, sum(sizes.values())))
        self.assertEqual((r["oldestMtime"], r["newestMtime"]), (1700000000, 1700000002))
        self.assertIsNone(r["error"])

    def test_missing_cache(self):
        r = env_snapshot.walk_cache("inductor", os.path.join(self.tmp, "nope"))
        self.assertFalse(r["exists"])
        self.assertIsNone(r["files"])

    def test_unreadable_cache_dir(self):
        c, _ = self.make_cache()
        sub = os.path.join(c, "ab")
        real = os.scandir

        def denied(path):
            if path in (c, sub):
                raise PermissionError(13, "Permission denied", path)
            return real(path)

        with mock.patch.object(env_snapshot.os, "scandir", denied):
            r = env_snapshot.walk_cache("custom1", c)
        self.assertTrue(r["exists"])
        self.assertIn("Permission denied", r["error"])
        self.assertIsNone(r["files"])

        # an unreadable subfolder is counted, the rest is still summed
        with mock.patch.object(env_snapshot.os, "scandir", lambda p: denied(p) if p == sub else real(p)):
            r = env_snapshot.walk_cache("custom1", c)
        self.assertEqual((r["files"], r["unreadableDirs"], r["error"]), (1, 1, None))

    def test_unreadable_cache_dir_by_mode(self):
        # Root reads a mode-000 folder, so as root (CI) the probe runs as `nobody` (uid 65534) instead of skipping.
        c, _ = self.make_cache()
        uid, python = None, None
        if os.geteuid() == 0:
            # Debian's interpreter: one under /root (pyenv) is not for `nobody` to run.
            uid, python = 65534, "/usr/bin/python3"
            os.chmod(self.tmp, 0o755)
        os.chmod(c, 0)
        _, doc = run_probe(["--cache-dir", c], uid=uid, python=python)
        mine = [x for x in doc["caches"] if x["path"] == c][0]
        self.assertIn("Permission", mine["error"])

    def test_cache_dirs_from_env_and_flags(self):
        c, sizes = self.make_cache()
        env = base_env(TORCHINDUCTOR_CACHE_DIR=c, TRITON_CACHE_DIR=os.path.join(self.tmp, "no-triton"))
        _, doc = run_probe(["--cache-dir", os.path.join(c, "ab")], env=env)
        by = dict((x["name"], x) for x in doc["caches"])
        self.assertEqual(by["inductor"]["path"], c)
        self.assertEqual(by["inductor"]["files"], 3)
        self.assertFalse(by["triton"]["exists"])
        self.assertEqual(by["custom1"]["files"], 2)
        self.assertEqual(by["custom1"]["bytes"], 2007)


class ScriptsTest(unittest.TestCase):
    def test_nasty_names(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, True)
        names = [b"plain.py", b"with space.py", b"new\nline.py", b"quote'\"$(touch x).py", b"-dash.py",
                 "\u00fcn\u00efc\u00f8de.py".encode("utf-8"), b"\xff\xfe-not-utf8.py", b"*star[1].py"]
        expected = {}
        for i, n in enumerate(names):
            p = os.path.join(os.fsencode(tmp), n)
            data = ("print(%d)\n" % i).encode() * (i + 1)
            with open(p, "wb") as f:
                f.write(data)
            expected[os.fsdecode(p)] = (hashlib.sha256(data).hexdigest(), hashlib.md5(data).hexdigest(), len(data))
        with open(os.path.join(tmp, "notes.txt"), "w") as f:
            f.write("not a script")
        _, doc = run_probe(["--script", os.path.join(tmp, "*.py"), "--script", os.path.join(tmp, "none-*.py")])
        s = doc["scripts"]
        got = dict((e["path"], (e["sha256"], e["md5"], e["size"])) for e in s["files"])
        self.assertEqual(got, expected)
        self.assertEqual(s["unmatched"], [os.path.join(tmp, "none-*.py")])
        self.assertTrue(all(e["error"] is None and e["mtime"] for e in s["files"]))


FAKE_VERSION_PY = """\
from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'xpu']
__version__ = '2.11.0+cu130'
debug = False
cuda: Optional[str] = '13.0'
git_version = 'c8cd2c4a3e6c0c8b1f4a2b9e7d3f5a1c0b2e4d6f'
hip: Optional[str] = None
xpu: Optional[str] = None
"""


class TorchFilesTest(unittest.TestCase):
    def make_site(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, True)
        site = os.path.join(tmp, "site-packages")
        marker = os.path.join(tmp, "torch-was-imported")
        os.makedirs(os.path.join(site, "torch", "lib"))
        with open(os.path.join(site, "torch", "__init__.py"), "w") as f:
            f.write("open(%r, 'w').close()\nraise ImportError('fake torch must not be imported')\n" % marker)
        with open(os.path.join(site, "torch", "version.py"), "w") as f:
            f.write(FAKE_VERSION_PY)
        open(os.path.join(site, "torch", "lib", "libcudnn.so.9"), "w").close()
        # As on the GPU box: the wheel's metadata says 2.11.0, torch/version.py says 2.11.0+cu130.
        for name, version, editable in (("torch", "2.11.0", None), ("Flash_Attn", "2.8.3", None),
                                        ("my-trainer", "0.3.0", "/workspace/my trainer")):
            d = os.path.join(site, "%s-%s.dist-info" % (name.replace("-", "_"), version))
            os.makedirs(d)
            with open(os.path.join(d, "METADATA"), "w") as f:
                f.write("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: x\n\nbody Name: nope\n"
                        % (name, version))
            if editable:
                with open(os.path.join(d, "direct_url.json"), "w") as f:
                    json.dump({"url": "file:///workspace/my%20trainer", "dir_info": {"editable": True}}, f)
        return site, marker

    def test_torch_read_without_import(self):
        site, marker = self.make_site()
        _, doc = run_probe([], env=base_env(PYTHONPATH=site))
        t = doc["torch"]
        # torch's own string with its local build, not the wheel metadata's 2.11.0 (a cu128 → cu130 swap must show).
        self.assertEqual(t["version"], "2.11.0+cu130")
        self.assertEqual(t["distVersion"], "2.11.0")
        self.assertEqual(t["gitVersion"], "c8cd2c4a3e6c0c8b1f4a2b9e7d3f5a1c0b2e4d6f")
        self.assertEqual(t["cuda"], "13.0")
        self.assertIsNone(t["hip"])
        self.assertIs(t["debug"], False)
        self.assertEqual(t["location"], os.path.join(site, "torch"))
        self.assertEqual(t["bundledLibs"], ["libcudnn.so.9"])
        self.assertFalse(os.path.exists(marker), "torch was imported")
        p = doc["packages"]
        self.assertEqual(p["packages"]["flash-attn"], "2.8.3")
        self.assertEqual(p["key"]["flash-attn"], "2.8.3")
        self.assertEqual(p["editable"]["my-trainer"], "/workspace/my trainer")
        self.assertEqual(doc["env"]["vars"]["PYTHONPATH"], site)

    def test_deep_records_a_failed_import(self):
        site, marker = self.make_site()
        _, doc = run_probe(["--deep"], env=base_env(PYTHONPATH=site))
        self.assertIn("fake torch must not be imported", doc["deepInfo"]["error"])
        self.assertIn("deep", [e["part"] for e in doc["errors"]])
        self.assertEqual(doc["torch"]["version"], "2.11.0+cu130")

    def test_debian_torch(self):
        # Needed, never skipped: npm test and .ci/run install Debian's python3-torch.
        self.assertTrue(os.path.exists(DEBIAN_TORCH) and os.path.exists(DEBIAN_PY),
                        "no Debian python3-torch (%s): install it" % DEBIAN_TORCH)
        with open(DEBIAN_TORCH) as f:
            text = f.read()
        want_version = re.search(r"^__version__\s*=\s*'([^']*)'", text, re.M).group(1)
        want_git = re.search(r"^git_version\s*=\s*'([^']*)'", text, re.M).group(1)
        _, doc = run_probe([], python=DEBIAN_PY, env=base_env())
        t = doc["torch"]
        self.assertEqual(t["versionPy"], want_version)
        self.assertTrue(t["version"].startswith(want_version), t["version"])  # dist metadata: 1.13.0a0+gitunknown
        self.assertEqual(t["gitVersion"], want_git)
        self.assertEqual(t["location"], os.path.dirname(DEBIAN_TORCH))
        self.assertEqual(doc["python"]["executable"], DEBIAN_PY)


class PartsTest(unittest.TestCase):
    def test_a_failing_part_is_recorded_and_the_rest_comes_back(self):
        with mock.patch.object(env_snapshot, "collect_python", side_effect=RuntimeError("boom")):
            doc = env_snapshot.main([])
        self.assertEqual(doc["python"], {"error": "RuntimeError: boom"})
        self.assertIn({"part": "python", "message": "RuntimeError: boom"}, doc["errors"])
        self.assertEqual(doc["schema"], 1)
        self.assertGreater(doc["packages"]["count"], 0)
        self.assertTrue(doc["host"]["hostname"])

    def test_bad_args_are_a_probe_error(self):
        import kg_common

        with self.assertRaises(kg_common.ProbeError):
            env_snapshot.main(["--nope"])

    def test_document_is_json(self):
        doc = env_snapshot.main([])
        json.loads(json.dumps(doc, allow_nan=False))
        for k in ("host", "python", "packages", "torch", "cuda", "gpus", "env", "scripts", "caches"):
            self.assertIn(k, doc)
        self.assertIn(doc["host"]["container"]["detected"], (True, False))


if __name__ == "__main__":
    unittest.main()


class RestoreFactsTest(unittest.TestCase):
    """What a restore needs that pip freeze drops: indexes, direct installs, installers, == pins."""

    def test_exact_pins_skip_extras_and_ranges(self):
        import env_python

        reqs = ["triton==3.6.0; platform_system == 'Linux'", "numpy>=1.22", "sympy (==1.13.1)",
                "pytest==8.0; extra == 'test'", "Jax_Lib[cuda] == 0.4.30"]
        self.assertEqual(env_python.exact_pins(reqs), ["jax-lib", "sympy", "triton"])

    def test_indexes_from_config_file_and_variables(self):
        import env_python

        with tempfile.TemporaryDirectory() as d:
            conf = os.path.join(d, "pip.conf")
            with open(conf, "w") as f:
                f.write("[global]\nindex-url = https://mirror.example/simple\n"
                        "extra-index-url =\n  https://download.pytorch.org/whl/cu130\n  https://x.example/simple\n")
            env = {"PIP_CONFIG_FILE": conf, "PIP_FIND_LINKS": "/w/a /w/b", "UV_INDEX_URL": "https://uv.example",
                   "HOME": d, "XDG_CONFIG_DIRS": d}
            with mock.patch.dict(os.environ, env, clear=True):
                got = env_python.collect_indexes()
        self.assertEqual(got["indexUrl"], "https://mirror.example/simple")
        self.assertEqual(got["extraIndexUrls"], ["https://download.pytorch.org/whl/cu130", "https://x.example/simple"])
        self.assertEqual(got["findLinks"], ["/w/a", "/w/b"])
        self.assertEqual(got["sources"], [conf, "$PIP_FIND_LINKS"])
        self.assertEqual(got["uv"], {"UV_INDEX_URL": "https://uv.example"})

    def test_snapshot_records_installers_direct_urls_and_pins(self):
        with tempfile.TemporaryDirectory() as d:
            for name, extra in (("alpha", {"direct_url.json": json.dumps(
                    {"url": "file:///src/alpha", "dir_info": {"editable": True}})}),
                                ("beta", {"direct_url.json": json.dumps(
                                    {"url": "https://g.example/beta.git",
                                     "vcs_info": {"vcs": "git", "commit_id": "abc123"}})}),
                                ("gamma", {})):
                info = os.path.join(d, "%s-1.0.dist-info" % name)
                os.mkdir(info)
                req = "Requires-Dist: beta==1.0\n" if name == "gamma" else ""
                with open(os.path.join(info, "METADATA"), "w") as f:
                    f.write("Metadata-Version: 2.1\nName: %s\nVersion: 1.0\n%s\n" % (name, req))
                with open(os.path.join(info, "INSTALLER"), "w") as f:
                    f.write("uv\n" if name == "gamma" else "pip\n")
                for fn, text in extra.items():
                    with open(os.path.join(info, fn), "w") as f:
                        f.write(text)
            out = subprocess.run([sys.executable, "-I", "-c", (
                "import sys, json; sys.path[:] = [%r, %r] + [p for p in sys.path if 'packages' not in p]; "
                "import env_python; "
                "p = env_python.collect_packages(); "
                "print(json.dumps({k: p[k] for k in ('installers', 'directUrls', 'pins', 'editable')}))")
                % (PYDIR, d)], capture_output=True, text=True, check=True).stdout
        got = json.loads(out)
        self.assertEqual({k: v for k, v in got["installers"].items() if k in ("alpha", "beta", "gamma")},
                         {"alpha": "pip", "beta": "pip", "gamma": "uv"})
        self.assertEqual(got["directUrls"]["alpha"]["kind"], "editable")
        self.assertEqual(got["directUrls"]["beta"], {"url": "https://g.example/beta.git", "kind": "vcs", "vcs": "git",
                                                    "commit": "abc123"})
        self.assertEqual(got["pins"], {"gamma": ["beta"]})
        self.assertEqual(got["editable"], {"alpha": "/src/alpha"})


class FreshPackagesTest(unittest.TestCase):
    """A package installed while one interpreter lives is in its next snapshot: nothing read before is kept (the
    standard library's caches of a folder are keyed on its mtime, which the new .dist-info changes)."""

    def test_a_package_added_between_two_snapshots_of_one_process_is_in_the_second(self):
        with tempfile.TemporaryDirectory() as d:
            out = subprocess.run([sys.executable, "-I", "-c", (
                "import os, sys, json; sys.path[:] = [%r, %r] + [p for p in sys.path if 'packages' not in p]\n"
                "import env_python\n"
                "first = env_python.collect_packages()['packages']\n"
                "info = os.path.join(%r, 'kg_fresh-2.0.dist-info'); os.mkdir(info)\n"
                "open(os.path.join(info, 'METADATA'), 'w').write('Metadata-Version: 2.1\\nName: kg-fresh\\n"
                "Version: 2.0\\n')\n"
                "second = env_python.collect_packages()['packages']\n"
                "print(json.dumps([first.get('kg-fresh'), second.get('kg-fresh')]))")
                % (PYDIR, d, d)], capture_output=True, text=True, check=True).stdout
        self.assertEqual(json.loads(out), [None, "2.0"])


@unittest.skipUnless(os.path.isdir("/proc/self/fd"), "needs /proc")
class LiveRunTest(unittest.TestCase):
    """--run: the run's training process's own variables (as it started), beside the probe's own environment."""

    def setUp(self):
        self.d = os.path.realpath(tempfile.mkdtemp())
        self.run_dir = os.path.join(self.d, "run")
        os.makedirs(self.run_dir)
        with open(os.path.join(self.run_dir, "train.py"), "w") as f:
            # Held on its stdin until the test closes it: it runs exactly while the test reads it.
            f.write("import sys\nprint('ready', flush=True)\nsys.stdin.read()\n")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            p.stdin.close()
            p.wait()
            p.stdout.close()
        shutil.rmtree(self.d, ignore_errors=True)

    def start(self, argv, env):
        p = subprocess.Popen(argv, cwd=self.run_dir, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.procs.append(p)
        self.assertEqual(p.stdout.readline().strip(), b"ready")
        return p

    def test_the_training_process_variables_are_read_filtered_and_redacted(self):
        env = base_env(NCCL_ALGO="Tree", HF_TOKEN="hf_FAKEliveTOKEN0000000000000000000000", KG_NOT_RECORDED="x",
                       KG_ASKED="yes")
        # A `cat` of the run started first: the oldest process, but not the trainer.
        self.start(["sh", "-c", "echo ready; exec cat"], env)
        trainer = self.start([sys.executable, "train.py", "--steps", "100"], env)
        with mock.patch.dict(os.environ, {"NCCL_ALGO": "Ring"}):
            doc = env_snapshot.main(["--run=" + self.run_dir, "--extra-var=KG_ASKED", "--extra-var=KG_MISSING"])
        live = doc["liveRun"]
        self.assertEqual(live["path"], self.run_dir)
        self.assertIsNone(live["error"])
        self.assertEqual(live["others"], 1)
        proc = live["process"]
        self.assertEqual(proc["pid"], trainer.pid)
        self.assertEqual(proc["argv"][1:], ["train.py", "--steps", "100"])
        self.assertEqual(proc["vars"]["NCCL_ALGO"], "Tree")
        self.assertEqual(doc["env"]["vars"]["NCCL_ALGO"], "Ring")
        self.assertEqual(proc["vars"]["KG_ASKED"], "yes")
        self.assertEqual(proc["missingExtra"], ["KG_MISSING"])
        self.assertNotIn("KG_NOT_RECORDED", proc["vars"])
        self.assertRegex(proc["vars"]["HF_TOKEN"], r"^<redacted sha256:[0-9a-f]+>$")
        self.assertNotIn("hf_FAKEliveTOKEN", json.dumps(doc))

    def test_a_run_with_nothing_running_has_no_process_and_no_run_no_part(self):
        doc = env_snapshot.main(["--run=" + self.run_dir])
        self.assertIsNone(doc["liveRun"]["process"])
        self.assertIsNone(doc["liveRun"]["error"])
        self.assertIsNone(env_snapshot.main([])["liveRun"])
