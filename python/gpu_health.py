"""The GPUs' health now, and the GPU timeline kg_record.py's sampler recorded beside a run.

    gpu_health.py [--timeline RUN] [--no-now] [--max-samples N]

Now: one reading of nvidia-smi (kg_gpu: per GPU its clocks against their maxima, power and limit, temperature,
memory, clock-event reasons, PCIe link, ECC, retired pages and remapped rows; the processes on each GPU with their
users). Without nvidia-smi it says so once ("no nvidia-smi on this host") and reads nothing.

--timeline RUN: the samples of RUN/.known-good/gpu-timeline.jsonl (and its rotated .1 file, and the same files under
~/.known-good/runs/<hash>/ where kg_record.py --home keeps them), oldest first, with every launch's header and end.
A long timeline is thinned to at most --max-samples samples (default 1000) in one pass of bounded memory: every
sample where a GPU's reasons, link, ECC, retired pages or remapped rows or the set of processes changed is kept
first (with the sample before it), then the first and last of each launch, then an even spread of the rest.
stdlib only.
"""
import json
import os
import sys

# imported as the other probes import theirs: from the script's folder, or as sent (kg_modules) where there is no
# file (Fleet's program on stdin, the resident helper): no __file__ to find a folder from
import kg_common
import kg_gpu
import launch_sources

NO_SMI = "no nvidia-smi on this host"
DEFAULT_MAX_SAMPLES = 1000
MAX_READ_BYTES = 256 << 20
MAX_LINE = 1 << 20
MAX_MARKS = 2000


def read_now():
    smi = kg_gpu.find_smi()
    if not smi:
        return None, {"nvidiaSmi": None, "said": NO_SMI, "now": None, "nowError": None}
    try:
        reader = kg_gpu.Reader(smi, preexec_fn=kg_common.lift_limits)
        doc = reader.sample()
        doc["fields"] = reader.fields()
        return smi, {"nvidiaSmi": smi, "said": None, "now": doc, "nowError": None}
    except kg_gpu.SmiError as e:
        return smi, {"nvidiaSmi": smi, "said": None, "now": None, "nowError": str(e)}
    except OSError as e:
        return smi, {"nvidiaSmi": smi, "said": None, "now": None, "nowError": "cannot run %s: %s" % (smi, e)}


def timeline_files(run):
    """The timeline's files, oldest first: the run folder's, then kg_record --home's."""
    folders = [os.path.join(run, ".known-good"), os.path.dirname(launch_sources.home_records(run))]
    out = []
    for d in folders:
        for name in (kg_gpu.ROTATED_NAME, kg_gpu.TIMELINE_NAME):
            p = os.path.join(d, name)
            if os.path.lexists(p):
                out.append(p)
    return out


def signature(s):
    """What a sample says that does not wander: the reasons, link, ECC, pages and rows of each GPU, which processes."""
    gpus = [(g.get("index"), g.get("reasons"), g.get("pcieGen"), g.get("pcieWidth"), g.get("eccUncorrected"),
             g.get("retiredSbe"), g.get("retiredDbe"), g.get("retiredPending"), g.get("remappedUncorrectable"),
             g.get("remappedPending"), g.get("remappedFailure")) for g in s.get("gpus") or [] if isinstance(g, dict)]
    procs = sorted((p.get("gpu") or -1, p.get("pid") or 0) for p in s.get("processes") or [] if isinstance(p, dict))
    return json.dumps([gpus, procs], sort_keys=True, default=str)


class Thinner(object):
    """Samples kept in bounded memory, by rank: a launch's first and last (2), a change and the sample before it (1),
    an even spread of the rest (0). Past twice the budget, every other sample of the lowest rank held goes (and the
    spread of new ones halves with it)."""

    def __init__(self, budget):
        self.budget = budget
        self.kept = []  # [sample, rank]
        self.stride = 1
        self.count = 0
        self.prev = None
        self.prev_kept = False
        self.prev_sig = None
        self.thinned = False

    def _keep(self, s, rank):
        self.kept.append([s, rank])
        if len(self.kept) > 2 * self.budget:
            self._halve()

    def _halve(self):
        ranks = sorted(set(r for _, r in self.kept))
        low = ranks[0]
        if low == 2 and len(self.kept) > self.budget:
            self.kept = self.kept[-self.budget:]  # launch edges only: the newest ones
            self.thinned = True
            return False
        out = []
        j = 0
        for item in self.kept:
            if item[1] == low:
                j += 1
                if j % 2 == 0:
                    continue
            out.append(item)
        self.thinned = True
        if low == 0:
            self.stride *= 2
        changed = len(out) < len(self.kept)
        self.kept = out
        return changed

    def sample(self, s):
        sig = signature(s)
        first = self.prev is None
        changed = self.prev_sig is not None and sig != self.prev_sig
        if changed and self.prev is not None and not self.prev_kept:
            self._keep(self.prev, 1)
        keep = first or changed or self.count % self.stride == 0
        self.count += 1
        if keep:
            self._keep(s, 2 if first else 1 if changed else 0)
        self.prev, self.prev_kept, self.prev_sig = s, keep, sig

    def edge(self):
        """A launch ended or began: its last sample is kept, the next one starts afresh."""
        if self.prev is not None and not self.prev_kept:
            self._keep(self.prev, 2)
        elif self.prev is not None and self.kept and self.kept[-1][0] is self.prev:
            self.kept[-1][1] = 2
        self.prev = None
        self.prev_kept = False
        self.prev_sig = None

    def result(self):
        self.edge()
        while len(self.kept) > self.budget and self._halve():
            pass
        return [s for s, _ in self.kept]


