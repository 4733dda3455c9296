"""Training-step measurements of the DeepPose articles, side by side in one process.

1. Forward + backward time of the AlexNet DeepPose regressor (input 227, fc 4096, Nj*2 outputs,
   masked MSE) for batch sizes 2^0 .. 2^max on each device.
2. Images/s of a full heatmap training step (configs/heatmap_coco.yaml's model) on the bundled
   COCO people: tensorpose's pipeline (CpuAugment: one warp per sample from one composed matrix,
   batched photometrics; heatmaps batched on the device) vs a plain per-sample pipeline written
   the straightforward way (per-sample OpenCV flip/warp/colour + numpy MSRA heatmaps per
   keypoint). Same people, same model, same optimiser; data work is timed inside the step so
   the split data vs compute is visible (no worker processes: one core does both here).

Usage: python benchmarks/training.py [--device cpu|cuda|both] [--max-pow 7] [--steps 5]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import base_parser, devices, print_table, sync, timeit, write_json
from benchmarks.naive2d import msra_heatmaps, plain_opencv_augment
from tensorpose import losses
from tensorpose.augment.crops import CpuAugment
from tensorpose.config import load_config
from tensorpose.data.images import TopDownDataset
from tensorpose.models.deeppose import deeppose
from tensorpose.ops.heatmap import gaussian_heatmaps
from tensorpose.skeleton import get_skeleton
from tensorpose.tasks import build_model
from tensorpose.tasks.topdown import TopDownTask

ROOT = Path(__file__).resolve().parent.parent
SK = get_skeleton("coco17")


def alexnet_rows(device: torch.device, args) -> list[dict]:
    torch.manual_seed(0)
    model = deeppose(17, "alexnet", input_size=227).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    rows = []
    for p in range(args.max_pow + 1):
        B = 2**p
        x = torch.randn(B, 3, 227, 227, device=device)
        target = torch.rand(B, 17, 2, device=device)
        vis = (torch.rand(B, 17, device=device) > 0.2).float()

        def step(x=x, target=target, vis=vis, B=B):
            opt.zero_grad(set_to_none=True)
            pred = model(x).view(B, 17, 2)
            losses.masked_mse(pred, target, vis).backward()

        repeats = max(2, min(args.repeats, 64 // B))
        ms = timeit(step, device, warmup=1, repeats=repeats) * 1e3
        rows.append({"batch": B, "ms": ms, "ms_per_image": ms / B})
        print(f"  alexnet fwd+bwd batch {B:4d}: {ms:9.1f} ms  ({ms / B:7.2f} ms/image)")
    return rows


def pipeline_rows(device: torch.device, args) -> list[dict]:
    cfg = load_config(ROOT / "configs" / "heatmap_coco.yaml")
    task = TopDownTask(torch.nn.Identity(), cfg)
    aug_cfg = task.augment_config()
    H, W = cfg.data.input_size
    sigma = cfg.model.sigma
    ds = TopDownDataset(aspect_ratio=W / H, cache_images=True)
    B = args.batch
    people = [ds[i % len(ds)] for i in range(B * args.steps)]
    mean = torch.tensor(cfg.data.mean, device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor(cfg.data.std, device=device).view(1, 3, 1, 1) * 255
    fi = np.array(SK.flip_index)

    def make():
        torch.manual_seed(0)
        model = build_model(cfg).to(device)
        return model, torch.optim.Adam(model.parameters(), lr=1e-3)

    def compute(model, opt, images, hm, w):
        x = ((images.to(device).float() - mean) / std).contiguous()
        opt.zero_grad(set_to_none=True)
        losses.heatmap_mse(model(x), hm, w).backward()
        opt.step()

    def tensorpose_step(model, opt, samples, aug, timers):
        t0 = time.perf_counter()
        batch = aug(samples)  # what a DataLoader worker runs
        kp, vis = batch["keypoints"].to(device), batch["visibility"].to(device)
        hm, w = gaussian_heatmaps(kp, vis, (H // 4, W // 4), sigma, 4.0)
        sync(device)
        t1 = time.perf_counter()
        compute(model, opt, batch["images"], hm, w)
        sync(device)
        timers["data"] += t1 - t0
        timers["compute"] += time.perf_counter() - t1

    def plain_step(model, opt, samples, rng, timers):
        t0 = time.perf_counter()
        crops, hms, ws = [], [], []
        for s in samples:  # the straightforward per-sample loader
            crop, kp, vis = plain_opencv_augment(s, rng, fi, (H, W), aug_cfg)
            hm, w = msra_heatmaps(kp, vis, (H // 4, W // 4), sigma, 4.0)
            crops.append(torch.from_numpy(crop).permute(2, 0, 1))
            hms.append(torch.from_numpy(hm))
            ws.append(torch.from_numpy(w))
        images = torch.stack(crops)
        hm, w = torch.stack(hms).to(device), torch.stack(ws).to(device)
        sync(device)
        t1 = time.perf_counter()
        compute(model, opt, images, hm, w)
        sync(device)
        timers["data"] += t1 - t0
        timers["compute"] += time.perf_counter() - t1

    rows = []
    for name in ("plain", "tensorpose"):
        model, opt = make()
        aug = CpuAugment(aug_cfg, SK, seed=0)
        rng = np.random.default_rng(0)
        timers = {"data": 0.0, "compute": 0.0}
        chunks = [people[i * B : (i + 1) * B] for i in range(args.steps)]
        if name == "plain":

            def run(c, t, model=model, opt=opt, rng=rng):
                plain_step(model, opt, c, rng, t)
        else:

            def run(c, t, model=model, opt=opt, aug=aug):
                tensorpose_step(model, opt, c, aug, t)

        run(chunks[0], {"data": 0.0, "compute": 0.0})  # warm-up
        for c in chunks:
            run(c, timers)
        total = timers["data"] + timers["compute"]
        n = B * args.steps
        rows.append(
            {
                "case": f"heatmap step B{B}",
                "contender": name,
                "ms": 1e3 * total / args.steps,
                "images_per_s": n / total,
                "data_images_per_s": n / timers["data"],
                "data_share": timers["data"] / total,
            }
        )
    return rows


def main(argv=None) -> None:
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--max-pow", type=int, default=7, help="largest batch is 2**max_pow")
    p.add_argument("--batch", type=int, default=32, help="batch of the pipeline comparison")
    p.add_argument("--steps", type=int, default=5, help="timed steps per pipeline")
    args = p.parse_args(argv)
    for device in devices(args.device):
        print(f"\nAlexNet DeepPose forward + backward on {device}")
        alex = alexnet_rows(device, args)
        pipe = pipeline_rows(device, args)
        print_table(f"full heatmap training step on {device}", pipe, "plain")
        for r in pipe:
            print(
                f"  {r['contender']:<11} {r['images_per_s']:8.1f} images/s  data "
                f"{100 * r['data_share']:4.1f}% of the step  (data alone "
                f"{r['data_images_per_s']:.0f} images/s)"
            )
        if not args.no_save:
            write_json("training", device, {"alexnet_fwd_bwd": alex, "pipeline": pipe})


if __name__ == "__main__":
    main()
