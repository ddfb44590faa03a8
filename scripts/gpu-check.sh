#!/usr/bin/env bash
# Checks the probes on a real GPU box (torch + CUDA): run from the repo root. Writes logs and JSON to $OUT (or ./gpu-check-out).
# Used with the device tool here; any GPU box with a torch-enabled python3 works.
set -u
OUT=${OUT:-gpu-check-out}; mkdir -p "$OUT"
PY=${PY:-python3}
export PYTHONUNBUFFERED=1
# Timings go to stderr so stdout redirections keep clean JSON.
t() { local s; s=$(date +%s.%N); "$@"; local rc=$?; echo "  ($(python3 -c "import time;print('%.2f s'%(time.time()-$s))") rc=$rc)" >&2; return $rc; }
echo "== machine"; $PY -c "import sys,torch;print(sys.executable, sys.version.split()[0], 'torch', torch.__version__, torch.version.git_version[:12], 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

echo "== env_snapshot (no torch import) x3, collect_env x3"
for i in 1 2 3; do t $PY python/env_snapshot.py > "$OUT/env_snapshot.json"; done
for i in 1 2 3; do t $PY -m torch.utils.collect_env > "$OUT/collect_env.txt" 2>&1; done
$PY - "$OUT/env_snapshot.json" <<'PY'
import json,sys
d=json.load(open(sys.argv[1]))
print("tookMs", d.get("tookMs"), "timings", d.get("timings"), "errors", d.get("errors"))
print("torch", {k: d["torch"].get(k) for k in ("version","gitVersion","git","cuda","hip","debug") if k in d["torch"]})
g=d.get("gpus",{}); print("gpus", g.get("status"), len(g.get("gpus") or []), (g.get("gpus") or [None])[0])
print("cuda", d.get("cuda")); print("packages", len(d.get("python",{}).get("packages") or {}), "triton", (d.get("python",{}).get("packages") or {}).get("triton"))
PY
t $PY python/env_snapshot.py --deep > "$OUT/env_deep.json"; $PY -c "import json;print('deep', json.load(open('$OUT/env_deep.json')).get('deepInfo'))"

echo "== ckpt_args on a 1 GB torch 2.x checkpoint vs torch.load"
$PY -c 'import torch,argparse; torch.save({"args": argparse.Namespace(lr=3e-4, batch_size=32, dtype=torch.bfloat16), "model": {"w": torch.zeros(256*1024*1024)}, "step": 690}, "/tmp/g1.pt")'
t $PY -c 'import resource,sys,time,json; sys.path.insert(0,"python"); t=time.time(); import ckpt_args; d=ckpt_args.main(["/tmp/g1.pt"]); print("ckpt_args %.3fs rss %d KB" % (time.time()-t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss), json.dumps(d["args"]), d["tensors"], d.get("bytesRead"), d["unsafeGlobals"])'
t $PY -c 'import resource,time; t=time.time(); import torch; c=torch.load("/tmp/g1.pt", map_location="cpu", weights_only=False); print("torch.load %.3fs rss %d KB" % (time.time()-t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss), c["args"])'
$PY -c 'import torch; torch.load("/tmp/g1.pt")' 2>&1 | tail -1 | cut -c1-200
rm -f /tmp/g1.pt
KG_TORCH_PYTHON="$(command -v $PY)" t $PY -m unittest discover -s test/python -p 'test_ckpt_args.py' > "$OUT/test_ckpt_args.log" 2>&1; tail -4 "$OUT/test_ckpt_args.log"
KG_TORCH_PYTHON="$(command -v $PY)" t $PY -m unittest discover -s test/python -p 'test_write_checkpoint.py' > "$OUT/test_write_checkpoint.log" 2>&1; tail -3 "$OUT/test_write_checkpoint.log"
t $PY -m unittest discover -s test/python -p 'test_env_snapshot.py' > "$OUT/test_env_snapshot.log" 2>&1; tail -3 "$OUT/test_env_snapshot.log"
t $PY -m unittest discover -s test/python -p 'test_list_runs.py' > "$OUT/test_list_runs.log" 2>&1; tail -3 "$OUT/test_list_runs.log"

echo "== throughput_bench on the GPU"
for v in "" "--compile" "--attention flex --compile"; do
  n=$(echo "x $v" | tr -c 'a-z\n' '_')
  timeout 240 $PY python/throughput_bench.py --device cuda $v > "$OUT/bench$n.json" 2> "$OUT/bench$n.log"; echo "[$v] rc=$?"; tail -2 "$OUT/bench$n.log"
  $PY -c "import json,sys; d=json.load(open(sys.argv[1])); c=d['config']; print(c['attentionUsed'], 'compiled' if c['compile'] else 'eager', 'tok/s %.0f (min %.0f max %.0f)' % (d['tokensPerSec']['median'], d['tokensPerSec']['min'], d['tokensPerSec']['max']), 'step %.1f ms' % d['stepMs']['median'], 'TFLOP/s %.1f' % d['tflops'], 'compile %s s' % d['compileS'], 'peak %.1f GiB' % (d['peakMemoryBytes']/2**30), d['warnings'])" "$OUT/bench$n.json" 2>&1 | tail -1
done
echo "== done"

echo "== metrics_reduce on a 1,000,000-line train log (preview, exact by jobs, reopen, zoom)"
t $PY scripts/metrics_check.py > "$OUT/metrics_check.json"; cat "$OUT/metrics_check.json"
t $PY -m unittest discover -s test/python -p 'test_metrics_reduce.py' > "$OUT/test_metrics_reduce.log" 2>&1; tail -3 "$OUT/test_metrics_reduce.log"
