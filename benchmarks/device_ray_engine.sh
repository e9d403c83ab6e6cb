#!/usr/bin/env bash
# For a lent GPU machine (16 cores, one GPU; the `device` tool): the Ray engine against the local
# engine with 2 and 16 CPUs, then with the embedding stage on the GPU (one actor holding it).
# Needs .venv with the scale extra and the data mirror in $CHUNKWISE_DATA_MIRROR; writes
# $OUT/ray_engine_*.txt when $OUT is set (the device tool's output folder), else ./.
# Nothing in the project requires a GPU; this only measures what one changes.
set -euo pipefail
out="${OUT:-.}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
py=.venv/bin/python
"$py" benchmarks/bench_ray_engine.py --cpus 2 2>&1 | tee "$out/ray_engine_cpu2.txt"
"$py" benchmarks/bench_ray_engine.py --cpus 16 2>&1 | tee "$out/ray_engine_cpu16.txt"
if "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    "$py" benchmarks/bench_ray_engine.py --cpus 16 --device cuda --gpus-per-actor 1 --actors 1 2>&1 \
        | tee "$out/ray_engine_gpu.txt"
else
    echo "no CUDA device visible to torch: GPU row skipped" | tee "$out/ray_engine_gpu.txt"
fi
