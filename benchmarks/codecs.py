"""2D target codecs and the DeepPose loss, side by side with their naive loops.

Cases (each against its baseline, same inputs, one process):
  heatmaps      B=32 people, K=17, 64x48 maps, sigma 2, stride 4 (256x192 crops):
                msra loop (numpy, per keypoint) vs tensorpose eager vs torch.compile
  centernet     the bundled COCO subset (16 images, all 85 non-crowd people, N=32 slots) on
                128x128 maps: per-object numpy loop vs tensorpose (data-sized patches, the CPU
                path) vs tensorpose with a static max_radius (the sync-free GPU path)
  decode        B=32, K=17, 64x48: MSRA get_final_preds loop vs batched quarter / subpixel
  masked_mse    forward + backward, B=256 (and 4096) x 17 x 2: autograd vs explicit Function

Usage: python benchmarks/codecs.py [--device cpu|cuda|both] [--threads 1] [--no-compile]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import base_parser, devices, print_table, timeit, write_json
from benchmarks.naive2d import centernet_targets_loop, msra_heatmaps, quarter_decode_loop
from tensorpose.io.coco import bundled_coco, load_coco_keypoints
from tensorpose.losses import masked_mse, masked_mse_explicit
from tensorpose.ops.heatmap import (
    centernet_radius_bound,
    centernet_targets,
    decode_heatmaps,
    gaussian_heatmaps,
)


def coco_people(size: int = 128, slots: int = 32):
    """Boxes (x1, y1, x2, y2) and keypoints of every non-crowd person of the bundled subset,
    scaled so each image's long side spans the ``size`` map; padded to ``slots`` per image."""
    c = load_coco_keypoints(bundled_coco(), min_keypoints=0, warn=False)
    ids = sorted(c.images)
    B = len(ids)
    boxes = np.zeros((B, slots, 4), np.float32)
    kps = np.zeros((B, slots, 17, 2), np.float32)
    vis = np.zeros((B, slots, 17), np.int64)
    valid = np.zeros((B, slots), bool)
    count = dict.fromkeys(ids, 0)
    for r in c.records:
        b, n = ids.index(r.image_id), count[r.image_id]
        if n >= slots:
            continue
        s = size / max(r.width, r.height)
        x, y, w, h = r.bbox
        boxes[b, n] = np.array([x, y, x + w, y + h]) * s
        kps[b, n] = r.keypoints * s
        vis[b, n] = r.visibility
        valid[b, n] = True
        count[r.image_id] += 1
    return boxes, kps, vis, valid


def run(device: torch.device, args) -> list[dict]:
    rows: list[dict] = []
    t = lambda fn: timeit(fn, device, args.warmup, args.repeats) * 1e3  # noqa: E731
    rng = np.random.default_rng(0)
    cpu = device.type == "cpu"

    # ---------------------------------------------------------------- heatmaps
    B, K, H, W, sigma, stride = 32, 17, 64, 48, 2.0, 4.0
    kp = rng.uniform(-10, [W * stride + 10, H * stride + 10], (B, K, 2)).astype(np.float32)
    vis = rng.integers(0, 3, (B, K))
    tk, tv = torch.from_numpy(kp).to(device), torch.from_numpy(vis).to(device)
    case = "heatmaps B32 K17 64x48"
    if cpu:
        rows.append(
            {
                "case": case,
                "contender": "loop (numpy)",
                "ms": t(
                    lambda: [msra_heatmaps(kp[b], vis[b], (H, W), sigma, stride) for b in range(B)]
                ),
            }
        )
    rows.append(
        {
            "case": case,
            "contender": "tensorpose eager",
            "ms": t(lambda: gaussian_heatmaps(tk, tv, (H, W), sigma, stride)),
        }
    )
    if not args.no_compile:
        fn = torch.compile(gaussian_heatmaps, dynamic=False)
        rows.append(
            {
                "case": case,
                "contender": "tensorpose compile",
                "ms": t(lambda: fn(tk, tv, (H, W), sigma, stride)),
            }
        )

    # ---------------------------------------------------------------- CenterNet targets
    boxes, ckps, cvis, valid = coco_people(128)
    case = "centernet coco16 128x128"
    if cpu:
        rows.append(
            {
                "case": case,
                "contender": "loop (numpy)",
                "ms": t(
                    lambda: [
                        centernet_targets_loop(boxes[b], ckps[b], cvis[b], valid[b], 128, 128)
                        for b in range(len(boxes))
                    ]
                ),
            }
        )
    targs = [torch.from_numpy(x).to(device) for x in (boxes, ckps, cvis, valid)]
    rows.append(
        {
            "case": case,
            "contender": "tensorpose (data-sized)",
            "ms": t(lambda: centernet_targets(*targs, (128, 128))),
        }
    )
    R = centernet_radius_bound((128, 128))
    rows.append(
        {
            "case": case,
            "contender": f"tensorpose static r<={R}",
            "ms": t(lambda: centernet_targets(*targs, (128, 128), max_radius=R)),
        }
    )

    # ---------------------------------------------------------------- decoding
    hm, _ = gaussian_heatmaps(torch.from_numpy(kp), torch.from_numpy(vis), (H, W), sigma, stride)
    hm = hm + 0.05 * torch.rand(hm.shape, generator=torch.Generator().manual_seed(0))
    hm_np, hm_dev = hm.numpy(), hm.to(device)
    case = "decode B32 K17 64x48"
    if cpu:
        rows.append(
            {"case": case, "contender": "loop (numpy)", "ms": t(lambda: quarter_decode_loop(hm_np))}
        )
    rows.append(
        {
            "case": case,
            "contender": "batched quarter",
            "ms": t(lambda: decode_heatmaps(hm_dev, "quarter")),
        }
    )
    rows.append(
        {
            "case": case,
            "contender": "batched subpixel",
            "ms": t(lambda: decode_heatmaps(hm_dev, "subpixel")),
        }
    )

    # ---------------------------------------------------------------- masked MSE
    for n in (256, 4096):
        g = torch.Generator().manual_seed(n)
        pred = torch.randn(n, 17, 2, generator=g).to(device).requires_grad_()
        target = torch.randn(n, 17, 2, generator=g).to(device)
        mvis = torch.randint(0, 3, (n, 17), generator=g).to(device)
        case = f"masked_mse B{n} fwd+bwd"

        def step(fn, pred=pred, target=target, mvis=mvis):
            pred.grad = None
            fn(pred, target, mvis).backward()

        rows.append({"case": case, "contender": "autograd", "ms": t(lambda: step(masked_mse))})
        rows.append(
            {
                "case": case,
                "contender": "explicit backward",
                "ms": t(lambda: step(masked_mse_explicit)),
            }
        )
    for r in rows:
        r["device"] = str(device)
    return rows


def main() -> None:
    p = base_parser(__doc__)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--no-compile", action="store_true")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    for device in devices(args.device):
        rows = run(device, args)
        title = f"on {device} (threads {torch.get_num_threads()})"
        codec = [r for r in rows if not r["case"].startswith("masked_mse")]
        mse = [r for r in rows if r["case"].startswith("masked_mse")]
        print_table(f"codecs vs their naive loops {title}", codec, "loop (numpy)")
        print_table(f"masked MSE, explicit backward vs autograd {title}", mse, "autograd")
        if not args.no_save:
            write_json("codecs", device, {"rows": rows})


if __name__ == "__main__":
    main()
