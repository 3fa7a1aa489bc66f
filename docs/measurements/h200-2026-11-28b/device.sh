#!/bin/bash
# One seed of the scale study (issue 37) on one H200, all ten arms at once, as one prepared call: a seed trains
# whole on one device, so a call cut off before all ten finish brings back nothing to keep. Records come back in
# $OUT/records.tgz, packed every 20 s. The working tree travels without the other studies' reports (64 MiB limit)
# and without its git folder, hence ZOO_COMMIT.
#     bash docs/measurements/h200-2026-11-28b/device.sh COMMIT GRID_SECONDS SEED
set -u
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
SEED=$3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD ZOO_DATA_DIR=$PWD/.devdata ZOO_COMMIT=$1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc
  python3 -c "import torch, zoo, pydantic, tokenizers, sacrebleu; print(torch.__version__, torch.cuda.get_device_name(), pydantic.__version__, tokenizers.__version__, sacrebleu.__version__)"
} > $OUT/gpu.txt 2>&1
pack() { tar czf $OUT/records.tmp reports/scale/records 2>/dev/null && mv $OUT/records.tmp $OUT/records.tgz; }
( while true; do sleep 20; pack; done ) & PACKER=$!
LOG=$OUT/grid-seed-$SEED.log
( while true; do sleep 30; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader; done ) \
  > $OUT/gpu-use-seed-$SEED.txt 2>&1 & SMI=$!
el "grid for ${2}s" | tee $LOG
timeout -s INT -k 20 $2 python3 -m zoo run experiments/scale.toml --seeds $SEED --workers 10 >> $LOG 2>&1
el "grid rc=$?" >> $LOG
kill $PACKER $SMI; pack
ls reports/scale/records/*/multi30k-de-en/ >> $LOG 2>&1
el "end" >> $LOG
