#!/usr/bin/env bash
# Issue 12/13 checks on a real GPU box (torch 2.11 + tensorboard): run from the repo root; logs/JSON to $OUT.
#   the TensorBoard reader vs tensorboard's EventAccumulator (scripts/tb_check.py), env_snapshot's torch.version vs
#   torch.__version__, and the whole Python test suite with that box's torch as the checkpoint writer.
set -u
OUT=${OUT:-gpu-check-out}; mkdir -p "$OUT"
PY=${PY:-python3}
export PYTHONUNBUFFERED=1
t() { local s; s=$(date +%s.%N); "$@"; local rc=$?; echo "  ($(python3 -c "import time;print('%.2f s'%(time.time()-$s))") rc=$rc)" >&2; return $rc; }
echo "== machine"
$PY -c "import sys,torch,tensorboard;print(sys.version.split()[0], 'torch', torch.__version__, 'tensorboard', tensorboard.__version__, torch.cuda.get_device_name(0))"
echo "== env_snapshot torch.version vs torch.__version__"
t $PY python/env_snapshot.py > "$OUT/env_snapshot.json"
$PY - "$OUT/env_snapshot.json" <<'PY'
import json, sys, torch
d = json.load(open(sys.argv[1]))
print("snapshot", d["torch"].get("version"), d["torch"].get("distVersion"), "| torch says", torch.__version__, "| equal:", d["torch"].get("version") == torch.__version__)
PY
echo "== TensorBoard: our reader vs EventAccumulator (1,000,000 scalars each: torch SummaryWriter and our writer)"
t timeout 300 $PY scripts/tb_check.py /tmp/tbc --steps 250000 > "$OUT/tb_check.json" 2> "$OUT/tb_check.log"; tail -3 "$OUT/tb_check.log"; head -c 4000 "$OUT/tb_check.json"; echo
echo "== Python tests with this box's torch"
KG_TORCH_PYTHON="$(command -v $PY)" t timeout 240 $PY -m unittest discover -s test/python -p 'test_*.py' > "$OUT/test_python.log" 2>&1; tail -5 "$OUT/test_python.log"
grep -E "^(FAIL|ERROR):" "$OUT/test_python.log" | head -20
echo "== done"
