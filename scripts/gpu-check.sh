#!/usr/bin/env bash
# The runtime checker on a CUDA machine, in under five minutes: profile and verify on the CPU
# fixtures (now with NVML sampling), then on a small CUDA model (sync lines mapped to rules, the
# pin_memory/non_blocking fixes and TF32 verified, AMP measured against a hand-made autocast copy).
# Prints one summary line per check at the end.  Not run in CI (no GPU there).
#
#   scripts/gpu-check.sh            # uses .venv/bin/python when present, else python3
#   PYTHON=/path/to/python scripts/gpu-check.sh
set -u

cd "$(dirname "$0")/.."
PY="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
GPULINT=("$PY" -m gpulint.runtime_check)
WORK="$(mktemp -d -t gpulint-gpu-check-XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
SUMMARY=()
START=$SECONDS

if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "gpu-check: torch sees no CUDA device here; nothing to check" >&2
    exit 2
fi
"$PY" -c 'import pynvml; pynvml.nvmlInit(); print("NVML driver", pynvml.nvmlSystemGetDriverVersion())' \
    || echo "gpu-check: NVML unavailable: GPU utilization will read 'not measured'"

# json FILE EXPR: evaluate a Python expression on the JSON document `d` (prints "?" when missing).
json() { "$PY" - "$1" "$2" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    print(eval(sys.argv[2]))
except Exception as exc:
    print(f"? ({exc.__class__.__name__})")
EOF
}

profile() {  # name json-file args...
    local name="$1" out="$2"; shift 2
    timeout 120 "${GPULINT[@]}" profile --steps 30 --warmup 5 --timeout 100 --json "$out" -- "$PY" "$@" > "$WORK/$name.log" 2>&1
    local rc=$?
    SUMMARY+=("profile $name: rc=$rc verdict=$(json "$out" 'd["verdict"]["headline"]') data=$(json "$out" 'round(100*(d["steps"]["data_share"] or 0),1)')% step=$(json "$out" 'round(1000*d["steps"]["mean"],2)')ms gpu=$(json "$out" '"%.0f%%" % d["gpu"]["util_mean"] if d["gpu"] else "not measured"') syncs=$(json "$out" '[(s["where"].rsplit("/",1)[-1], s["rule"], round(s["per_step"],1)) for s in d["syncs"] or []]')")
}

verify() {  # name json-file script select runs
    local name="$1" out="$2" script="$3" select="$4" runs="$5"
    timeout 170 "${GPULINT[@]}" verify "$script" --select "$select" --runs "$runs" --steps 20 --warmup 5 --timeout 50 --python "$PY" --json "$out" > "$WORK/$name.log" 2>&1
    local rc=$?
    SUMMARY+=("verify $name ($select): rc=$rc outcome=$(json "$out" 'd["comparison"]["outcome"]') speedup=$(json "$out" 'round(d["comparison"]["speedup"],2)')x interval=$(json "$out" 'tuple(round(x,2) for x in d["comparison"]["interval"])')")
}

# A small CUDA model with the classic mistakes: pageable memory, blocking copies, a per-step
# .item(), fp32 matmuls.  Data comes from an in-memory pool so the GPU side dominates.
cat > "$WORK/cuda_model.py" <<'EOF'
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Pool(Dataset):
    def __init__(self):
        self.images = torch.randn(64, 3, 64, 64)

    def __len__(self):
        return 16384

    def __getitem__(self, index):
        return self.images[index % 64], index % 100


device = torch.device("cuda")
model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 64 * 64, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 100)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(Pool(), batch_size=512, shuffle=True, num_workers=4)
losses = []
for epoch in range(3):
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        loss = nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
EOF
# The same model under bf16 autocast (GL401 has no automatic fix: AMP is measured by hand).
sed 's/        loss = nn.functional.cross_entropy(model(images), labels)/        with torch.autocast("cuda", dtype=torch.bfloat16):\n            loss = nn.functional.cross_entropy(model(images), labels)/' \
    "$WORK/cuda_model.py" > "$WORK/cuda_model_amp.py"

profile torch-fixture "$WORK/p1.json" fixtures/runtime/torch_slow_loader.py
verify torch-fixture "$WORK/v1.json" fixtures/runtime/torch_slow_loader.py GL101 3
profile cuda-model "$WORK/p2.json" "$WORK/cuda_model.py"
profile cuda-model-amp "$WORK/p3.json" "$WORK/cuda_model_amp.py"
SUMMARY+=("AMP (bf16 autocast) speedup from the two profiles: $("$PY" -c "import json; a=json.load(open('$WORK/p2.json'))['steps']['mean']; b=json.load(open('$WORK/p3.json'))['steps']['mean']; print(round(a/b, 2))" 2>/dev/null || echo '?')x (one run each: indicative, not confirmed)")
verify cuda-pin-nonblocking "$WORK/v2.json" "$WORK/cuda_model.py" GL102,GL104 2
verify cuda-tf32 "$WORK/v3.json" "$WORK/cuda_model.py" GL404 2
if "$PY" -c 'import tensorflow' 2>/dev/null; then
    profile tf-fixture "$WORK/p4.json" fixtures/runtime/tf_slow_map.py
else
    SUMMARY+=("profile tf-fixture: skipped (tensorflow not importable)")
fi

echo
echo "== gpulint gpu-check summary ($((SECONDS - START)) s, $("$PY" -c 'import torch; print(torch.cuda.get_device_name(0))')) =="
for line in "${SUMMARY[@]}"; do echo "  $line"; done
for log in "$WORK"/*.log; do
    if grep -q "Traceback\|error:" "$log"; then echo "--- $(basename "$log") (tail)"; tail -n 15 "$log"; fi
done
