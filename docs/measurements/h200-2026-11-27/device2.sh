#!/bin/bash
# The second, short call (2026-11-27): after GPU-sized chunks in the fused loss (zoo/loss_fused.py) and Adam's
# eps in the replay test (see README.md): the graph tests, the studies' size in one process, and the default
# size (d_model 256, 3+3, vocab 8000) with runs per GPU on the graphed path.
set -u
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD
timeout 40 python3 -m pytest -q -x -p no:cacheprovider -k "cuda or graph" tests/test_graphs.py > $OUT/tests.txt 2>&1
echo "tests rc=$?" | tee -a $OUT/tests.txt
timeout 45 python3 -m zoo bench --device cuda --d-model 64 --n-heads 4 --d-ff 256 --layers 2 --vocab 4000 --rounds 3 --json > $OUT/bench-study.json 2> $OUT/bench.txt
echo "studies' size rc=$?" | tee -a $OUT/bench.txt
timeout 60 python3 -m zoo bench --device cuda --rounds 3 --processes 4 --process-steps 60 --process-path graphed --json > $OUT/bench-256.json 2>> $OUT/bench.txt
echo "default size rc=$?" | tee -a $OUT/bench.txt
