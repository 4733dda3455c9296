"""BlazePose image mode on CUDA against the CPU on the bundled pictures, under the caller's
cuDNN TF32 setting on (PyTorch's default) and off: the median and largest landmark distance in
pixels, and the difference in visibility. The networks run their convolutions in full float32
whatever the setting (with TF32 they moved landmarks by a median of 0.21 px, up to 16.9 px, on
an H200), so both lines must agree with the CPU. Prints one line per setting and writes
``benchmarks/results/blazepose_tf32_cuda.json``.

    python scripts/blazepose_tf32.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.common import device_info  # noqa: E402
from tensorpose.blazepose.pipeline import BlazePose, image_people  # noqa: E402
from tensorpose.io.video import read_image  # noqa: E402
from tensorpose.pose2d import pad_frames  # noqa: E402

IMAGES = sorted((ROOT / "tensorpose/assets/coco/images").glob("*.jpg"))


def keypoints(device: torch.device) -> list[np.ndarray]:
    bp = BlazePose.load(device)
    images, sizes = pad_frames([read_image(p) for p in IMAGES], device)
    with torch.no_grad():
        people = image_people(bp, images, sizes, max_people=1)
    return [p["keypoints"].cpu().numpy() for p in people]


def main() -> int:
    cuda = torch.device("cuda")
    cpu = keypoints(torch.device("cpu"))
    report = {"what": __doc__.split("\n\n")[0], **device_info(cuda), "images": len(IMAGES)}
    for tf32 in (True, False):
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=tf32):
            gpu = keypoints(cuda)
        same = [(a, b) for a, b in zip(cpu, gpu, strict=True) if a.shape == b.shape and len(a)]
        d = np.concatenate([np.linalg.norm(a[..., :2] - b[..., :2], axis=-1).ravel()
                            for a, b in same])  # fmt: skip
        v = np.concatenate([np.abs(a[..., 2] - b[..., 2]).ravel() for a, b in same])
        r = {"people_cpu": sum(len(a) for a in cpu), "people_cuda": sum(len(b) for b in gpu),
             "median_px": float(np.median(d)), "max_px": float(d.max()),
             "max_visibility": float(v.max())}  # fmt: skip
        report["tf32" if tf32 else "fp32"] = r
        print(f"TF32 {'on ' if tf32 else 'off'}: {r}")
    out = ROOT / "benchmarks/results/blazepose_tf32_cuda.json"
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
