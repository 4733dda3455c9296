"""Input-pipeline diagnosis (``tensorpose profile-data CONFIG``): where a top-down 2D batch's
time goes before the model sees it, and what to change.

Stages, each timed by running it directly on a sample of records, in this process:

- ``read``: the image file's bytes (``np.fromfile``; warm page cache after the first epoch);
- ``decode``: ``cv2.imdecode`` to RGB (at the training reduction, ``data.reduced_decoding``);
- ``augment``: the crop + augmentation of the configured backend: ``cpu`` = per-sample OpenCV
  in the workers (:class:`~tensorpose.augment.crops.CpuAugment`), ``device`` = one batched warp on
  the
  device after the copy (:class:`~tensorpose.augment.crops.DeviceAugment`);
- ``targets``: the task's target function on the augmented batch (on the device);
- ``collate``: assembling the batch (``device`` backend: padding full images into one tensor;
  ``cpu`` backend: part of ``augment``);
- ``h2d``: host-to-device copy of the batch (pinned memory when asked; 0 on a CPU);

and ``transfer`` (worker-to-main IPC: shared-memory handoff and queue), measured as what a real
``DataLoader`` with ``N`` workers costs per batch beyond its workers' share of the stages above.

:func:`diagnose` (a pure function of those timings) then gives the verdict: ``io-bound``,
``decode-bound``, ``augmentation-bound`` (CPU augmentation or targets), ``transfer-bound`` or
``device-bound``, with the fix.

Time model, per batch, with ``w`` workers: the worker stages (read, decode, CPU augmentation,
collate) run in parallel, ``W / max(w, 1)``, plus ``transfer``; with ``w >= 1`` they overlap the
model step. The main-process stages (``h2d``, on-device augmentation, ``targets``) add to every
step. The input pipeline's share of a step is ``(wait + main stages) / step`` with
``wait = max(0, loader - model_step)`` (``w >= 1``) or ``loader`` (``w = 0``); at 20% or more the
step is data-bound and the largest stage names the kind; below it, device-bound.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.utils.data import DataLoader

from ..augment.crops import AugmentConfig, CpuAugment, DeviceAugment, sample_params
from ..data.images import TopDownDataset, collate_topdown
from ..io.coco import PersonRecord
from ..io.video import decode_rgb, is_jpeg
from ..skeleton import Skeleton
from ..tasks import require_capability

__all__ = [
    "MAIN_STAGES",
    "STAGES",
    "VERDICTS",
    "WORKER_STAGES",
    "DataProfile",
    "Verdict",
    "diagnose",
    "model_step_time",
    "profile_config",
    "profile_pipeline",
]

WORKER_STAGES = ("read", "decode", "augment_cpu", "collate")
MAIN_STAGES = ("transfer", "h2d", "augment_device", "targets")
STAGES = WORKER_STAGES + MAIN_STAGES
VERDICTS = ("io-bound", "decode-bound", "augmentation-bound", "transfer-bound", "device-bound")
_KIND = {
    "read": "io-bound",
    "decode": "decode-bound",
    "augment_cpu": "augmentation-bound",
    "augment_device": "augmentation-bound",
    "targets": "augmentation-bound",
    "collate": "transfer-bound",
    "transfer": "transfer-bound",
    "h2d": "transfer-bound",
}
DATA_BOUND_SHARE = 0.2
"""The input pipeline's share of a step from which the verdict is data-bound (the trainer's
profiler uses the same 20%)."""


@dataclass
class Verdict:
    """``kind`` (one of :data:`VERDICTS`), the ``bottleneck`` stage (``"model"`` when
    device-bound), ``data_share`` of a step, per-batch ``data_s`` (input pipeline time that the
    step sees) and ``step_s`` (model step + main-process stages + wait), and ``message`` (the
    diagnosis with the suggested fix)."""

    kind: str
    bottleneck: str
    data_share: float
    data_s: float
    step_s: float
    message: str


def _check_stages(stages: dict[str, float], workers: int) -> None:
    """The argument checks of :func:`diagnose`."""
    unknown = set(stages) - set(STAGES)
    if unknown:
        raise ValueError(f"stages has unknown names {sorted(unknown)}; expected {STAGES}")
    if any(not v >= 0 for v in stages.values()):
        raise ValueError(f"stage times must be >= 0 seconds, got {stages}")
    if workers < 0:
        raise ValueError(f"workers must be >= 0, got {workers}")


def _more_workers(workers: int, cores: int, measured: dict[int, float] | None) -> str:
    """The advice about worker count that the worker-side fixes end with."""
    more = (
        f"raise workers from {workers} to {cores} (cores available)"
        if workers < cores
        else f"workers already {workers} of {cores} cores"
    )
    if measured and workers < cores:
        more_w = {w: t for w, t in measured.items() if w > workers}
        if more_w and min(more_w.values()) >= measured.get(workers, float("inf")):
            rows = ", ".join(f"{w}: {1e3 * t:.0f} ms" for w, t in sorted(measured.items()))
            more = f"more workers measured slower here ({rows} per batch: too few free cores)"
    return more


def _fix(
    top: str,
    more: str,
    workers: int,
    device_type: str,
    pinned: bool,
    measured: dict[int, float] | None,
) -> str:
    """The suggested fix when stage ``top`` is the bottleneck (``more``: :func:`_more_workers`)."""
    return {
        "read": f"reading files is the slowest stage: cache decoded images in memory "
        f"(data.cache_images), move the data to local SSD/page cache, {more}",
        "decode": f"JPEG decoding is the slowest stage: decode on the GPU (nvJPEG, e.g. DALI) "
        f"{'(a CUDA device is here)' if device_type == 'cuda' else 'when training on a GPU'}, "
        f"cache decoded images (data.cache_images) or store smaller JPEGs, {more}",
        "augment_cpu": "CPU augmentation is the slowest stage: "
        + (
            "move it to the device (data.backend=device: one batched warp on the GPU), "
            if device_type == "cuda"
            else ""
        )
        + more,
        "augment_device": "on-device augmentation is the slowest stage: it runs in the main "
        "process before every step; on a CPU the per-sample OpenCV backend in workers "
        "(data.backend=cpu) is faster, on a GPU check its batch size and dtype",
        "targets": "target generation is the slowest stage: it runs before every step; "
        "check the target size and dtype (static shapes on a GPU)",
        "collate": f"assembling batches is the slowest stage: keep images uint8 and cropped in "
        f"the workers (data.backend=cpu), {more}",
        "transfer": "the worker-to-main handoff is the slowest stage: keep batches uint8 (not "
        "float), fewer but larger batches"
        + (", pinned memory (data.pin_memory)" if device_type == "cuda" and not pinned else "")
        + (
            f"; 0 workers build a batch in {1e3 * measured[0]:.1f} ms here, but serially with "
            "the step (workers overlap it)"
            if measured and 0 in measured and workers and measured[0] < measured.get(workers, 0)
            else ""
        ),
        "h2d": "the host-to-device copy is the slowest stage: "
        + (
            "use pinned memory (data.pin_memory=true) and non_blocking copies"
            if not pinned
            else "copy uint8 (not float) batches and overlap the copy with the step"
        ),
    }[top]


def diagnose(
    stages: dict[str, float],
    workers: int,
    model_step: float | None = None,
    cpu_count: int | None = None,
    device_type: str = "cpu",
    pinned: bool = False,
    measured: dict[int, float] | None = None,
) -> Verdict:
    """The verdict from per-batch stage times (seconds; missing stages count 0).

    Args:
        stages: seconds per batch of the :data:`STAGES` (``augment_cpu`` runs in the workers,
            ``augment_device`` on the device after the copy).
        workers: DataLoader workers of the configuration being judged.
        model_step: forward + backward + optimiser seconds per batch, if known; ``None``: the
            input pipeline alone is judged (its slowest stage is the bottleneck).
        cpu_count: cores available to workers (default ``os.cpu_count()``).
        device_type: ``"cpu"`` or ``"cuda"`` (which fixes make sense).
        pinned: whether host batches are already in pinned memory.
        measured: seconds per batch of real DataLoaders by worker count, if measured: more
            workers are only suggested when they were not measured slower.

    Returns:
        :class:`Verdict`.
    """
    _check_stages(stages, workers)
    s = {k: float(stages.get(k, 0.0)) for k in STAGES}
    w = max(workers, 1)
    cores = cpu_count or os.cpu_count() or 1
    contrib = {k: s[k] / w for k in WORKER_STAGES}
    contrib.update({k: s[k] for k in MAIN_STAGES})
    loader = sum(s[k] for k in WORKER_STAGES) / w + s["transfer"]
    main = s["h2d"] + s["augment_device"] + s["targets"]
    model = float(model_step) if model_step else 0.0
    wait = loader if workers == 0 else max(0.0, loader - model)
    step = model + main + wait
    share = (wait + main) / step if step > 0 else 0.0
    data_s = wait + main
    if model_step and share < DATA_BOUND_SHARE:
        return Verdict(
            "device-bound", "model", share, data_s, step,
            f"device-bound: the input pipeline is {100 * share:.0f}% of a {1e3 * step:.1f} ms "
            f"step (model {1e3 * model:.1f} ms): the model's compute dominates; more workers "
            "will not help. Speed up the model (AMP, channels_last, torch.compile) or raise the "
            "batch size.",
        )  # fmt: skip
    top = max(contrib, key=contrib.get)
    kind = _KIND[top]
    pct = 100 * contrib[top] / max(sum(contrib.values()), 1e-12)
    where = (
        f"the input pipeline is {100 * share:.0f}% of a {1e3 * step:.1f} ms step"
        if model_step
        else f"input pipeline alone (no model step given): {1e3 * (loader + main):.1f} ms/batch"
    )
    fix = _fix(top, _more_workers(workers, cores, measured), workers, device_type, pinned,
               measured)  # fmt: skip
    message = f"{kind}: {where}; {top} is {pct:.0f}% of the input pipeline. Fix: {fix}."
    return Verdict(kind, top, share, data_s, step, message)


# ---------------------------------------------------------------------- measurement
@dataclass
class DataProfile:
    """Measured stages and loaders, and the verdict.

    Attributes:
        batch_size: samples per batch.
        stages: seconds per batch of each stage (:data:`STAGES`).
        loader: per worker count ``{"workers", "s_per_batch", "samples_per_s",
            "transfer_s"}`` from a real DataLoader.
        workers: the worker count judged (the configured one, else the fastest measured).
        model_step: seconds per batch of the model step, if given.
        device: where the device stages ran.
        backend: ``"cpu"`` or ``"device"`` augmentation.
        verdict: :class:`Verdict`.
    """

    batch_size: int
    stages: dict[str, float]
    loader: list[dict]
    workers: int
    model_step: float | None
    device: str
    backend: str
    verdict: Verdict
    notes: list[str] = field(default_factory=list)

    def table(self) -> str:
        """A plain-text report: stages (ms/batch, share), loader rows, verdict."""
        total = sum(self.stages.values()) or 1.0
        lines = [f"input pipeline, batch {self.batch_size}, {self.backend} augmentation, "
                 f"device {self.device}:"]  # fmt: skip
        for k in STAGES:
            v = self.stages.get(k, 0.0)
            where = "workers" if k in WORKER_STAGES else "main"
            lines.append(f"  {k:<15s} {1e3 * v:9.2f} ms/batch  {100 * v / total:5.1f}%  ({where})")
        for r in self.loader:
            lines.append(
                f"  DataLoader workers {r['workers']:2d}: {1e3 * r['s_per_batch']:9.2f} ms/batch "
                f"{r['samples_per_s']:8.1f} samples/s, transfer {1e3 * r['transfer_s']:.2f} ms"
            )
        if self.model_step:
            lines.append(f"  model step      {1e3 * self.model_step:9.2f} ms/batch (given)")
        lines += [f"  note: {n}" for n in self.notes]
        lines.append(f"verdict (workers {self.workers}): {self.verdict.message}")
        return "\n".join(lines)


def _median_time(fn: Callable[[], object], repeats: int, device: torch.device) -> float:
    out = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def _check_pipeline_args(
    records: Sequence[PersonRecord], backend: str, batch_size: int, batches: int, sample: int
) -> None:
    """The argument checks of :func:`profile_pipeline`."""
    if backend not in ("cpu", "device"):
        raise ValueError(f"backend must be 'cpu' or 'device', got {backend!r}")
    if not records:
        raise ValueError("records is empty: nothing to profile")
    if batch_size < 1 or batches < 1 or sample < 1:
        raise ValueError(f"batch_size, batches, sample must be >= 1, got "
                         f"{batch_size}, {batches}, {sample}")  # fmt: skip


def _time_read_decode(
    recs: Sequence[PersonRecord], per: float, stages: dict[str, float], reductions: np.ndarray
) -> None:
    """``read`` and ``decode`` seconds per batch, from one pass over ``recs`` (the loop over
    samples is the measurement, not a hot path); each decoded at its ``reductions`` entry."""
    t0 = time.perf_counter()
    blobs = [np.fromfile(r.file, dtype=np.uint8) for r in recs]
    stages["read"] = (time.perf_counter() - t0) * per
    t0 = time.perf_counter()
    for b, red in zip(blobs, reductions.tolist(), strict=True):
        decode_rgb(b, red if is_jpeg(b) else 1)
    stages["decode"] = (time.perf_counter() - t0) * per


def _time_batch_stages(
    items: list,
    augment: AugmentConfig,
    skeleton: Skeleton,
    backend: str,
    targets: Callable[[dict], object] | None,
    device: torch.device,
    pinned: bool,
    seed: int,
    stages: dict[str, float],
    notes: list[str],
) -> None:
    """The stages of one batch of decoded ``items``, each the median of 3 runs: ``augment_cpu``
    or ``collate`` (by ``backend``), ``h2d``, ``augment_device``, ``targets``."""
    g = torch.Generator().manual_seed(seed)
    reps = 3
    batch_size = len(items)
    if backend == "cpu":
        aug = CpuAugment(augment, skeleton, seed)
        params = sample_params(augment, batch_size, g)
        stages["augment_cpu"] = _median_time(lambda: aug.apply(items, params), reps, device)
        host = aug.apply(items, params)
    else:
        stages["collate"] = _median_time(lambda: collate_topdown(items), reps, device)
        host = collate_topdown(items)
    tensors = {k: v for k, v in host.items() if torch.is_tensor(v)}
    if device.type == "cuda":
        if pinned:
            tensors = {k: v.pin_memory() for k, v in tensors.items()}
        stages["h2d"] = _median_time(
            lambda: {k: v.to(device, non_blocking=True) for k, v in tensors.items()}, reps, device
        )
    else:
        notes.append("h2d is 0 on a CPU device (no copy)")
    batch = {k: v.to(device) for k, v in tensors.items()}
    if backend == "device":
        dev_aug = DeviceAugment(augment, skeleton)
        gen = torch.Generator(device=device).manual_seed(seed)
        stages["augment_device"] = _median_time(lambda: dev_aug(dict(batch), gen), reps, device)
        batch = dev_aug(dict(batch), gen)
    else:
        batch["keypoints"] = batch["keypoints"].float()
    if targets is not None:
        stages["targets"] = _median_time(lambda: targets(batch), reps, device)


def _loader_row(
    recs: Sequence[PersonRecord],
    augment: AugmentConfig,
    skeleton: Skeleton,
    w: int,
    *,
    batch_size: int,
    batches: int,
    backend: str,
    pinned: bool,
    padding: float,
    cache_images: bool,
    seed: int,
    worker_sum: float,
    reduce_to: tuple[int, int] | None = None,
) -> dict:
    """A real DataLoader with ``w`` workers, end to end (its first batch, or with the cache its
    first epoch, untimed): ``{"workers", "s_per_batch", "samples_per_s", "transfer_s"}``, the
    transfer being what a batch costs beyond the workers' share of ``worker_sum``."""
    H, W = augment.output_size
    loader_ds = TopDownDataset(recs, W / H, padding, cache_images=cache_images,
                               reduce_to=reduce_to, min_window=1.0 - augment.scale)  # fmt: skip
    collate = CpuAugment(augment, skeleton, seed) if backend == "cpu" else collate_topdown
    loader = DataLoader(loader_ds, batch_size, shuffle=True, num_workers=w,
                        collate_fn=collate, pin_memory=pinned, drop_last=False,
                        persistent_workers=cache_images and w > 0,
                        generator=torch.Generator().manual_seed(seed))  # fmt: skip
    if cache_images:
        for _ in loader:  # one epoch fills every worker's cache
            pass
    it = iter(loader)
    n_done = 0
    next(it)
    t0 = time.perf_counter()
    for _ in range(batches):
        b = next(it, None)
        if b is None:
            it = iter(loader)
            b = next(it)
        n_done += b["images"].shape[0]
    s_batch = (time.perf_counter() - t0) / batches
    del it
    transfer = max(0.0, s_batch - worker_sum / w) if w > 0 else 0.0
    return {"workers": int(w), "s_per_batch": s_batch,
            "samples_per_s": n_done / max(s_batch * batches, 1e-12),
            "transfer_s": transfer}  # fmt: skip


