#!/usr/bin/env bash
# The CUDA checks, in one run on a machine with an NVIDIA GPU and a CUDA PyTorch: the tests that
# need CUDA, then the GPU side of the benchmarks (each under its own time limit, so that one slow
# case cannot take the others with it). Results: benchmarks/results/*_cuda.json (device name,
# torch version inside); the log: $LOG (default cuda_checks.log).
#
#   scripts/cuda_checks.sh            # BlazePose runs on examples/balancing_trial
#   ONLY='pytest|blazepose' scripts/cuda_checks.sh     # only the steps whose names match
#
# Packages the image may lack (pycocotools, filterpy, tflite) are installed from ./.whl when
# that folder holds their wheels.
set -u
cd "$(dirname "$0")/.."
LOG=${LOG:-cuda_checks.log}
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if compgen -G ".whl/*.whl" >/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
DEADLINE=${DEADLINE:-420}  # seconds: later steps are skipped once this much has gone
step() {  # step SECONDS NAME COMMAND...: run under a time limit, log its output and status
  local limit=$1 name=$2
  shift 2
  if [[ -n ${ONLY:-} && ! $name =~ $ONLY ]]; then
    return
  fi
  if ((SECONDS > DEADLINE)); then
    echo "=== $name: skipped (past ${DEADLINE} s)" | tee -a "$LOG"
    return
  fi
  local t0=$SECONDS
  echo "=== $name" | tee -a "$LOG"
  timeout "$limit" "$@" >>"$LOG" 2>&1
  local rc=$?
  echo "=== $name: exit $rc, $((SECONDS - t0)) s" | tee -a "$LOG"
}
: >"$LOG"
nvidia-smi -L | tee -a "$LOG"
$PY -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))" | tee -a "$LOG"
step 150 "pytest: the CUDA cases" $PY -m pytest -q -p no:cacheprovider -n 8 -k cuda tests
step 60 "BlazePose on CUDA against CPU, TF32 on and off" $PY scripts/blazepose_tf32.py
step 90 "benchmarks/blazepose_stages.py" $PY benchmarks/blazepose_stages.py --device cuda
step 90 "scripts/blazepose_trial.py" $PY scripts/blazepose_trial.py --device cuda
step 90 "benchmarks/training.py" $PY benchmarks/training.py --device cuda --steps 5
step 60 "benchmarks/augment.py" $PY benchmarks/augment.py --device cuda
step 120 "benchmarks/kinematics.py" $PY benchmarks/kinematics.py --device cuda
step 60 "benchmarks/filters.py" $PY benchmarks/filters.py --device cuda --quick
step 90 "benchmarks/codecs.py" $PY benchmarks/codecs.py --device cuda
step 60 "benchmarks/nms.py" $PY benchmarks/nms.py --device cuda
step 60 "benchmarks/roi.py" $PY benchmarks/roi.py --device cuda
step 60 "benchmarks/procrustes.py" $PY benchmarks/procrustes.py --device cuda
step 60 "benchmarks/lifting.py" $PY benchmarks/lifting.py --device cuda --repeats 10
step 60 "benchmarks/synth.py" $PY benchmarks/synth.py --device cuda
step 60 "benchmarks/multiperson.py" $PY benchmarks/multiperson.py --device cuda
step 60 "benchmarks/predict.py" $PY benchmarks/predict.py --device cuda
step 60 "benchmarks/triangulate.py" $PY benchmarks/triangulate.py --device cuda
ls benchmarks/results/*_cuda.json | tee -a "$LOG"
