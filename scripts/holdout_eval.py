"""Score lifter checkpoints on every mocap hold-out kind of a recipe: MPJPE and P-MPJPE (mm)
per kind, each take seen by the recipe's ``data.val_cameras`` virtual cameras (seeded per take
and camera, the same for every checkpoint), 2D normalised as each checkpoint was trained.

    PYTHONPATH=. python scripts/holdout_eval.py tensorpose/assets/models/lifter_wild.pt \
        runs/lift_wild_mocap/checkpoint.pt [--config configs/lift_wild_mocap.yaml] [--json out]

The hold-outs are the recipe's ``data.val`` takes grouped by its ``data.kinds`` rules, read
with its frame-rate rules (so the old lifter is scored on exactly the same poses). "mean" is
the mean over kinds (each kind weighs the same, like the balanced training windows).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tensorpose.config import load_config
from tensorpose.data.mocap import load_lifting_split
from tensorpose.data.takes import expand_entries
from tensorpose.inference import load_model
from tensorpose.skeleton import get_skeleton


def holdout_sets(config: str, fps: float | None = None) -> dict[str, tuple]:
    """Kind -> (takes, LiftingSet in pixels, camera spec) of the recipe's hold-outs, sampled at
    ``fps`` (default: the recipe's ``data.fps``)."""
    cfg = load_config(config)
    d = cfg.data
    takes = expand_entries(d.val, d.kinds)
    kinds: dict[str, list[str]] = {}
    for t in takes:  # a few dozen files
        kinds.setdefault(t.kind, []).append(t.path)
    sk = get_skeleton(cfg.model.skeleton)
    opts = {"units": d.units, "frame_rates": d.frame_rates, "kinds": d.kinds,
            "character": d.character}  # fmt: skip
    spec = d.camera_spec()
    out = {}
    for k, paths in kinds.items():  # one set per kind
        data = load_lifting_split(paths, sk, d.val_cameras, spec, mapping=d.mapping or None,
                                  fps=fps or d.fps, seed=d.seed, **opts)  # fmt: skip
        out[k] = (paths, data, spec)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoints", nargs="+")
    ap.add_argument("--config", default="configs/lift_wild_mocap.yaml")
    ap.add_argument(
        "--fps",
        type=float,
        default=None,
        help="sample the hold-outs at this frame rate (default: the recipe's)",
    )
    ap.add_argument("--json", default=None, help="also write the table as JSON here")
    args = ap.parse_args()
    sets = holdout_sets(args.config, args.fps)
    rows: dict[str, dict[str, dict[str, float]]] = {}
    for ckpt in args.checkpoints:
        task, _, cfg, _ = load_model(ckpt, "cpu")
        rows[ckpt] = {}
        for kind, (_, data, spec) in sets.items():
            if cfg.data.normalization == "intrinsics":
                data = data.with_intrinsics(spec.K())
            m = task.evaluate(data)
            rows[ckpt][kind] = {k: m[k] for k in ("mpjpe_mm", "p_mpjpe_mm", "frames")}
        for key in ("mpjpe_mm", "p_mpjpe_mm"):
            rows[ckpt].setdefault("mean", {})[key] = sum(
                r[key] for k, r in rows[ckpt].items() if k != "mean"
            ) / len(sets)
    header = "| kind | takes | poses | " + " | ".join(
        f"{Path(c).parent.name}/{Path(c).name} MPJPE / P-MPJPE" for c in args.checkpoints
    )
    print(header + " |")
    print("|---" * (3 + len(args.checkpoints)) + "|")
    for kind in [*sets, "mean"]:
        takes = len(sets[kind][0]) if kind in sets else ""
        poses = rows[args.checkpoints[0]][kind].get("frames", "")
        cells = " | ".join(
            f"{rows[c][kind]['mpjpe_mm']:.1f} / {rows[c][kind]['p_mpjpe_mm']:.1f}"
            for c in args.checkpoints
        )
        print(f"| {kind} | {takes} | {poses} | {cells} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
