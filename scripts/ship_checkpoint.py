"""Write a training checkpoint as a shipped model file: weights, config and the task's extra
data (e.g. the lifter's mean pose) with their checksums; no optimiser, scheduler or RNG state.

    PYTHONPATH=. python scripts/ship_checkpoint.py runs/lift_wild/best.pt \
        tensorpose/assets/models/lifter_wild.pt [--val 131_03] [--half]

``--val``: the held-out takes ``tensorpose eval MODEL`` scores without ``--bvh`` (stored as the
config's ``data.val``), for a recipe whose own hold-outs lie outside the package. ``--half``:
store the floating-point weights as float16 (half the file; loading casts them back to the
model's float32, so only the weights' rounding changes).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tensorpose.config import config_to_dict
from tensorpose.inference import load_model
from tensorpose.train.checkpoint import save_checkpoint


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", help="a checkpoint.pt / best.pt written by training")
    ap.add_argument("out", help="the model file to write")
    ap.add_argument(
        "--val", nargs="+", default=None, help="data.val of the shipped config (what eval scores)"
    )
    ap.add_argument("--half", action="store_true", help="store the weights as float16")
    args = ap.parse_args()
    _, model, cfg, extra = load_model(args.checkpoint, "cpu")
    if args.half:
        model = model.half()  # floating-point parameters and buffers; the step counters stay
    config = config_to_dict(cfg)
    if args.val:
        config["data"]["val"] = list(args.val)
    path = save_checkpoint(args.out, model, config, extra)
    _, _, shipped, _ = load_model(path, "cpu")  # reads back (checksums verified)
    print(f"{path}: {Path(path).stat().st_size / 1e6:.2f} MB ({cfg.task}, {type(model).__name__}, "
          f"data.val {shipped.data.val})")  # fmt: skip


if __name__ == "__main__":
    main()
