#!/bin/bash
# The second call: the cells the first left unfinished (resuming from their checkpoints where the machine kept them).
# Multi30k en-de seeds 3-4 (28 cells). Lane B: the five-writeups' Multi30k seeds 1-2 (16 cells), then the
set -u
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD ZOO_DATA_DIR=$PWD/.devdata ZOO_COMMIT=$1
GRID_END=$2
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $OUT/gpu.txt 2>&1; nproc >> $OUT/gpu.txt
pack() { tar czf $OUT/records.tmp reports/ablations/records reports/five-writeups/records 2>/dev/null && mv $OUT/records.tmp $OUT/records.tgz; }
( while true; do sleep 15; pack; done ) & PACKER=$!
left() { echo $(( GRID_END - ($(date +%s) - T0) )); }
el "grids for $(left)s" > $OUT/grid.log
timeout -s INT -k 15 $(left) python3 -m zoo run .devdata/abl-ende-s34.toml --out reports/ablations --workers 8 --no-live > $OUT/grid-ende.log 2>&1 & A=$!
( timeout -s INT -k 15 $(left) python3 -m zoo run .devdata/fw-m30k-s12.toml --out reports/five-writeups --workers 8 --no-live > $OUT/grid-writeups.log 2>&1
  el "writeups done" >> $OUT/grid.log
  timeout -s INT -k 15 $(left) python3 -m zoo run .devdata/abl-revlong.toml --out reports/ablations --workers 8 --no-live > $OUT/grid-revlong.log 2>&1 ) & B=$!
wait $A; el "en-de done" >> $OUT/grid.log
wait $B; el "lane B done" >> $OUT/grid.log
kill $PACKER; pack
find reports/ablations/records reports/five-writeups/records -name "seed-*.json" | sort >> $OUT/grid.log
el "end" >> $OUT/grid.log
