#!/usr/bin/env bash
# Run every user-facing command on the bundled data and print one sha256 per output file, so
# that two checkouts can be compared (a restructure must not move any number):
#   scripts/identity_outputs.sh OUT_DIR > hashes.txt     (then diff two such files)
# An npz is hashed per array (its zip entries carry a time stamp), metrics.json and steps.csv
# without their timings, eval-wild's JSON without the checkout's path. Covers: the demo's metrics.json and steps.csv, eval-wild (JSON), triangulate's NPZ
# and TRC, lift's NPZ and TRC on cam01..cam04, predict's results.json on the bundled COCO images (a
# 2-epoch heatmap run trained here), smooth's whole output folder.
set -euo pipefail
out=$(realpath -m "$1")
rm -rf "$out"; mkdir -p "$out"
B=tensorpose/assets/tracks/openpose_body25b
C=$B/Calib.qca.txt
tp() { tensorpose "$@" > /dev/null; }
tp demo --quiet --out "$out" --name demo
tensorpose eval-wild $B --calib $C --json > "$out/eval_wild.json"
tp triangulate $B --calib $C --fps 60 --out "$out/tri"
for c in 1 2 3 4; do
    tp lift $B/cam0${c}_json --calib $C --camera cam_0$c --fps 60 --out "$out/lift$c" --quiet
done
tp train configs/heatmap_coco.yaml train.epochs=2 train.name=hm train.out_dir="$out/runs" --quiet
tp predict tensorpose/assets/coco/images --checkpoint "$out/runs/hm/best.pt" \
    --boxes tensorpose/assets/coco/person_keypoints.json --out "$out/predict" --quiet
tp smooth $B --method rts --fps 60 --out "$out/smooth"
python - "$out" <<'PYEOF'
"""One sha256 per output file; an npz's per array (its zip entries carry a time stamp), the
demo's metrics.json and steps.csv without their timings, eval-wild without the checkout path."""
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

out = Path(sys.argv[1])
picked = ["demo/metrics.json", "demo/steps.csv", "eval_wild.json", "predict/results.json"]
files = [out / p for p in picked]
for d in ("tri", "lift1", "lift2", "lift3", "lift4", "smooth"):
    files += [p for p in (out / d).rglob("*") if p.suffix in (".npz", ".trc", ".json", ".csv")]
for p in sorted(files):
    rel = p.relative_to(out)
    if p.suffix == ".npz":
        with np.load(p) as z:
            for k in sorted(z.files):
                a = z[k]
                h = hashlib.sha256(str((a.dtype, a.shape)).encode() + a.tobytes()).hexdigest()
                print(h, f"{rel}:{k}")
    elif p.name in ("metrics.json", "eval_wild.json"):  # less wall time and checkout path
        m = json.loads(p.read_text())
        m.pop("seconds", None)
        m["model"] = Path(m.get("model", "")).name
        print(hashlib.sha256(json.dumps(m, sort_keys=True).encode()).hexdigest(), rel)
    elif p.name == "steps.csv":  # less its samples/s (a timing)
        rows = [line.split(",")[:-1] for line in p.read_text().splitlines()]
        print(hashlib.sha256(str(rows).encode()).hexdigest(), rel)
    else:
        print(hashlib.sha256(p.read_bytes()).hexdigest(), rel)
PYEOF
