"""CenterNet overfit sanity check on the bundled COCO subset (16 images, 85 people, 43 with
keypoints): a plain PyTorch loop over tensorpose's CenterNet functions that must reach COCO
keypoint AP >= 0.8 (pycocotools) on its own training images, on ONE CPU thread.

Every step trains on all 16 letterboxed images (no augmentation: the check is that targets,
loss, decoding, the inverse letterbox and OKS-NMS fit together, not generalisation). Before
evaluation, BatchNorm running statistics are recomputed on the training batch (momentum-free), so
eval mode sees what the last training steps saw.

Usage:
    python scripts/centernet_overfit.py [--steps 200] [--size 256] [--depth 10] [--width 16]
        [--lr 2e-3] [--threads 1] [--out runs/centernet_overfit]

Writes ``OUT/summary.json`` (AP, loss per logged step, wall time), ``OUT/predictions.png``
(decoded people drawn on four training images), ``OUT/results.json`` (COCO results) and
``OUT/model.pt`` (weights, depth, width, input size).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tensorpose.centernet.data import MultiPersonDataset, collate_multiperson
from tensorpose.centernet.model import build_model
from tensorpose.io.coco import load_coco_keypoints
from tensorpose.tasks.centernet import CenterNet, evaluate
from tensorpose.viz.draw import draw_skeleton


def recalibrate_batchnorm(model: nn.Module, x: torch.Tensor) -> None:
    """Running statistics = the statistics of ``x`` (one momentum-free forward pass)."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    saved = [m.momentum for m in bns]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average: after one pass, exactly this batch's stats
    model.train()
    with torch.no_grad():
        model(x)
    for m, mom in zip(bns, saved, strict=True):
        m.momentum = mom


def draw_predictions(
    ds, decoded: dict, items: list[int], skeleton, links, min_score: float, path: Path
) -> None:
    """Kept people with ``score >= min_score`` on the images ``items`` (2 x 2 grid of 640-pixel
    tiles): joints with heatmap score > 0.1 and their links; boxes (cyan) of people with at
    least 3 such joints (people without keypoints have no trained box size)."""
    tiles = []
    for i in items:
        img = ds[i]["image"]
        keep = (decoded["keep"][i] & (decoded["scores"][i] >= min_score)).nonzero().flatten()
        for p in keep.tolist():
            vis = decoded["keypoint_scores"][i, p] > 0.1
            img = draw_skeleton(img, decoded["keypoints"][i, p], vis, skeleton, links, 2)
            if int(vis.sum()) >= 3:
                x1, y1, x2, y2 = (round(float(v)) for v in decoded["boxes"][i, p])
                cv2.rectangle(img, (x1, y1), (x2, y2), (0, 255, 255), 1)
        s = 640 / max(img.shape[:2])
        tile = np.zeros((640, 640, 3), np.uint8)
        small = cv2.resize(img, None, fx=s, fy=s, interpolation=cv2.INTER_AREA)
        tile[: small.shape[0], : small.shape[1]] = small
        tiles.append(tile)
    while len(tiles) % 2:
        tiles.append(np.zeros_like(tiles[0]))
    rows = [np.concatenate(tiles[r : r + 2], axis=1) for r in range(0, len(tiles), 2)]
    cv2.imwrite(str(path), cv2.cvtColor(np.concatenate(rows, axis=0), cv2.COLOR_RGB2BGR))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--size", type=int, default=256, help="square input side")
    p.add_argument("--depth", type=int, default=10, choices=(10, 18))
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=20)
    p.add_argument("--out", default="runs/centernet_overfit")
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()

    ds = MultiPersonDataset(cache_images=True)
    links = load_coco_keypoints(ds.annotations, warn=False).links
    cn = CenterNet("coco17", args.size)
    batch = collate_multiperson([ds[i] for i in range(len(ds))])
    prepared = cn.prepare(batch, plain=True)  # once: no augmentation in an overfit check
    x = prepared["x"]
    people = int(prepared["targets"]["box_mask"].sum())
    model = build_model(cn.skeleton.num_joints, args.depth, args.width)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 10) * 0.5 * (1 + np.cos(np.pi * s / args.steps))
    )
    print(
        f"CenterNet overfit: {len(ds)} images, {people} people as centres, input {args.size}, "
        f"resnet{args.depth} width {args.width} ({sum(q.numel() for q in model.parameters())} "
        f"parameters), {args.steps} full-batch steps, {torch.get_num_threads()} thread(s)"
    )
    history = []
    model.train()
    t_train = time.perf_counter()
    for step in range(args.steps):
        terms = cn.loss(model(x), prepared)
        opt.zero_grad(set_to_none=True)
        terms["loss"].backward()
        opt.step()
        sched.step()
        if step % args.log_every == 0 or step == args.steps - 1:
            row = {"step": step, **{k: round(float(v.detach()), 4) for k, v in terms.items()}}
            history.append(row)
            print(
                f"step {step:4d}  loss {row['loss']:.4f}  heatmap {row['heatmap']:.3f}  "
                f"joints {row['joint_heatmaps']:.3f}  joint_offset {row['joint_offset']:.3f}  "
                f"{time.perf_counter() - t_train:.0f} s",
                flush=True,
            )
    train_s = time.perf_counter() - t_train
    recalibrate_batchnorm(model, x)
    model.eval()
    ap = evaluate(model, cn, ds, batch_size=len(ds))
    (out_dir / "results.json").write_text(json.dumps(ap.pop("results")))
    with torch.no_grad():
        decoded = cn.predict(model, batch)
    pictures = out_dir / "predictions.png"
    draw_predictions(ds, decoded, [0, 1, 4, 12], cn.skeleton, links, 0.3, pictures)
    wall = time.perf_counter() - t0
    summary = {
        "ap": ap,
        "first_loss": history[0]["loss"],
        "last_loss": history[-1]["loss"],
        "loss_drop": history[0]["loss"] / max(history[-1]["loss"], 1e-12),
        "train_seconds": round(train_s, 1),
        "wall_seconds": round(wall, 1),
        "threads": torch.get_num_threads(),
        "args": vars(args),
        "torch": torch.__version__,
        "history": history,
    }
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    torch.save(
        {"model": model.state_dict(), "depth": args.depth, "width": args.width,
         "input_size": args.size},
        out_dir / "model.pt",
    )  # fmt: skip
    print(
        f"COCO keypoint AP {ap['AP']:.3f} (AP50 {ap['AP50']:.3f}, AR {ap['AR']:.3f}) on the "
        f"training images; loss {summary['first_loss']:.3f} -> {summary['last_loss']:.4f} "
        f"({summary['loss_drop']:.0f}x); training {train_s:.0f} s, wall {wall:.0f} s -> {out_dir}"
    )
    return 0 if ap["AP"] >= 0.8 else 1


if __name__ == "__main__":
    raise SystemExit(main())
