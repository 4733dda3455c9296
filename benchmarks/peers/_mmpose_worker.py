"""Runs INSIDE the MMPose environment (see mmpose_pipeline.py): MMPose 1.3.2's COCO top-down
training pipeline from its td-hm_res50 256x192 config (LoadImage, GetBBoxCenterScale,
RandomFlip, RandomBBoxTransform, TopdownAffine, GenerateTarget with MSRAHeatmap 64x48 sigma 2,
PackPoseInputs; RandomHalfBody left out: tensorpose has no counterpart), one thread.

Protocol: argv[1] is a JSON file of people; each stdin line ``decode N`` or ``cached N`` runs N
samples (cycling over the people) and answers one JSON line ``{"samples_per_s": ...}``.
"""

import json
import sys
import time

import cv2
import numpy as np

cv2.setNumThreads(1)

import mmpose.codecs  # noqa: E402, F401  (registers MSRAHeatmap)
from mmpose.datasets.transforms import (  # noqa: E402
    GenerateTarget,
    GetBBoxCenterScale,
    LoadImage,
    PackPoseInputs,
    RandomBBoxTransform,
    RandomFlip,
    TopdownAffine,
)

FLIP = [0, 2, 1, 4, 3, 6, 5, 8, 7, 10, 9, 12, 11, 14, 13, 16, 15]
CODEC = dict(type="MSRAHeatmap", input_size=(192, 256), heatmap_size=(48, 64), sigma=2)
LOAD = LoadImage()
AUGMENT = [
    GetBBoxCenterScale(),
    RandomFlip(direction="horizontal"),
    RandomBBoxTransform(),  # shift 0.16 p 0.3, scale 0.5-1.5, rotation +-80 p 0.6 (defaults)
    TopdownAffine(input_size=(192, 256)),
    GenerateTarget(encoder=CODEC),
    PackPoseInputs(),
]


def info(p: dict, i: int) -> dict:
    return {
        "img_path": p["img_path"],
        "img_id": i,
        "id": i,
        "category_id": 1,
        "bbox": np.array([p["bbox"]], np.float32),
        "bbox_score": np.ones(1, np.float32),
        "keypoints": np.array([p["keypoints"]], np.float32),
        "keypoints_visible": np.array([p["visible"]], np.float32),
        "flip_indices": FLIP,
    }


def run(people: list[dict], n: int, cached: list[dict] | None) -> float:
    np.random.seed(0)  # noqa: NPY002  (MMPose draws from the global state)
    t0 = time.perf_counter()
    for i in range(n):
        k = i % len(people)
        r = dict(cached[k]) if cached is not None else LOAD(info(people[k], k))
        for t in AUGMENT:
            r = t(r)
    return n / (time.perf_counter() - t0)


def main() -> None:
    people = json.load(open(sys.argv[1]))
    cached = [LOAD(info(p, i)) for i, p in enumerate(people)]
    for line in sys.stdin:
        mode, n = line.split()
        rate = run(people, int(n), cached if mode == "cached" else None)
        print(json.dumps({"samples_per_s": rate}), flush=True)


if __name__ == "__main__":
    main()
