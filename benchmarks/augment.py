"""Top-down augmentation throughput: tensorpose's two backends against a plain per-sample
OpenCV pipeline, side by side, on the bundled COCO people (decoded once, batch of 32, 256x192
crops, the default AugmentConfig: scale, rotation, flip, colour, noise, shadow).

Contenders (CPU):
  plain opencv         per sample: full-image flip, 3-point affine, warpAffine, colour jitter
                       through HSV, noise, shadow (benchmarks/naive2d.py) - the baseline
  tensorpose cpu       CpuAugment, the DataLoader collate: batched parameters/matrices, then
                       per-sample cv2.warpAffine + one cv2.transform for all colour changes
  tensorpose device    DeviceAugment run on the CPU (one grid_sample for the batch) - the GPU
                       path on the wrong device, to show why the CPU default differs
On a GPU: DeviceAugment on the device, including the transfer of the collated uint8 batch;
its images/s are compared with the CPU path's images/s per worker core.

Usage: python benchmarks/augment.py [--device cpu|cuda|both] [--threads 1] [--batch 32]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import base_parser, devices, print_table, timeit, write_json
from benchmarks.naive2d import plain_opencv_augment
from tensorpose.augment.crops import AugmentConfig, CpuAugment, DeviceAugment
from tensorpose.data.images import TopDownDataset, collate_topdown
from tensorpose.skeleton import get_skeleton

SK = get_skeleton("coco17")


def run(device: torch.device, args, cpu_ms: dict) -> list[dict]:
    cfg = AugmentConfig(output_size=(256, 192))
    ds = TopDownDataset(aspect_ratio=192 / 256, cache_images=True)
    samples = [ds[i % len(ds)] for i in range(args.batch)]
    B = len(samples)
    t = lambda fn: timeit(fn, device, args.warmup, args.repeats) * 1e3  # noqa: E731
    rows = []
    case = f"B{B} 256x192"
    if device.type == "cpu":
        rng = np.random.default_rng(0)
        fi = np.array(SK.flip_index)
        rows.append(
            {
                "case": case,
                "contender": "plain opencv",
                "ms": t(
                    lambda: [
                        plain_opencv_augment(s, rng, fi, cfg.output_size, cfg) for s in samples
                    ]
                ),
            }
        )
        cpu_aug = CpuAugment(cfg, SK, seed=0)
        rows.append(
            {"case": case, "contender": "tensorpose cpu", "ms": t(lambda: cpu_aug(samples))}
        )
        cpu_ms["tensorpose cpu"] = rows[-1]["ms"]
        batch = collate_topdown(samples)
        dev_aug = DeviceAugment(cfg, SK)
        g = torch.Generator().manual_seed(0)
        rows.append(
            {
                "case": case,
                "contender": "tensorpose device (on cpu)",
                "ms": t(lambda: dev_aug(batch, g)),
            }
        )
        rows.append(
            {
                "case": case,
                "contender": "collate_topdown (uint8 pad)",
                "ms": t(lambda: collate_topdown(samples)),
            }
        )
    else:
        batch = collate_topdown(samples)
        pinned = {k: v.pin_memory() if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
        dev_aug = DeviceAugment(cfg, SK)
        g = torch.Generator(device).manual_seed(0)

        def step():
            b = {
                k: v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v
                for k, v in pinned.items()
            }
            return dev_aug(b, g)

        rows.append({"case": case, "contender": "tensorpose device (+H2D)", "ms": t(step)})
        on_dev = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
        rows.append(
            {"case": case, "contender": "tensorpose device", "ms": t(lambda: dev_aug(on_dev, g))}
        )
    for r in rows:
        r["images_per_s"] = B / (r["ms"] / 1e3)
        r["device"] = str(device)
        if "tensorpose cpu" in cpu_ms and device.type == "cuda":
            r["x_cpu_path_per_core"] = cpu_ms["tensorpose cpu"] / r["ms"]
    return rows


def main() -> None:
    p = base_parser(__doc__)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--batch", type=int, default=32)
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    import cv2

    cv2.setNumThreads(torch.get_num_threads())
    cpu_ms: dict = {}
    devs = devices(args.device)
    if any(d.type == "cuda" for d in devs) and not any(d.type == "cpu" for d in devs):
        devs = [torch.device("cpu"), *devs]  # the CPU path is the GPU target's reference
    for device in devs:
        rows = run(device, args, cpu_ms)
        base = "plain opencv" if device.type == "cpu" else "tensorpose device (+H2D)"
        print_table(f"augmentation on {device} (threads {torch.get_num_threads()})", rows, base)
        for r in rows:
            extra = (
                f", {r['x_cpu_path_per_core']:.1f}x the CPU path per core"
                if "x_cpu_path_per_core" in r
                else ""
            )
            print(f"  {r['contender']:<28} {r['images_per_s']:9.0f} images/s{extra}")
        if not args.no_save:
            write_json("augment", device, {"rows": rows, "batch": args.batch})


if __name__ == "__main__":
    main()
