#!/bin/bash
# One prepared device check (issue 21): GPU tests, zoo bench on the GPU, runs per GPU, then the
# ablations' Multi30k en-de cells as far as the time allows. Records come back in $OUT/records.tgz.
set -u
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD ZOO_DATA_DIR=$PWD/.devdata ZOO_COMMIT=$1
GRID_END=$2   # seconds after start when the grid must stop
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $OUT/gpu.txt 2>&1
nproc >> $OUT/gpu.txt
python3 -c "import torch, zoo, pydantic, tokenizers, sacrebleu; print(torch.__version__, torch.cuda.get_device_name(), tokenizers.__version__, sacrebleu.__version__)" >> $OUT/gpu.txt 2>&1
el "env ready"
# 1. the GPU tests: contracts on the GPU, training without a host sync per step, bench on cuda
timeout 150 python3 -m pytest -q -x -p no:cacheprovider -k "gpu or cuda" tests/test_components.py tests/test_train.py tests/test_bench.py > $OUT/tests.txt 2>&1
el "tests rc=$?" | tee -a $OUT/tests.txt
# 2. the benchmark against torch.nn.Transformer on the same GPU, and runs per GPU at the studies' size
timeout 120 python3 -m zoo bench --device cuda --rounds 5 > $OUT/bench.txt 2>&1
el "bench rc=$?" | tee -a $OUT/bench.txt
timeout 150 python3 -m zoo bench --device cuda --d-model 64 --n-heads 4 --d-ff 256 --layers 2 --vocab 4000 --rounds 3 --processes 4,8,12,16 --process-steps 40 --json > $OUT/bench-study.json 2>> $OUT/bench.txt
el "bench at the studies' size rc=$?" | tee -a $OUT/bench.txt
WORKERS=$(python3 -c "import json; r = json.load(open('$OUT/bench-study.json'))['processes']; print(max(8, max(r, key=lambda x: x['aggregate_tok_s'])['processes']))" 2>> $OUT/bench.txt || echo 12)
el "workers $WORKERS" | tee -a $OUT/bench.txt
# 3. the grid, records packed into $OUT every 20 s so that a cut-off call still brings back what finished
pack() { tar czf $OUT/records.tmp reports/ablations/records 2>/dev/null && mv $OUT/records.tmp $OUT/records.tgz; }
( while true; do sleep 20; pack; done ) & PACKER=$!
LEFT=$(( GRID_END - ($(date +%s) - T0) ))
el "grid for ${LEFT}s"
timeout -s INT -k 20 $LEFT python3 -m zoo run .devdata/ablations-ende.toml --out reports/ablations --workers $WORKERS --no-live > $OUT/grid.log 2>&1
el "grid rc=$?" >> $OUT/grid.log
kill $PACKER; pack
ls reports/ablations/records/*/multi30k-en-de/ | head -100 >> $OUT/grid.log
el "end"
