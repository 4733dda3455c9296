"""Reduced JPEG decoding for top-down crops: samples/s of the CPU path (decode every sample +
CpuAugment at the issue-23 settings: flip 0.5, scale 0.5-1.5, rotation +-80 deg with p 0.6,
256x192 crops), full decoding against ``TopDownDataset(reduce_to=...)``, one thread, in turns.

Two image sets: the bundled COCO subset as it is (640x480: a 256x192 crop of a COCO person
rarely has 2 decoded pixels per crop pixel at the smallest window, so reductions are rare) and
the same images upscaled 4x (the size of phone or camera frames).

    python benchmarks/reduced_decoding.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
import torch

from tensorpose.augment.crops import AugmentConfig, CpuAugment, sample_params
from tensorpose.data.images import TopDownDataset
from tensorpose.io.coco import bundled_coco, load_coco_keypoints
from tensorpose.skeleton import get_skeleton

RESULTS = Path(__file__).resolve().parent / "results"
CFG = AugmentConfig(output_size=(256, 192), scale=0.5, rotation=80.0, rotation_prob=0.6,
                    flip_prob=0.5, shift=0.16)  # fmt: skip


def upscaled(records: list, folder: Path, up: int) -> list:
    out = []
    for r in records:
        path = folder / f"{r.image_id}.jpg"
        if not path.exists():
            big = cv2.resize(cv2.imread(str(r.file)), None, fx=up, fy=up,
                             interpolation=cv2.INTER_CUBIC)  # fmt: skip
            cv2.imwrite(str(path), big, [cv2.IMWRITE_JPEG_QUALITY, 95])
        out.append(dataclasses.replace(
            r, file=path, width=r.width * up, height=r.height * up, bbox=r.bbox * up,
            keypoints=(r.keypoints + 0.5) * up - 0.5, area=r.area * up * up))  # fmt: skip
    return out


def samples_per_s(ds: TopDownDataset, aug: CpuAugment, params) -> float:
    t0 = time.perf_counter()
    aug.apply([ds[i] for i in range(len(ds))], params)
    return len(ds) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    torch.set_num_threads(1)
    cv2.setNumThreads(1)
    records = load_coco_keypoints(bundled_coco()).records
    aug = CpuAugment(CFG, get_skeleton("coco17"))
    params = sample_params(CFG, len(records), torch.Generator().manual_seed(0))
    load = os.getloadavg()
    result = {"settings": "flip 0.5, scale 0.5-1.5, rotation +-80 p 0.6, shift 0.16, 256x192",
              "repeats": args.repeats, "load_average_before": [round(x, 2) for x in load],
              "sets": {}}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for name, recs in (("bundled 640x480", records),
                           ("upscaled 4x", upscaled(records, Path(tmp), 4))):  # fmt: skip
            full = TopDownDataset(recs)
            red = TopDownDataset(recs, reduce_to=CFG.output_size, min_window=1 - CFG.scale)
            rates: dict[str, list[float]] = {"full": [], "reduced": []}
            samples_per_s(full, aug, params)  # warm-up
            for _ in range(args.repeats):
                rates["full"].append(samples_per_s(full, aug, params))
                rates["reduced"].append(samples_per_s(red, aug, params))
            med = {k: statistics.median(v) for k, v in rates.items()}
            result["sets"][name] = {
                "reductions": {str(r): int(n) for r, n in
                               zip(*np.unique(red.reduction, return_counts=True), strict=True)},
                "samples_per_s_full": round(med["full"], 1),
                "samples_per_s_reduced": round(med["reduced"], 1),
                "speedup": round(med["reduced"] / med["full"], 2),
            }  # fmt: skip
            print(name, result["sets"][name], flush=True)
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    (RESULTS / "reduced_decoding_cpu.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
