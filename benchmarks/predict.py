"""Prediction throughput (images/s) of ``tensorpose.predict`` on the bundled COCO images,
end to end: JPEG decoding, batching, crops or letterbox on the device, forward pass, decoding,
and every output (COCO results, OpenPose JSON, drawn pictures).

Models (randomly initialised: throughput does not depend on the weights):
  centernet tiny   CenterNet, ResNet-10 width 16, 256x256 letterbox (scripts/centernet_overfit.py)
  heatmap recipe   SimpleBaseline, ResNet-18 width 32, 128x96 crops (configs/heatmap_coco.yaml),
                   top-down on the ground-truth boxes of the bundled file (85 people)
Each at batch 1 (one frame per forward pass: the baseline) and batch 8.

Usage: python benchmarks/predict.py [--device cpu|cuda|both] [--threads 1] [--repeats 3]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import base_parser, devices, print_table, timeit, write_json
from tensorpose.apps.predict import predict
from tensorpose.centernet.model import build_model as centernet_model
from tensorpose.io.coco import bundled_coco
from tensorpose.models.heads import heatmap_pose_net
from tensorpose.pose2d import PoseModel


def run(device: torch.device, args) -> list[dict]:
    images = bundled_coco().parent / "images"
    n = len(list(images.glob("*.jpg")))
    torch.manual_seed(0)
    models = {
        "centernet tiny": (
            PoseModel(centernet_model(17, 10, 16).to(device).eval(), "centernet", (256, 256)),
            {},
        ),
        "heatmap recipe": (
            PoseModel(heatmap_pose_net(17, 18, 32).to(device).eval(), "heatmap", (128, 96)),
            {"boxes": bundled_coco(), "box_threshold": 0.0},
        ),
    }
    rows = []
    out = Path(tempfile.mkdtemp(prefix="tensorpose-bench-predict-"))
    try:
        for name, (pose, kw) in models.items():
            for bs in (1, 8):
                ms = timeit(
                    lambda pose=pose, kw=kw, bs=bs: predict(
                        images, pose, out, batch_size=bs, progress=False, overwrite=True, **kw
                    ),
                    device, args.warmup, args.repeats,
                ) * 1e3  # fmt: skip
                rows.append({"case": name, "contender": f"batch {bs}", "ms": ms,
                             "images_per_s": n / (ms / 1e3), "images": n,
                             "device": str(device)})  # fmt: skip
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return rows


def main() -> None:
    p = base_parser(__doc__)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.set_defaults(repeats=3, warmup=1)
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    for device in devices(args.device):
        rows = run(device, args)
        print_table(f"predict, 16 bundled COCO images, on {device} (threads "
                    f"{torch.get_num_threads()})", rows, "batch 1")  # fmt: skip
        for r in rows:
            print(f"  {r['case']:<16s} {r['contender']:<8s} {r['images_per_s']:7.2f} images/s")
        if not args.no_save:
            write_json("predict", device, {"rows": rows})


if __name__ == "__main__":
    main()
