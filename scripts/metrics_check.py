"""Times python/metrics_reduce.py on a generated 1,000,000-line train log, as the resident helper runs it (stdlib).

    python3 scripts/metrics_check.py [LINES]

Prints one JSON document: the preview, exact reads with 1, 2, 8 and the default number of jobs (each reading the
whole file), reopening (what the module kept) and a zoom to 1% of the steps through the zone map.
"""
import json
import math
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import metrics_cache  # noqa: E402
import metrics_reduce  # noqa: E402
import metrics_scan  # noqa: E402


def write_log(path, n):
    """The same lines as bench/cases/metrics.ts generateMetricsLog: a step line each, an eval line every 1000."""
    t0 = 1700000000
    with open(path, "w") as f:
        chunk = []
        for i in range(n):
            loss = 4 * math.exp(-i / 200000.0) + ((i * 7919) % 97) * 1e-4
            if i == n * 3 // 4:
                loss = 99.0
            text = "NaN" if i == n // 3 else "%.5f" % loss
            chunk.append('{"step": %d, "loss": %s, "lr": 0.0003, "grad_norm": %.3f, "tok_per_s": %d, "time": %.2f}\n'
                         % (i, text, 1 + ((i * 31) % 17) / 10.0, 12800 + i % 300, t0 + i * 0.35))
            if i % 1000 == 999:
                chunk.append('{"step": %d, "eval": {"loss": %.5f, "acc": 0.5}}\n' % (i, loss + 0.1))
            if len(chunk) >= 10000:
                f.write("".join(chunk))
                chunk = []
        f.write("".join(chunk))


def timed(args):
    t = time.time()
    r = metrics_reduce.main(args)
    return {"ms": round((time.time() - t) * 1000), "jobs": r["jobs"], "lines": r["lines"], "source": r["source"],
            "bytesRead": r["bytesRead"], "sample": r["sample"], "resultBytes": len(json.dumps(r))}


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000000
    metrics_cache._KEEP = True  # as inside the resident helper
    d = tempfile.mkdtemp(prefix="kg-metrics-check-")
    path = os.path.join(d, "train_log.jsonl")
    try:
        write_log(path, n)
        out = {"python": sys.version.split()[0], "cpus": metrics_scan.default_jobs(), "lines": n,
               "bytes": os.path.getsize(path)}
        out["preview"] = timed([path, "--preview"])
        for jobs in ("1", "2", "8"):
            out["exact_jobs_" + jobs] = timed([path, "--fresh", "--jobs", jobs])
        out["exact_default"] = timed([path, "--fresh"])
        out["reopen"] = timed([path, "--preview"])
        lo = n * 2 // 5
        out["zoom"] = timed([path, "--from", str(lo), "--to", str(lo + n // 100), "--series", "loss"])
        print(json.dumps(out, indent=1))
    finally:
        os.remove(path)
        os.rmdir(d)


if __name__ == "__main__":
    main()
