"""Environment bisect on the GPU box (issue 26): five env changes, one of them CUDA_LAUNCH_BLOCKING=1, bisected with
python/throughput_bench.py on CUDA (small kernels: a launch-bound step, where a synchronous launch shows).

The box has no Node, so this script only MEASURES: it asks for the states src/core/bisect/engine.ts asks for (same
rules, docs/bisect.md: each round's states interleaved, 3 runs each, an unclear round extended once) and writes every
run to OUT.json; `node --import tsx scripts/gpu/replay-bisect.ts OUT.json` feeds those runs, in order, to the real
engine and prints its report (it fails if the engine asks for another state than the box measured). Kept small: it
travels zlib+base64 in one command line (KG_BENCH then says where the benchmark is).

    python3 scripts/gpu/env_bisect.py OUT.json [EARLIER.json]

One device call is at most 10 minutes and a fresh process per run costs ~13 s there, so a bisect may need two calls:
EARLIER.json (the OUT.json of a cut-off call) replays its runs in order, for the states the engine asks for again,
and the new call measures from where the earlier one stopped.
"""
import json
import os
import subprocess as sp
import sys
import time

B = os.environ.get("KG_BENCH") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../python",
                                               "throughput_bench.py")
# KG_BISECT_ARGS: the benchmark's arguments (the 2026-12-01 calls used the default; more timed steps and warm-up
# steps narrow a fresh process's spread on a launch-bound step, see docs/gpu-results.md)
ARGS = (os.environ.get("KG_BISECT_ARGS")
        or "--device cuda --layers 12 --width 512 --heads 8 --seq 256 --batch 4 --steps 12 --warmup 2").split()
CH = [("HF_HUB_OFFLINE", "1"), ("NCCL_DEBUG", "WARN"), ("TOKENIZERS_PARALLELISM", "false"),
      ("CUDA_LAUNCH_BLOCKING", "1"), ("TORCH_HOME", "/tmp/kg-th")]
IDS = ["env:" + n for n, _ in CH]
runs = []
prior = json.load(open(sys.argv[2]))["runs"] if len(sys.argv) > 2 else []


def med(v):
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def spr(v):
    s = sorted(v)
    s = s[1:-1] if len(s) >= 6 else s
    return s[0], s[-1]


def judge(x, r):
    c = (med(x) - med(r)) / med(r)
    (xl, xh), (rl, rh) = spr(x), spr(r)
    d = "same" if abs(c) < .05 else "slower" if c < 0 and xh < rl else "faster" if c > 0 and xl > rh else "unclear"
    return d, c


def measure(a):
    if prior and prior[0]["applied"] == sorted(a):
        runs.append(prior.pop(0))
        return runs[-1]["value"]
    prior.clear()  # the engine asked for something else: measure from here on
    env = {k: v for k, v in os.environ.items() if k not in dict(CH)}
    env.update({n: v for (n, v), i in zip(CH, IDS) if i in a})
    t = time.time()
    out = sp.run([sys.executable, B] + ARGS, env=env, stdout=sp.PIPE, stderr=sp.DEVNULL, check=True).stdout
    v = json.loads(out)["tokensPerSec"]["median"]
    runs.append({"applied": sorted(a), "value": v, "wallS": round(time.time() - t, 2)})
    print(sorted(a), round(v), round(time.time() - t, 1), flush=True)
    doc = {"changes": [{"id": i, "label": "%s=%s (added)" % c} for i, c in zip(IDS, CH)], "benchArgs": ARGS,
           "runs": runs}
    with open(sys.argv[1], "w") as f:
        json.dump(doc, f)
    return v


def rnd(states, j, extend=lambda d: False):
    s = [[] for _ in states]
    for _ in (0, 1):
        for _ in range(3):
            for i, a in enumerate(states):
                s[i].append(measure(a))
        d = j(s)
        if not any(x[0] == "unclear" for x in d) and not extend(d):
            break
    print(d, flush=True)
    return d


def minor(x, slow):
    """The engine's rule: beside a half trusted slower, a half unclear above good, or nearer good than the slower
    half, does not hold the cause (the confirmation round still has to hold)."""
    return x[0] in ("same", "faster") or (x[0] == "unclear" and (x[1] > 0 or x[1] > slow[1] / 2))


if rnd([[], IDS], lambda s: [judge(s[1], s[0])])[0][0] == "slower":
    c = IDS
    while len(c) > 1:
        h = (len(c) + 1) // 2
        a, b = c[:h], c[h:]
        da, db = rnd([[], a, b], lambda s: [judge(s[1], s[0]), judge(s[2], s[0])])
        if da[0] == "slower" and minor(db, da):
            c = a
        elif db[0] == "slower" and minor(da, db):
            c = b
        else:
            break
    # the engine measures a failed confirmation once more before it reports it failed
    rnd([[], IDS, [i for i in IDS if i not in c], c],
        lambda s: [judge(s[2], s[1]), judge(s[2], s[0]), judge(s[3], s[0])],
        lambda d: not (d[0][0] == "faster" and d[1][0] in ("same", "faster") and d[2][0] == "slower"))