def _loader_rows(
    recs: Sequence[PersonRecord],
    augment: AugmentConfig,
    skeleton: Skeleton,
    workers: Sequence[int],
    batch_size: int,
    batches: int,
    backend: str,
    pinned: bool,
    padding: float,
    cache_images: bool,
    seed: int,
    stages: dict[str, float],
    reduce_to: tuple[int, int] | None,
) -> list[dict]:
    """:func:`_loader_row` of each worker count, against the worker stages of ``stages``."""
    worker_sum = sum(stages[k] for k in WORKER_STAGES)
    return [
        _loader_row(
            recs, augment, skeleton, w, batch_size=batch_size, batches=batches, backend=backend,
            pinned=pinned, padding=padding, cache_images=cache_images, seed=seed,
            worker_sum=worker_sum, reduce_to=reduce_to,
        )
        for w in workers
    ]  # fmt: skip


def _judged_workers(
    rows: list[dict], configured_workers: int | None, stages: dict[str, float], notes: list[str]
) -> int:
    """The worker count to judge (``configured_workers``, default the fastest measured); sets
    ``stages["transfer"]`` from its loader row (0 when it was not measured)."""
    if configured_workers is None:
        best = min(rows, key=lambda r: r["s_per_batch"]) if rows else {"workers": 0}
        configured_workers = best["workers"]
    judged = [r for r in rows if r["workers"] == configured_workers]
    stages["transfer"] = judged[0]["transfer_s"] if judged else 0.0
    if not judged and configured_workers > 0:
        notes.append(f"workers {configured_workers} not measured: transfer counted as 0")
    return configured_workers