def read_timeline(run, max_samples):
    files = timeline_files(run)
    out = {"run": run, "files": [], "headers": [], "ends": [], "samples": [], "total": 0, "kept": 0, "skipped": 0,
           "truncated": None, "errors": []}
    thin = Thinner(max_samples)
    read = 0
    notes = []
    for path in files:
        try:
            f = kg_common.open_regular(path)
        except kg_common.ProbeError as e:
            out["errors"].append(str(e))
            continue
        with f:
            size = os.fstat(f.fileno()).st_size
            out["files"].append({"path": path, "bytes": size})
            while True:
                if read >= MAX_READ_BYTES:
                    notes.append("reading stopped after %s" % kg_common.format_bytes(MAX_READ_BYTES))
                    break
                line = f.readline(MAX_LINE + 1)
                if not line:
                    break
                read += len(line)
                if len(line) > MAX_LINE or not line.endswith(b"\n"):
                    # a line past the limit, or the one the sampler is writing now
                    if len(line) > MAX_LINE:
                        while line and not line.endswith(b"\n"):
                            line = f.readline(MAX_LINE + 1)
                            read += len(line)
                    out["skipped"] += 1
                    continue
                try:
                    doc = json.loads(line.decode("utf-8", "replace"))
                except (ValueError, RecursionError):
                    out["skipped"] += 1
                    continue
                if not isinstance(doc, dict):
                    out["skipped"] += 1
                    continue
                kind = doc.get("kind")
                if kind == "sample":
                    out["total"] += 1
                    thin.sample(doc)
                elif kind in ("header", "end"):
                    thin.edge()
                    marks = out["headers" if kind == "header" else "ends"]
                    if len(marks) < MAX_MARKS:
                        marks.append(doc)
                else:
                    out["skipped"] += 1
    out["samples"] = thin.result()
    out["kept"] = len(out["samples"])
    if thin.thinned:
        notes.append("%d of %d samples kept (every change of reasons, link, ECC or processes first)"
                     % (out["kept"], out["total"]))
    out["truncated"] = "; ".join(notes) or None
    return out


def main(argv):
    p = kg_common.arg_parser("gpu_health.py")
    p.add_argument("--timeline", default=None)
    p.add_argument("--no-now", action="store_true")
    p.add_argument("--max-samples", type=int, default=DEFAULT_MAX_SAMPLES)
    a = p.parse_args(argv)
    if not 10 <= a.max_samples <= 20000:
        raise kg_common.ProbeError("gpu_health: --max-samples takes 10 to 20000", "bad-args")
    if a.no_now:
        doc = {"nvidiaSmi": kg_gpu.find_smi(), "said": None, "now": None, "nowError": None}
        if not doc["nvidiaSmi"]:
            doc["said"] = NO_SMI
    else:
        _, doc = read_now()
    doc["timeline"] = read_timeline(a.timeline, a.max_samples) if a.timeline else None
    for g in (doc["now"] or {}).get("gpus", []):
        sys.stderr.write("GPU %s %s: %s%% SM %s/%s MHz %s/%s W %s C reasons %s\n" % (
            g.get("index"), g.get("name"), g.get("util"), g.get("smClock"), g.get("smClockMax"), g.get("power"),
            g.get("powerLimit"), g.get("temp"), ",".join(g.get("reasons") or []) or "none"))
    if doc["said"]:
        sys.stderr.write(doc["said"] + "\n")
    return doc


if __name__ == "__main__":
    kg_common.run(main)
