"""Synthetic lifting batches (kinematic augmentation, tensorpose.data.synth) against a training
step of the lifter, and each against its baseline:

- batch assembly: ``SyntheticLiftingBatches.sample`` (vectorised over the batch) vs its naive
  twin (the same augmenter called once per window in a Python loop), next to the plain mocap
  pipeline (``LiftingSet.batch``: window gather + flip + screen normalisation, no augmentation);
- compute: forward + backward + Adam step of the default lifter (receptive field 27, 256
  channels, kinematic head) on the same batch size;
- joint rotations: ``ops.poseaug_joints.rotate_joints`` (quaternions, a loop over the depth
  levels of the limited joints, bones composed by one product) vs the same rotations as matrices
  through ``ops.kinematics.forward_kinematics`` (the naive twin of the tests), per frame of a
  batch.

Regions are interleaved (so that load from other processes hits them alike); warm-up, repeats,
median. Prints a table with ratios and writes ``benchmarks/results/synth_<device>.json``.
On a shared CPU quote ratios, not absolute times.

    PYTHONPATH=. python benchmarks/synth.py [--device cpu] [--threads 1] [--repeats 20]
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import base_parser, devices, times, write_json
from tensorpose.config import load_config
from tensorpose.data.mocap import LiftingSet, load_bvh_sequences
from tensorpose.data.synth import SynthConfig, SyntheticLiftingBatches
from tensorpose.lifting.model import TemporalLifter
from tensorpose.ops import forward_kinematics
from tensorpose.ops.poseaug_joints import (
    H36M17_LIMITS,
    joint_rotations,
    rotate_joints,
    sample_joint_angles,
)
from tensorpose.tasks.lifting import LiftingTask


def quat_to_matrix(q: torch.Tensor) -> torch.Tensor:
    w, x, y, z = q.unbind(-1)
    rows = (
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    )  # fmt: skip
    return torch.stack(rows, -1).reshape(*q.shape[:-1], 3, 3)


def main() -> None:
    ap = base_parser(__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for device in devices(args.device):
        run(device, args)


def run(device: torch.device, args) -> None:
    B, R = args.batch, 27
    seqs, sk = load_bvh_sequences(["131_01", "131_02"])
    g = torch.Generator(device=device).manual_seed(0)
    sampler = SyntheticLiftingBatches([s.positions for s in seqs], sk, B, R, g, SynthConfig())
    aug = sampler.augmenter
    lifting = LiftingSet.from_world(seqs, sk, 32).to(device)
    frames = lifting.target_frames[:B]
    model = TemporalLifter(sk, R, 256).to(device).train()
    cfg = load_config(Path(__file__).resolve().parents[1] / "configs/lift_cmu.yaml", [])
    task = LiftingTask(model, cfg)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, amsgrad=True)
    state = {"batch": sampler.sample()}
    windows, lengths = sampler.sample_windows()

    def synth():
        state["batch"] = sampler.sample()

    def naive_synth():  # the obvious loop: one window at a time through the same augmenter
        for b in range(B):
            aug(windows[b : b + 1], g, lengths[b : b + 1])

    def plain():
        lifting.batch(frames, R, 0.5, g)

    def compute():
        b = state["batch"]
        out = task({"keypoints": b["keypoints"], "target": b["target"]})
        opt.zero_grad(set_to_none=True)
        out["loss"].backward()
        opt.step()

    poses = windows.reshape(-1, 17, 3)
    angles = sample_joint_angles((len(poses),), g)

    def rotate():
        rotate_joints(poses, angles, sk)

    parent = [p if p >= 0 else j for j, p in enumerate(sk.parents)]
    lim = [sk.index(n) for n in H36M17_LIMITS]

    def rotate_fk():  # naive twin: the same rotations as matrices through the FK level loop
        q = joint_rotations(poses, angles, sk)
        Rm = torch.eye(3, device=device).repeat(len(poses), 17, 1, 1)
        Rm[:, lim] = quat_to_matrix(q)
        forward_kinematics(Rm, poses - poses[:, parent], poses[:, sk.root], sk)

    fns = {"synth": synth, "naive_synth": naive_synth, "plain": plain, "compute": compute,
           "rotate": rotate, "rotate_fk": rotate_fk}  # fmt: skip
    for fn in fns.values():
        times(fn, device, warmup=args.warmup, repeats=0)
    runs: dict[str, list[float]] = {k: [] for k in fns}
    for i in range(args.repeats):
        for name, fn in fns.items():
            if name != "naive_synth" or i % 4 == 0:  # the slow baseline less often
                runs[name] += times(fn, device, warmup=0, repeats=1)
    med = {k: statistics.median(v) for k, v in runs.items()}
    print(f"\nsynthetic lifting batches, batch {B} x {R} frames, {device.type}, "
          f"{torch.get_num_threads()} threads, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"{'region':<58s} {'median ms':>10s} {'samples/s':>10s} {'ratio':>8s}")
    table = [
        ("synthetic batch (SyntheticLiftingBatches.sample)", "synth", "x1"),
        ("  naive twin: augmenter per window, Python loop", "naive_synth",
         f"{med['naive_synth'] / med['synth']:.0f}x slower"),
        ("plain mocap batch (LiftingSet.batch, no augmentation)", "plain", ""),
        ("lifter forward + backward + Adam step", "compute",
         f"{med['synth'] / med['compute']:.2f} of it"),
        (f"rotate_joints, {len(poses)} poses (quaternion level loop)", "rotate", "x1"),
        ("  same rotations, matrices through forward_kinematics", "rotate_fk",
         f"{med['rotate_fk'] / med['rotate']:.1f}x slower"),
    ]  # fmt: skip
    for label, key, ratio in table:
        n = len(poses) if key.startswith("rotate") else B
        print(f"{label:<58s} {1000 * med[key]:10.2f} {n / med[key]:10.0f} {ratio:>8s}")
    if not args.no_save:
        write_json(
            "synth",
            device,
            {
                "batch_size": B,
                "receptive_field": R,
                "repeats": args.repeats,
                "median_s": med,
                "samples_per_s": {k: B / v for k, v in med.items() if "rotate" not in k},
                "sampler_over_compute": med["synth"] / med["compute"],
                "naive_over_vectorised": med["naive_synth"] / med["synth"],
                "fk_over_quaternions": med["rotate_fk"] / med["rotate"],
                "load_average_1min": os.getloadavg()[0],
            },
        )


if __name__ == "__main__":
    main()
