#!/usr/bin/env bash
# The runtime checker on a CUDA machine, in about seven minutes on one GPU: profile and verify on the
# CPU fixtures (now with NVML sampling), then on a small CUDA model (sync lines mapped to rules, the
# pin_memory/non_blocking fixes and TF32 verified, AMP measured against a hand-made autocast copy),
# then the capacity figures: FLOPs and MFU against the GPU's listed peak (fp32 and bf16), memory
# headroom, a batch-size sweep that runs out of device memory on purpose, a profile under torchrun
# (NCCL, DDP's CUDA-event timers) and, with two GPUs or more, `gpulint scale` 1 -> 2.
# Prints one summary line per check at the end.  Not run in CI (no GPU there).
#
#   scripts/gpu-check.sh            # uses .venv/bin/python when present, else python3
#   PYTHON=/path/to/python scripts/gpu-check.sh
#   GPU_CHECK_KEEP=/path/to/checks.tar.gz scripts/gpu-check.sh   # keep the logs and JSON documents
set -u

cd "$(dirname "$0")/.."
PY="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
GPULINT=("$PY" -m gpulint.runtime_check)
WORK="$(mktemp -d -t gpulint-gpu-check-XXXXXX)"
# The logs and --json documents are kept as a tarball when GPU_CHECK_KEEP names one.
trap '[ -n "${GPU_CHECK_KEEP:-}" ] && tar -czf "$GPU_CHECK_KEEP" -C "$WORK" .; rm -rf "$WORK"' EXIT
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
# Capacity on one GPU, from the two CUDA profiles above: MFU (fp32 and bf16 peaks), memory headroom.
# capacity KIND FILE: one summary line from a --json document (profile, sweep, torchrun or scale).
capacity() { "$PY" - "$1" "$2" <<'EOF'
import json, sys
kind, path = sys.argv[1:]
try:
    d = json.load(open(path))
except Exception as exc:
    sys.exit(print(f"? ({exc.__class__.__name__})"))
figures = lambda group: [(f["name"], f["value"], f["note"][:60]) for f in group["figures"]]
if kind == "profile":
    c = d["compute"]
    mfu = c["mfu"]["value"]
    print(f"device={c['device']} flops/step={c['flops_per_step']['value']} by_math={c['by_math']} "
          f"achieved={(c['achieved']['value'] or 0) / 1e12:.2f} TFLOP/s peak={c['peak']['value']} "
          f"MFU={'%.1f%%' % (100 * mfu) if mfu is not None else 'not measured: ' + c['mfu']['note']} "
          f"memory={figures(d['memory'])} advice={d['memory']['advice']}")
elif kind == "sweep":
    print(f"out_of_memory={[v['value'] for v in d['values'] if v['out_of_memory']]} "
          f"throughput={[(v['value'], v['throughput']) for v in d['values']]} {d['throughput_unit']} "
          f"recommended={(d['batch_advice'] or {}).get('recommended')}")
elif kind == "torchrun":
    r = d["ranks"]
    print(f"verdict={d['verdict']['headline']} backend={r['ddp_config']['backend_name']} "
          f"collective_wait_ms={[round(1000 * (x['collective_wait'] or 0), 2) for x in r['ranks']]} "
          f"allreduce_ms={[round(1000 * (x['allreduce_time'] or 0), 2) for x in r['ranks']]} "
          f"memory={figures(d['memory'])} MFU={d['compute']['mfu']['value']}")
else:
    efficiencies = [(e["nproc"], e["efficiency"], e["interval"]) for e in d["efficiencies"]]
    print(f"verdict={d['verdict']} efficiency={efficiencies}")
EOF
}
SUMMARY+=("capacity cuda-model: $(capacity profile "$WORK/p2.json")")
SUMMARY+=("capacity cuda-model-amp: $(capacity profile "$WORK/p3.json")")

# A batch-size sweep whose largest size cannot fit: 4 MiB of activations per sample.
cat > "$WORK/batch_oom.py" <<'EOF'
import argparse
import torch
from torch.utils.data import DataLoader, RandomSampler, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=64)
args = parser.parse_args()
data = TensorDataset(torch.randn(4096, 1))
sampler = RandomSampler(data, replacement=True, num_samples=10**7)
loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)
model = torch.nn.Sequential(torch.nn.Linear(1, 2**20), torch.nn.ReLU(), torch.nn.Linear(2**20, 1)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
for (x,) in loader:
    model(x.cuda()).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
EOF
timeout 300 "${GPULINT[@]}" verify "$WORK/batch_oom.py" --param batch_size=64,256,1000000 --runs 2 --steps 10 \
    --warmup 3 --timeout 120 --python "$PY" --json "$WORK/b1.json" > "$WORK/batch-sweep.log" 2>&1
SUMMARY+=("batch sweep: rc=$? $(capacity sweep "$WORK/b1.json")")

# Under torchrun with NCCL: one rank on one GPU, two when there are two.
GPUS=$("$PY" -c 'import torch; print(torch.cuda.device_count())')
RANKS=$(( GPUS >= 2 ? 2 : 1 ))
timeout 240 "${GPULINT[@]}" profile --steps 10 --warmup 3 --timeout 200 --json "$WORK/p5.json" -- \
    "$PY" -m torch.distributed.run --standalone --nproc-per-node "$RANKS" \
    fixtures/runtime/ddp_sleep_compute.py --gradient-mb 64 --compute-ms 20 > "$WORK/torchrun.log" 2>&1
SUMMARY+=("profile torchrun x$RANKS (nccl): rc=$? $(capacity torchrun "$WORK/p5.json")")
if [ "$GPUS" -ge 2 ]; then
    for variant in "scales:--compute-ms 300" "communication:--gradient-mb 256 --compute-ms 5"; do
        name="${variant%%:*}"
        # shellcheck disable=SC2086  # the fixture's options are meant to split
        timeout 300 "${GPULINT[@]}" scale --nproc 1,2 --runs 2 --steps 10 --warmup 3 --timeout 120 \
            --json "$WORK/s-$name.json" -- fixtures/runtime/ddp_sleep_compute.py ${variant#*:} \
            > "$WORK/scale-$name.log" 2>&1
        SUMMARY+=("scale 1->2 ($name fixture): rc=$? $(capacity scale "$WORK/s-$name.json")")
    done
else
    SUMMARY+=("scale: skipped ($GPUS GPU: it needs two)")
fi

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
