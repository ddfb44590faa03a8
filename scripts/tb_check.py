"""Check the stdlib TensorBoard reader (python/metrics_tb.py, behind python/metrics_reduce.py) against tensorboard's
own EventAccumulator.

    python3 scripts/tb_check.py OUTDIR [--steps 250000]

Writes two event files of 4 tags x STEPS scalars, one with torch.utils.tensorboard.SummaryWriter and one with the
project's own writer (scripts/fixtures/tfevents_writer.py), loads each with EventAccumulator (time, peak RSS, in a
child process) and with our reader (exact, every point; the reduction as the dashboard asks for it, exact and
preview), and compares every point. Needs torch and tensorboard (the GPU box has both). Prints one JSON document.
"""
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(HERE, "fixtures"))

TAGS = ("train/loss", "train/tok_per_s", "train/lr", "train/grad_norm")


def write_torch(path_dir, steps):
    from torch.utils.tensorboard import SummaryWriter

    import tfevents_writer

    w = SummaryWriter(path_dir)
    for step in range(steps):
        for tag in TAGS:
            w.add_scalar(tag, tfevents_writer.values(tag, step, steps * 3 // 5), step, walltime=1.7e9 + step * 0.5)
    w.close()
    return [os.path.join(path_dir, f) for f in os.listdir(path_dir) if f.startswith("events.out.tfevents")][0]


ACC = r"""
import json, resource, sys, time
t = time.time()
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
acc.Reload()
out = {t: [[e.step, e.value, e.wall_time] for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}
secs = time.time() - t
json.dump(out, open(sys.argv[2], "w"))
print(json.dumps({"seconds": round(secs, 2), "maxRssMb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))
"""

OURS = r"""
import json, os, resource, sys, time
sys.path.insert(0, sys.argv[3])
import metrics_tb as m
t = time.time()
r = m.TfEventsReader()
cols = {}
class Sink(object):
    def add(self, tag, steps, walls, vals):
        c = cols.setdefault(tag, ([], [], []))
        c[0].extend(steps); c[1].extend(vals); c[2].extend(walls)
    def emit(self, wall, step, pairs):
        for tag, v in pairs:
            self.add(tag, [float(step)], [wall], [v])
with open(sys.argv[1], "rb") as f:
    end = m.scan_columns(r, f, 0, os.path.getsize(sys.argv[1]), Sink())
secs = time.time() - t
json.dump({t: [list(x) for x in zip(*c)] for t, c in cols.items()}, open(sys.argv[2], "w"))
print(json.dumps({"seconds": round(secs, 2), "maxRssMb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                  "end": end, "stats": r.stats()}))
"""


def run_child(code, *args):
    r = subprocess.run([sys.executable, "-c", code] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if r.returncode != 0:
        return {"error": r.stderr[-2000:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def reduce_cli(path, *extra):
    t = time.time()
    r = subprocess.run([sys.executable, os.path.join(ROOT, "python", "metrics_reduce.py"), path] + list(extra),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    wall = time.time() - t
    if r.returncode != 0:
        return {"error": r.stderr[-2000:]}
    d = json.loads(r.stdout)
    return {"wallSeconds": round(wall, 3), "elapsedMs": d["elapsedMs"], "jobs": d["jobs"], "lines": d["lines"],
            "bytesRead": d["bytesRead"], "sample": d["sample"], "tensorboard": d.get("tensorboard"),
            "series": {s["key"]: s["count"] for s in d["series"]}}


def compare(a_path, b_path):
    a = json.load(open(a_path))
    b = json.load(open(b_path))
    out = {"tags": sorted(a) == sorted(b), "points": 0, "mismatches": 0}
    for tag in a:
        pa, pb = a[tag], b.get(tag, [])
        if len(pa) != len(pb):
            out["mismatches"] += abs(len(pa) - len(pb))
        for x, y in zip(pa, pb):
            out["points"] += 1
            if not (float(x[0]) == float(y[0]) and x[1] == y[1] and abs(x[2] - y[2]) < 1e-6):
                out["mismatches"] += 1
    return out


def main():
    outdir = sys.argv[1]
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 250000
    os.makedirs(outdir, exist_ok=True)
    import tfevents_writer

    report = {"steps": steps, "tags": len(TAGS)}
    t = time.time()
    files = {"torch": write_torch(os.path.join(outdir, "torch"), steps)}
    report["torchWriteSeconds"] = round(time.time() - t, 1)
    os.makedirs(os.path.join(outdir, "ours"), exist_ok=True)
    files["ours"] = os.path.join(outdir, "ours", "events.out.tfevents.1700000000.kg")
    tfevents_writer.write(files["ours"], steps, TAGS, steps * 3 // 5)
    for name, path in files.items():
        rep = {"bytes": os.path.getsize(path)}
        rep["eventAccumulator"] = run_child(ACC, path, path + ".acc.json")
        rep["oursAllPoints"] = run_child(OURS, path, path + ".ours.json", os.path.join(ROOT, "python"))
        if "error" not in rep["eventAccumulator"] and "error" not in rep["oursAllPoints"]:
            rep["compare"] = compare(path + ".acc.json", path + ".ours.json")
        rep["reduceExact"] = reduce_cli(path)
        rep["reduceExact1Job"] = reduce_cli(path, "--jobs", "1")
        rep["reducePreview"] = reduce_cli(path, "--preview")
        rep["reduceVerifyAll"] = reduce_cli(path, "--verify", "--no-fast")
        report[name] = rep
        print(name, json.dumps(rep), file=sys.stderr, flush=True)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
