"""Where a lifting training step spends its time: batch assembly (window gather + flip +
screen normalisation) vs compute (forward + backward + optimizer step), for the default recipe
(configs/lift_cmu.yaml) on the real bundled CMU data.

Also times the naive twin of batch assembly (a Python loop slicing one edge-padded window per
sample, flipping per sample) as the baseline the tensor gather must beat.

Each timed region: warm-up, then ``--repeats`` runs, median, device synchronisation around it.
Prints a table and writes ``benchmarks/results/lifting_<device>.json`` (device, torch version,
threads). Absolute times on a shared CPU are noisy; the data share of the step is the claim.

    PYTHONPATH=. python benchmarks/lifting.py [--device cpu] [--repeats 30] [key=value ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import device_name, times
from tensorpose.config import load_config
from tensorpose.data.mocap import LiftingSet
from tensorpose.ops.camera import normalize_screen
from tensorpose.tasks import build_model
from tensorpose.tasks.lifting import LiftingTask
from tensorpose.train.distributed import resolve_device

ROOT = Path(__file__).resolve().parent


def naive_batch(data: LiftingSet, frames: torch.Tensor, rf: int, flip: torch.Tensor) -> dict:
    """The obvious loop: per sample, find its clip, slice an edge-padded window, flip it."""
    half = rf // 2
    kps, tgs = [], []
    fi = data.flip_index
    for f, fl in zip(frames.tolist(), flip.tolist(), strict=True):
        start = int(data.clip_start[f])
        length = int(data.clip_length[f])
        pos = f - start
        idx = [start + min(max(pos + o, 0), length - 1) for o in range(-half, rf - half)]
        kp = normalize_screen(data.pixels[idx], data.width, data.height)
        tg = data.targets[f : f + 1]
        if fl:
            kp = kp[:, fi] * kp.new_tensor([-1.0, 1.0])
            tg = tg[:, fi] * tg.new_tensor([-1.0, 1.0, 1.0])
        kps.append(kp)
        tgs.append(tg)
    return {"keypoints": torch.stack(kps), "target": torch.stack(tgs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--config", default=str(ROOT.parent / "configs" / "lift_cmu.yaml"))
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args()

    cfg = load_config(args.config, args.overrides)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    torch.manual_seed(0)
    model = build_model(cfg).to(device).train()
    task = LiftingTask(model, cfg)
    train_set = task.load_split(cfg.data.train, cfg.data.train_cameras).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.train.lr, amsgrad=True)
    rf = model.receptive_field()
    B = cfg.train.batch_size
    gen = torch.Generator(device=device).manual_seed(0)
    order = train_set.target_frames[torch.randperm(len(train_set), generator=gen, device=device)]
    frames = order[:B]
    state = {"batch": train_set.batch(frames, rf, cfg.data.flip, gen)}

    def data_step():
        state["batch"] = train_set.batch(frames, rf, cfg.data.flip, gen)

    def compute_step():
        out = task(state["batch"])
        opt.zero_grad(set_to_none=True)
        out["loss"].backward()
        opt.step()

    def full_step():
        data_step()
        compute_step()

    flip = torch.rand(B, generator=gen, device=device) < cfg.data.flip

    def naive_step():
        naive_batch(train_set, frames, rf, flip)

    # Same result as the vectorised path (checked here on the benchmark's own inputs).
    fast = train_set.batch(frames, rf)
    slow = naive_batch(train_set, frames, rf, torch.zeros(B, dtype=torch.bool))
    assert torch.equal(fast["keypoints"], slow["keypoints"])

    reps = args.repeats
    # Interleave the regions so that load from other processes hits them alike.
    runs: dict[str, list[float]] = {"data": [], "compute": [], "step": [], "naive_data": []}
    fns = {"data": data_step, "compute": compute_step, "step": full_step, "naive_data": naive_step}
    for fn in fns.values():
        times(fn, device, warmup=2, repeats=0)
    for i in range(reps):
        for name, fn in fns.items():
            if name != "naive_data" or i % 4 == 0:
                runs[name] += times(fn, device, warmup=0, repeats=1)
    med = {k: statistics.median(v) for k, v in runs.items()}
    best = {k: min(v) for k, v in runs.items()}
    t_data, t_compute, t_full, t_naive = (med[k] for k in ("data", "compute", "step", "naive_data"))
    share = t_data / (t_data + t_compute)
    rows = [
        ("batch assembly (gather + flip + normalise)", t_data),
        ("compute (forward + backward + Adam step)", t_compute),
        ("full training step", t_full),
        ("naive batch assembly (Python loop, baseline)", t_naive),
    ]
    print(
        f"lifting training step, batch {B}, receptive field {rf}, {cfg.model.head} head, "
        f"{cfg.model.channels} channels, {device.type}, {torch.get_num_threads()} threads"
    )
    print(f"{'region':<48s} {'median ms':>10s} {'min ms':>8s}")
    for (name, t), key in zip(rows, ("data", "compute", "step", "naive_data"), strict=True):
        print(f"{name:<48s} {1000 * t:10.2f} {1000 * best[key]:8.2f}")
    share_min = best["data"] / (best["data"] + best["compute"])
    print(
        f"data share of the step: {100 * share:.1f}% of medians, {100 * share_min:.1f}% of minima"
        "  (claim: < 10%)"
    )
    print(f"vectorised assembly is {t_naive / t_data:.0f}x faster than the naive loop")
    result = {
        "benchmark": "lifting",
        "device": device.type,
        "device_name": device_name(device),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "batch_size": B,
        "receptive_field": rf,
        "head": cfg.model.head,
        "channels": cfg.model.channels,
        "repeats": reps,
        "median_s": med,
        "min_s": best,
        "data_share": share,
        "data_share_of_minima": share_min,
        "load_average_1min": os.getloadavg()[0],
        "naive_over_vectorised": t_naive / t_data,
    }
    out = ROOT / "results" / f"lifting_{device.type}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