def profile_pipeline(
    records: Sequence[PersonRecord],
    augment: AugmentConfig,
    skeleton: Skeleton,
    *,
    batch_size: int = 32,
    workers: Sequence[int] = (0, 1, 2),
    configured_workers: int | None = None,
    batches: int = 4,
    sample: int = 64,
    backend: str = "cpu",
    targets: Callable[[dict], object] | None = None,
    device: torch.device | str = "cpu",
    pin_memory: bool = True,
    model_step: float | None = None,
    padding: float = 1.25,
    cache_images: bool = False,
    seed: int = 0,
    reduced_decoding: bool = False,
) -> DataProfile:
    """Measure the top-down input pipeline of ``records`` and diagnose it.

    Args:
        records: COCO people (e.g. ``load_coco_keypoints(path).records``).
        augment: the augmentation ranges (its ``output_size`` is the crop).
        skeleton: for the left/right swap.
        batch_size: samples per batch.
        workers: DataLoader worker counts to run end to end.
        configured_workers: the count to judge (default: the fastest measured).
        batches: timed batches per worker count (after one untimed: worker start-up).
        sample: records timed stage by stage (cycled when fewer).
        backend: ``"cpu"`` (OpenCV in the workers) or ``"device"`` (batched warp after the copy).
        targets: the task's target function on an augmented batch on the device (e.g. gaussian
            heatmaps of ``batch["keypoints"]``); ``None``: no target stage.
        device: where ``h2d``, device augmentation and targets run.
        pin_memory: pin host batches before the copy (CUDA).
        model_step: seconds per batch of forward + backward + optimiser, if known.
        padding: crop window enlargement (as the dataset's).
        cache_images: the dataset keeps decoded images (per worker): ``read`` and ``decode``
            count 0 (the steady state; their first-epoch cost is in the notes) and the
            DataLoaders run one untimed epoch with persistent workers first.
        seed: augmentation seed.
        reduced_decoding: ``cpu`` backend: decode JPEGs at the reduction the augmented crops
            allow (:class:`~tensorpose.data.images.TopDownDataset`'s ``reduce_to``), as
            training does with ``data.reduced_decoding``.

    Returns:
        :class:`DataProfile` (``.table()`` prints it).
    """
    _check_pipeline_args(records, backend, batch_size, batches, sample)
    device = torch.device(device)
    H, W = augment.output_size
    recs = [records[i % len(records)] for i in range(max(sample, batch_size))]
    per = batch_size / len(recs)  # sample seconds -> seconds per batch
    stages = dict.fromkeys(STAGES, 0.0)
    notes: list[str] = []

    reduce_to = (H, W) if reduced_decoding and backend == "cpu" else None
    ds = TopDownDataset(recs, W / H, padding, cache_images=True, reduce_to=reduce_to,
                        min_window=1.0 - augment.scale)  # fmt: skip
    _time_read_decode(recs, per, stages, ds.reduction)
    items = [ds[i] for i in range(batch_size)]
    pinned = pin_memory and device.type == "cuda"
    _time_batch_stages(items, augment, skeleton, backend, targets, device, pinned, seed, stages,
                       notes)  # fmt: skip
    if cache_images:
        notes.append(
            f"cache_images: read {1e3 * stages['read']:.2f} + decode {1e3 * stages['decode']:.2f}"
            " ms/batch in the first epoch only, 0 after"
        )
        stages["read"] = stages["decode"] = 0.0

    rows = _loader_rows(recs, augment, skeleton, workers, batch_size, batches, backend, pinned,
                        padding, cache_images, seed, stages, reduce_to)  # fmt: skip
    configured_workers = _judged_workers(rows, configured_workers, stages, notes)
    measured = {r["workers"]: r["s_per_batch"] for r in rows}
    verdict = diagnose(stages, configured_workers, model_step, None, device.type, pinned, measured)
    return DataProfile(batch_size, stages, rows, configured_workers, model_step, str(device),
                       backend, verdict, notes)  # fmt: skip


