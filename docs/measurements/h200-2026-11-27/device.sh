#!/bin/bash
# The one prepared device call of 2026-11-27 (issues 38 and 37): the GPU tests with the CUDA-graphed step,
# zoo bench at the studies' size (graphed v eager, runs per GPU on the graphed path) and at d_model 512, 6+6
# (bf16 MFU), then the scale study's grid, whole seeds, until GRID_END seconds after the start. Records come
# back in $OUT/records.tgz, packed every 20 s so that a call cut off still brings back what finished.
#     bash docs/measurements/h200-2026-11-27/device.sh COMMIT GRID_END
set -u
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD ZOO_DATA_DIR=$PWD/.devdata ZOO_COMMIT=$1
GRID_END=$2
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc
  python3 -c "import torch, zoo, pydantic, tokenizers, sacrebleu; print(torch.__version__, torch.cuda.get_device_name(), pydantic.__version__, tokenizers.__version__, sacrebleu.__version__)"
} > $OUT/gpu.txt 2>&1
el "env ready" | tee $OUT/bench.txt
# 1. the GPU tests: graphed steps (replays never wait, a replay is the eager step), training, bench on cuda
timeout 120 python3 -m pytest -q -x -p no:cacheprovider -k "gpu or cuda or graph" tests/test_graphs.py tests/test_train.py tests/test_bench.py > $OUT/tests.txt 2>&1
el "tests rc=$?" | tee -a $OUT/tests.txt
# 2. the studies' size: the graphed step against the eager fast path in one process, and runs per GPU on it
timeout 110 python3 -m zoo bench --device cuda --d-model 64 --n-heads 4 --d-ff 256 --layers 2 --vocab 4000 --rounds 3 --processes 4,8,12 --process-steps 100 --process-path graphed --json > $OUT/bench-study.json 2>> $OUT/bench.txt
el "bench at the studies' size rc=$?" | tee -a $OUT/bench.txt
# 3. paper-base at d_model 512, 6+6 layers, vocab 8000: bf16 MFU
timeout 80 python3 -m zoo bench --device cuda --d-model 512 --n-heads 8 --d-ff 2048 --layers 6 --rounds 3 --json > $OUT/bench-512.json 2>> $OUT/bench.txt
el "bench at d_model 512 rc=$?" | tee -a $OUT/bench.txt
# 4. the scale grid: seeds 0 and 1, all ten arms of a seed at once
pack() { tar czf $OUT/records.tmp reports/scale/records 2>/dev/null && mv $OUT/records.tmp $OUT/records.tgz; }
( while true; do sleep 20; pack; done ) & PACKER=$!
LEFT=$(( GRID_END - ($(date +%s) - T0) ))
el "grid for ${LEFT}s" | tee $OUT/grid.log
timeout -s INT -k 20 $LEFT python3 -m zoo run experiments/scale.toml --seeds 0,1 --workers 10 >> $OUT/grid.log 2>&1
el "grid rc=$?" >> $OUT/grid.log
kill $PACKER; pack
ls reports/scale/records/*/multi30k-de-en/ >> $OUT/grid.log 2>&1
el "end" >> $OUT/grid.log
