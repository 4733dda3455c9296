#!/usr/bin/env bash
# Set up an isolated environment for tensorpose in .venv (or $TENSORPOSE_VENV):
#  - if the python that runs this already imports torch >= 2.4, the venv sees that torch
#    (and the rest of that python's packages) and keeps it;
#  - otherwise the venv is fully isolated and gets torch==2.13.0 (a CPU build where the
#    package index offers one; no CUDA packages are pulled by a bare "torch" requirement);
#  - then tensorpose itself, editable, with the extras in $EXTRAS (default: test,viz,coco,onnx,
#    opensim,ray; opensim only where its wheels exist: pyproject.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${TENSORPOSE_VENV:-.venv}

has_torch() {
    "$1" - <<'PYEOF' >/dev/null 2>&1
import sys
import torch
major, minor = (int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
sys.exit(0 if (major, minor) >= (2, 4) else 1)
PYEOF
}

if [ ! -x "$VENV/bin/python" ]; then
    if has_torch "$PY"; then
        echo "setup: using the torch already importable from $PY"
        "$PY" -m venv --system-site-packages "$VENV"
    else
        "$PY" -m venv "$VENV"
    fi
fi
if ! has_torch "$VENV/bin/python"; then
    "$VENV/bin/python" -m pip install --quiet "torch==2.13.0"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e ".[${EXTRAS:-test,viz,coco,onnx,opensim,ray}]"
"$VENV/bin/python" -c "import torch, tensorpose; print('setup: tensorpose', tensorpose.__version__, 'torch', torch.__version__)"
