#!/usr/bin/env bash
# GPU benchmark, in ONE device call of at most 8 minutes on the H200 machine (../shared/device/README.md).
#
# Here, first:   ../shared/device/pack libicu-dev libicu72 libturbojpeg0-dev libturbojpeg0 libpng-dev libpng16-16 libgloo-dev
# Device call:   carry [".devdeps"], timeout_s 540,
#                command: set -o pipefail; bash bench/gpu.sh 2>&1 | tee $OUT/log
#
# Builds Trainyard against the machine's LibTorch (CUDA), checks that no training step makes the host
# wait for the GPU (bench/gpu/sync_check.yaml: 5 short runs under runtime.sync_debug: error, eager and
# CUDA-graph pairs whose losses must agree), trains ViT-B/16 at 224 px (batch 16 and 256) and
# DistilBERT at 512 tokens (batch 12 and 64) in 32-true, bf16-mixed and 16-mixed, each eagerly and
# with runtime.compile: cuda-graphs (24 short runs, 2 x 16 steps each; the database in $OUT keeps
# whatever finished if the call runs out of time), runs the same steps in PyTorch eager and Lightning
# Fabric, and writes the comparison to $OUT/summary.md (samples/s, MFU, peak memory, Trainyard's
# ratio to each). Commit $OUT's files under bench/results/gpu-<date>/.
#
# Stages, all by default: build sync throughput baselines summary. One more, only when named:
# study — the two studies' full 3-epoch runs on synthetic data of their datasets' sizes
# (bench/gpu/study_*.yaml, bf16-mixed with CUDA graphs; about 3 minutes).
# Plan for the 15 minutes of a session: call 1 as above; if 4 minutes or more are left, call 2 at
# once (the warm machine keeps build-gpu/): `bash bench/gpu.sh study summary`, timeout_s 300.
# Should call 1 run out of time before the baselines, rerun only them: `bash bench/gpu.sh baselines`,
# then, here, `python3 bench/gpu/compare.py <call 1>/gpu.db <call 2>/baselines.json > summary.md`.
set -euo pipefail
out=${OUT:-bench/results/gpu-local}
mkdir -p "$out"
stages=${*:-build sync throughput baselines summary}
wants() { [[ " $stages " == *" $1 "* ]]; }
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start ))s] $*"; }
db="$out/gpu.db"

if wants build; then
  stamp "build"
  bash .devdeps/build.sh -DTRAINYARD_TESTS=OFF
fi
dev="$PWD/.devdeps/root"
site=$(python3 -c 'import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))')
export LD_LIBRARY_PATH="$dev/usr/lib/x86_64-linux-gnu:$site/torch/lib:${LD_LIBRARY_PATH:-}"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "stages: $stages"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/gpu: /'
  python3 -c 'import torch; print("torch:", torch.__version__, "cuda:", torch.version.cuda)'
  nvcc --version | tail -1 | sed 's/^/nvcc: /'
} > "$out/environment.txt"
cat "$out/environment.txt"

if wants sync; then
  stamp "host synchronisation check (runtime.sync_debug: error)"
  # A small CIFAR-10 in the binary format (random pixels; 200 images a file) for the real image
  # path: the CIFAR-10 reader, crop-flip and ImageNet normalisation on the GPU.
  python3 - <<'PY'
import os, random
root = "/tmp/trainyard-bench/cifar-10-batches-bin"
os.makedirs(root, exist_ok=True)
rng = random.Random(0)
for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
    with open(os.path.join(root, name), "wb") as f:
        for _ in range(200):
            f.write(bytes([rng.randrange(10)]) + rng.randbytes(3072))
PY
  build-gpu/trainyard run bench/gpu/sync_check.yaml --db "$db" || true  # a failed run is recorded; go on
fi

if wants throughput; then
  for experiment in bench/gpu/vit_throughput.yaml bench/gpu/distilbert_throughput.yaml; do
    stamp "trainyard: $experiment"
    build-gpu/trainyard run "$experiment" --db "$db" || true
  done
  build-gpu/trainyard report --db "$db" -o "$out/trainyard.md"
fi

if wants study; then
  for experiment in bench/gpu/study_vit.yaml bench/gpu/study_distilbert.yaml; do
    stamp "trainyard: $experiment"
    build-gpu/trainyard run "$experiment" --db "$db" || true
  done
fi

if wants baselines; then
  stamp "baselines: PyTorch eager and Lightning Fabric"
  python3 bench/gpu/baselines.py --out "$out/baselines.json"
fi

if wants summary; then
  python3 bench/gpu/compare.py "$db" "$out/baselines.json" | tee "$out/summary.md"
fi
stamp "done"
