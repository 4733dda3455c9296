"""DeepPose learning smoke run on the bundled COCO crops, before the trainer exists.

The articles' AlexNet regressor (227x227, fc 4096, dropout 0.5) trained with Adam on the
visibility-masked MSE over a few bundled people (fixed plain crops: memorisation, the honest
check on 43 people), then evaluated on the same crops: training loss ratio first/last and
PCK@0.2 (box-normalised, in crop pixels). Loss is read back only at log intervals.

Usage: python benchmarks/train2d_smoke.py [--people 8] [--steps 60] [--backbone alexnet]
       [--explicit-backward] [--threads 1]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import write_json
from tensorpose.augment.crops import AugmentConfig, CpuAugment, sample_params
from tensorpose.data.images import TopDownDataset
from tensorpose.losses import masked_mse, masked_mse_explicit
from tensorpose.metrics.pose2d import bbox_size, pck
from tensorpose.models import deeppose
from tensorpose.models.deeppose import denormalize_coords, normalize_coords
from tensorpose.skeleton import get_skeleton


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--people", type=int, default=8)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--backbone", default="alexnet", choices=("alexnet", "resnet10", "resnet18"))
    p.add_argument("--explicit-backward", action="store_true")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-save", action="store_true")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    size = (227, 227) if args.backbone == "alexnet" else (224, 224)
    sk = get_skeleton("coco17")
    ds = TopDownDataset(aspect_ratio=1.0, cache_images=True)
    cfg = AugmentConfig.identity(size)
    n = min(args.people, len(ds))
    batch = CpuAugment(cfg, sk).apply([ds[i] for i in range(n)], sample_params(cfg, n))
    x = ((batch["images"].float() / 255 - 0.45) / 0.225).to(device)
    kp, vis = batch["keypoints"].to(device), batch["visibility"].to(device)
    y = normalize_coords(kp, size)
    window = batch["scale"][:, 0].to(device)  # source pixels across the crop
    norm = bbox_size(batch["bbox"].to(device)) * size[1] / window  # box size in crop pixels
    model = deeppose(17, args.backbone).to(device)
    opt = torch.optim.Adam(model.parameters(), args.lr)
    loss_fn = masked_mse_explicit if args.explicit_backward else masked_mse
    log, t0 = [], time.perf_counter()
    for step in range(args.steps):
        loss = loss_fn(model(x), y, vis)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 10 == 0 or step == args.steps - 1:
            log.append((step, float(loss.detach())))  # read back at log intervals only
            print(f"step {step:4d}  loss {log[-1][1]:.5f}")
    elapsed = time.perf_counter() - t0
    model.eval()
    with torch.no_grad():
        pred = denormalize_coords(model(x), size)
    pck02 = float(pck(pred, kp, vis, norm, 0.2))
    ratio = log[0][1] / max(log[-1][1], 1e-12)
    print(
        f"\n{args.backbone}: {n} people, {args.steps} steps, {elapsed / args.steps:.2f} s/step "
        f"on {device}; loss {log[0][1]:.4f} -> {log[-1][1]:.5f} ({ratio:.0f}x lower); "
        f"train PCK@0.2 {pck02:.3f}"
    )
    if not args.no_save:
        write_json(
            "train2d_smoke",
            device,
            {
                "backbone": args.backbone,
                "people": n,
                "steps": args.steps,
                "lr": args.lr,
                "explicit_backward": args.explicit_backward,
                "loss_log": log,
                "loss_ratio": ratio,
                "train_pck@0.2": pck02,
                "seconds_per_step": elapsed / args.steps,
            },
        )


if __name__ == "__main__":
    main()
