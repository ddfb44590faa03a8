#!/usr/bin/env python3
"""A longer fuzz run of python/ckpt_args.py than the test suite's (test/python/test_ckpt_hostile.py), by hand.

Usage: python3 scripts/fuzz_ckpt_args.py [--count N] [--seed S] [--time-limit SECONDS] [--keep DIR]

Cases: the constructed hostile pickles, then truncations and byte flips of real torch checkpoints (written by
Debian's torch, /usr/bin/python3 or $KG_TORCH_PYTHON), random opcode streams and generated pickles that call
dangerous globals. Prints one JSON summary: cases, outcomes by class, crashes (each case kept as a file), the
slowest case, the peak RSS of this process, and whether any case ran code (the marker file). Exits 1 on a crash,
a timeout or a run marker.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "python"))

import ckpt_fuzz  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--time-limit", type=float, default=10.0, help="CPU seconds one case may take")
    ap.add_argument("--keep", help="folder for the cases (kept); default: a temp folder, removed unless a case fails")
    a = ap.parse_args()
    folder = a.keep or tempfile.mkdtemp(prefix="kg-fuzz-ckpt-")
    os.makedirs(folder, exist_ok=True)
    t0 = time.perf_counter()
    res = ckpt_fuzz.fuzz(folder, a.count, a.seed, time_limit=a.time_limit, progress=max(1, a.count // 10))
    res["wallS"] = round(time.perf_counter() - t0, 1)
    res["folder"] = folder
    bad = res["crashes"] or res["marker"] or "timeout" in res["outcomes"]
    print(json.dumps(res, indent=1))
    if not bad and not a.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