def model_step_time(
    model: torch.nn.Module,
    batch_size: int,
    input_size: tuple[int, int],
    device: torch.device | str = "cpu",
    repeats: int = 3,
) -> float:
    """Median seconds of one training step (forward, backward of a dummy loss, Adam step) on a
    random batch ``(batch_size, 3, H, W)``: the ``model_step`` of :func:`diagnose` when no
    profiled run is at hand. The model's weights are left as they were."""
    device = torch.device(device)
    model = model.to(device).train()
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    opt = torch.optim.Adam(model.parameters(), 1e-6)
    x = torch.randn(batch_size, 3, *input_size, device=device)

    def step() -> None:
        out = model(x)
        outs = out.values() if isinstance(out, dict) else [out]
        loss = sum(o.float().square().mean() for o in outs)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step()  # warm-up
    t = _median_time(step, repeats, device)
    model.load_state_dict(state)
    return t


def profile_config(
    cfg,
    workers: Sequence[int] = (0, 1, 2),
    batches: int = 4,
    sample: int = 64,
    model_step: float | None = None,
) -> DataProfile:
    """:func:`profile_pipeline` for a top-down 2D run configuration (a task with the
    ``profile_data`` capability: ``heatmap`` or ``deeppose``): its COCO file, crop size,
    augmentation ranges, backend, batch size, configured workers, image cache, and the task's
    targets (``Task.profile_targets``: gaussian heatmaps at stride 4 for ``heatmap``,
    normalised coordinates for ``deeppose``).

    Args:
        cfg: the run configuration (``cfg.task``, ``cfg.data``, ``cfg.model``, ``cfg.train``).
        workers, batches, sample, model_step: see :func:`profile_pipeline`.
    """
    from ..io.coco import bundled_coco, load_coco_keypoints
    from ..skeleton import get_skeleton

    d, m, t = cfg.data, cfg.model, cfg.train
    task = require_capability(cfg.task, "profile_data", "profile_config")
    H, W = (int(v) for v in d.input_size)
    augment = AugmentConfig(output_size=(H, W), **d.ranges())
    coco = load_coco_keypoints(d.annotations or bundled_coco(), min_keypoints=d.min_keypoints,
                               warn=False)  # fmt: skip
    dev = t.device
    device = torch.device("cuda" if dev == "auto" and torch.cuda.is_available() else
                          ("cpu" if dev == "auto" else dev))  # fmt: skip
    backend = d.backend if d.backend != "auto" else ("device" if device.type == "cuda" else "cpu")
    targets = task.profile_targets(cfg)
    return profile_pipeline(
        coco.records, augment, get_skeleton(m.skeleton), batch_size=t.batch_size,
        workers=workers, configured_workers=d.workers, batches=batches, sample=sample,
        backend=backend, targets=targets, device=device, pin_memory=d.pin_memory,
        model_step=model_step, padding=d.padding, cache_images=d.cache_images, seed=t.seed,
        reduced_decoding=d.reduced_decoding,
    )  # fmt: skip
