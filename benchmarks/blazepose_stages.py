"""Where BlazePose's time goes, stage by stage, on one thread (or a GPU when there is one).

Image mode over a batch of frames of the balancing trial: the detector's crop, its network, its
decoding and weighted NMS, the landmark crops, the landmark network, the landmarks back to
pixels, and the whole ``image_people``; the landmark network on one crop alone (as video mode
runs it); video mode: one ``BlazePoseTracker.step`` per frame;
also the decoding of the video itself. Milliseconds per frame (medians)::

    python benchmarks/blazepose_stages.py --device cpu

writes ``benchmarks/results/blazepose_stages_cpu.json`` (with the load average: on a shared
CPU compare the stages with each other, not with other runs).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import base_parser, devices, timeit, write_json  # noqa: E402
from tensorpose.blazepose.geometry import (  # noqa: E402
    decode_detections,
    decode_landmarks,
    letterbox_roi,
    roi_matrix,
    weighted_nms,
)
from tensorpose.blazepose.pipeline import (  # noqa: E402
    BlazePose,
    BlazePoseTracker,
    crop_rois,
    detect_rois,
    image_people,
)
from tensorpose.io.video import iter_frames  # noqa: E402
from tensorpose.pose2d import pad_frames  # noqa: E402

VIDEO = ROOT / "examples/balancing_trial/videos/cam01.mp4"


def stages(device: torch.device, video: Path, batch: int, repeats: int) -> dict[str, float]:
    """Milliseconds per frame of each stage."""
    t0, frames = time.perf_counter(), []
    for fb in iter_frames(video, batch):
        frames += fb.images
        if len(frames) >= 3 * batch:
            break
    decode = (time.perf_counter() - t0) / len(frames)
    bp = BlazePose.load(device)
    images, sizes = pad_frames(frames[:batch], device)
    k = torch.arange(batch, device=device)
    per = 1e3 / batch

    def run(fn):
        with torch.inference_mode():
            return timeit(fn, device, warmup=2, repeats=repeats) * per

    with torch.inference_mode():
        c, s, r = letterbox_roi(sizes)
        M = roi_matrix(c, s, r, 224)
        x = crop_rois(images, M, 224, k, sizes, "constant").float() * (2 / 255) - 1
        raw, logits = bp.detector(x)
        cc, ss, rr, _ = detect_rois(bp, images, sizes, 1)
        Ml = roi_matrix(cc[:, 0], ss[:, 0], rr[:, 0], 256)
        crops = crop_rois(images, Ml, 256, k, sizes, "replicate").float() * (1 / 255)
        out = bp.landmark(crops, outputs=(0, 1, 3))
    row = {
        "video decode": decode * 1e3,
        "detector crop": run(lambda: crop_rois(images, M, 224, k, sizes, "constant")),
        "detector network": run(lambda: bp.detector(x)),
        "detector decoding + NMS": run(
            lambda: weighted_nms(*decode_detections(raw, logits, bp.anchors), 1, 0.3, 0.5)
        ),
        "landmark crops": run(lambda: crop_rois(images, Ml, 256, k, sizes, "replicate")),
        "landmark network": run(lambda: bp.landmark(crops, outputs=(0, 1, 3))),
        "landmark network, one crop alone": run(lambda: bp.landmark(crops[:1], outputs=(0, 1, 3)))
        * batch,
        "landmarks to pixels": run(
            lambda: decode_landmarks(out[0], cc[:, 0], ss[:, 0], rr[:, 0], out[3])
        ),
        "image_people (all of image mode)": run(lambda: image_people(bp, images, sizes, 1)),
    }
    tracker = BlazePoseTracker(bp, 1, 1)
    one = [pad_frames([f], device) for f in frames]
    tracker.step(*one[0])
    t0 = time.perf_counter()
    for im in one[1:]:
        tracker.step(*im)
    row["video mode: one tracker step"] = (time.perf_counter() - t0) / (len(one) - 1) * 1e3
    return row


def main() -> None:
    p = base_parser(__doc__.split("\n\n")[0])
    p.add_argument("--video", type=Path, default=VIDEO)
    p.add_argument("--batch-size", type=int, default=8)
    a = p.parse_args()
    for device in devices(a.device):
        if device.type == "cpu":
            torch.set_num_threads(1)
        load = os.getloadavg()
        row = stages(device, a.video, a.batch_size, a.repeats)
        print(f"BlazePose stages on {device}, batch {a.batch_size}, ms per frame:")
        for name, ms in row.items():
            print(f"  {name:34s} {ms:7.1f}")
        if not a.no_save:
            write_json("blazepose_stages", device, {"video": str(a.video), "batch": a.batch_size,
                       "threads": torch.get_num_threads(), "load_average_start": load,
                       "load_average": os.getloadavg(), "ms_per_frame": row})  # fmt: skip


if __name__ == "__main__":
    main()
