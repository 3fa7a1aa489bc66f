#!/bin/bash
# Second, short device call: complete the ablations' Multi30k en-de seed 1 (4 cells) and the five-writeups'
# Multi30k seed 0 (8 cells) on the GPU, so that each study's GPU records are whole seeds across all arms.
set -u
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD ZOO_DATA_DIR=$PWD/.devdata ZOO_COMMIT=$1
GRID_END=$2
cp -r .devdata/pre/ablations reports/  # seed 1's 10 records from the first call: only its 4 missing cells train
pack() { tar czf $OUT/records.tmp reports/ablations/records reports/five-writeups/records 2>/dev/null && mv $OUT/records.tmp $OUT/records.tgz; }
( while true; do sleep 15; pack; done ) & PACKER=$!
LEFT=$(( GRID_END - ($(date +%s) - T0) ))
el "grids for ${LEFT}s" > $OUT/grid.log
timeout -s INT -k 15 $LEFT python3 -m zoo run .devdata/ablations-ende-s1.toml --out reports/ablations --workers 4 --no-live > $OUT/grid-ablations.log 2>&1 & A=$!
timeout -s INT -k 15 $LEFT python3 -m zoo run .devdata/five-writeups-m30k-s0.toml --out reports/five-writeups --workers 8 --no-live > $OUT/grid-writeups.log 2>&1 & W=$!
wait $A $W
el "grids done" >> $OUT/grid.log
kill $PACKER; pack
find reports/ablations/records reports/five-writeups/records -name "seed-*.json" >> $OUT/grid.log
el "end" >> $OUT/grid.log
