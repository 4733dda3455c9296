"""The 2D top-down input pipeline against MMPose's, one thread each, contenders taking turns.

MMPose 1.3.2 runs its own COCO training pipeline (``_mmpose_worker.py``, in its own virtual
environment created by this script: see ``peer_env.py``); tensorpose runs what ``tensorpose train``
runs on a CPU (``TopDownDataset`` + ``CpuAugment`` in batches of 32 + MSRA heatmaps 64x48 sigma 2
from ``gaussian_heatmaps``), at the same settings: 256x192 crops, flip 0.5, scale 0.5-1.5,
rotation +-80 deg with p 0.6, shift +-0.16, no photometric augmentation. Both see the same people:
the bundled COCO subset (640x480 images) and the same images upscaled 4x (the size of phone and
camera frames). Modes: every sample decoded (tensorpose whole, and reduced as training does by
default: ``data.reduced_decoding``), and images decoded once and cached.

    python benchmarks/peers/mmpose_pipeline.py [--repeats 5] [--samples 172]

Writes the ``mmpose_pipeline`` entry of ``benchmarks/results/peers_cpu.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cv2
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from peer_env import constraints_file, cpu_model, peer_python, peer_version, write_result

from benchmarks.reduced_decoding import upscaled
from tensorpose.augment.crops import AugmentConfig, CpuAugment
from tensorpose.data.images import TopDownDataset
from tensorpose.io.coco import bundled_coco, load_coco_keypoints
from tensorpose.ops.heatmap import gaussian_heatmaps
from tensorpose.skeleton import get_skeleton

HERE = Path(__file__).resolve().parent
SIZE = (256, 192)
CFG = AugmentConfig(output_size=SIZE, scale=0.5, rotation=80.0, rotation_prob=0.6, shift=0.16,
                    flip_prob=0.5, brightness=0.0, contrast=0.0, saturation=0.0, hue=0.0,
                    noise=0.0, noise_prob=0.0, shadow_prob=0.0)  # fmt: skip
ONE_THREAD = {k: "1" for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}


def mmpose_env() -> Path:
    """Every version from ``constraints/mmpose.txt`` (torch and torchvision: the CPU builds)."""
    steps = [["torch"], ["setuptools", "wheel", "numpy"],
             ["--no-build-isolation", "chumpy"],  # an mmpose dependency without a wheel
             ["mmpose", "mmengine", "mmcv-lite", "numpy"]]  # fmt: skip
    return peer_python("mmpose", steps, "import mmpose.datasets.transforms")


def people_json(records: list, path: Path) -> None:
    """The people as the MMPose worker reads them (boxes x1 y1 x2 y2)."""
    rows = [{"img_path": str(r.file),
             "bbox": [float(r.bbox[0]), float(r.bbox[1]), float(r.bbox[0] + r.bbox[2]),
                      float(r.bbox[1] + r.bbox[3])],
             "keypoints": r.keypoints.tolist(), "visible": (r.visibility > 0).tolist()}
            for r in records]  # fmt: skip
    path.write_text(json.dumps(rows))


def tensorpose_rate(ds: TopDownDataset, aug: CpuAugment, n: int, batch: int = 32) -> float:
    H, W = SIZE
    t0 = time.perf_counter()
    for start in range(0, n, batch):
        b = aug([ds[i % len(ds)] for i in range(start, min(start + batch, n))])
        gaussian_heatmaps(b["keypoints"], b["visibility"], (H // 4, W // 4), 2.0, 4.0)
    return n / (time.perf_counter() - t0)


class Worker:
    def __init__(self, python: Path, people: Path) -> None:
        env = {**os.environ, **ONE_THREAD}
        self.proc = subprocess.Popen([str(python), str(HERE / "_mmpose_worker.py"), str(people)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=env)  # fmt: skip

    def rate(self, mode: str, n: int) -> float:
        self.proc.stdin.write(f"{mode} {n}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("the MMPose worker stopped (run it by hand to see why)")
        return json.loads(line)["samples_per_s"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def measure(python: Path, records: list, tmp: Path, repeats: int, n: int) -> dict:
    people = tmp / f"people_{id(records)}.json"
    people_json(records, people)
    worker = Worker(python, people)
    aug = CpuAugment(CFG, get_skeleton("coco17"), seed=0)
    sets = {"full": TopDownDataset(records, SIZE[1] / SIZE[0]),
            "reduced": TopDownDataset(records, SIZE[1] / SIZE[0], reduce_to=SIZE,
                                      min_window=1 - CFG.scale),
            "cached": TopDownDataset(records, SIZE[1] / SIZE[0], cache_images=True)}  # fmt: skip
    rates: dict[str, list[float]] = {k: [] for k in
                                     ("mmpose_decode", "tp_full", "tp_reduced",
                                      "mmpose_cached", "tp_cached")}  # fmt: skip
    worker.rate("decode", len(records))  # warm-up of both
    for ds in sets.values():
        tensorpose_rate(ds, aug, len(records))
    for _ in range(repeats):
        rates["mmpose_decode"].append(worker.rate("decode", n))
        rates["tp_full"].append(tensorpose_rate(sets["full"], aug, n))
        rates["tp_reduced"].append(tensorpose_rate(sets["reduced"], aug, n))
        rates["mmpose_cached"].append(worker.rate("cached", n))
        rates["tp_cached"].append(tensorpose_rate(sets["cached"], aug, n))
    worker.close()
    med = {k: round(statistics.median(v), 1) for k, v in rates.items()}
    counts = {str(k): int((sets["reduced"].reduction == k).sum()) for k in (1, 2, 4, 8)}
    return {"samples_per_s": med, "reductions": counts,
            "ratio_decode_full": round(med["tp_full"] / med["mmpose_decode"], 2),
            "ratio_decode_reduced": round(med["tp_reduced"] / med["mmpose_decode"], 2),
            "ratio_cached": round(med["tp_cached"] / med["mmpose_cached"], 2)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--samples", type=int, default=172, help="samples per timed run (43 x 4)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cv2.setNumThreads(1)
    python = mmpose_env()
    records = load_coco_keypoints(bundled_coco()).records
    load_before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory() as tmp:
        result = {
            "what": __doc__.split("\n\n")[0].replace("\n", " "),
            "settings": "256x192, flip 0.5, scale 0.5-1.5, rotation +-80 p 0.6, shift 0.16, "
            "MSRA heatmaps 64x48 sigma 2, no photometric",
            "mmpose": peer_version(python, "mmpose"), "tensorpose_torch": torch.__version__,
            "threads": 1, "repeats": args.repeats, "samples_per_run": args.samples,
            "machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "cpu": cpu_model(), "constraints": str(constraints_file("mmpose").relative_to(
                HERE.parent.parent)),
            "load_average_before": load_before,
            "bundled 640x480": measure(python, records, Path(tmp), args.repeats, args.samples),
            "upscaled 4x": measure(python, upscaled(records, Path(tmp), 4), Path(tmp),
                                   args.repeats, args.samples),
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        }  # fmt: skip
    write_result("mmpose_pipeline", result)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
