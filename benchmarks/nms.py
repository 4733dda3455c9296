"""NMS ops side by side with the greedy loops they replace.

Cases (same inputs for every contender, one process):
  nms          1000 detector-like boxes (30 people in a 1280x720 image, jittered copies),
               IoU 0.5; 1000 uniform boxes; a 1000-box chain where each box overlaps only its
               neighbours (the worst case of the fixed-point iteration: ~N iterations).
  batched_nms  2000 boxes in 80 categories, IoU 0.5.
  oks_nms      200 and 500 poses (K=17) around 20 people, OKS 0.9 (MMPose's default).

Contenders: tensorpose (tiles of candidates on a CPU) and, on a CPU, the same with the whole
set as one tile (the plain Cluster-NMS formulation, what a GPU runs).

Baselines: the pure-Python greedy loop (the naive twin of the tests: pairs of floats), the
classic numpy loop over kept boxes with a vectorised IoU of the box against the rest
(py_cpu_nms / MMPose ``nms``), and for OKS MMPose's ``oks_nms`` (a loop over kept poses,
``oks_iou`` looping over candidates) and the same with ``oks_iou`` vectorised.

Times: median wall time (benchmarks/common.py's protocol) and median thread CPU time of the
same calls; on a shared CPU quote the CPU-time ratios.

Usage: python benchmarks/nms.py [--device cpu|cuda|both] [--threads 1]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import base_parser, devices, print_table, sync, write_json
from tensorpose.ops import nms as nms_ops
from tensorpose.ops.nms import COCO_SIGMAS, batched_nms, box_iou, nms, oks_nms


# ----------------------------------------------------------------------------- baselines
def python_greedy_nms(boxes: list, scores: list, thr: float) -> list[int]:
    """The obvious loop on Python floats (torchvision's arithmetic, stable order)."""
    order = sorted(range(len(boxes)), key=lambda i: -scores[i])
    keep: list[int] = []
    for j in order:
        x1, y1, x2, y2 = boxes[j]
        aj = (x2 - x1) * (y2 - y1)
        ok = True
        for i in keep:
            a1, b1, a2, b2 = boxes[i]
            w = max(min(x2, a2) - max(x1, a1), 0.0)
            h = max(min(y2, b2) - max(y1, b1), 0.0)
            inter = w * h
            union = aj + (a2 - a1) * (b2 - b1) - inter
            if union != 0 and inter / union > thr:
                ok = False
                break
        if ok:
            keep.append(j)
    return keep


def numpy_greedy_nms(boxes: np.ndarray, scores: np.ndarray, thr: float) -> list[int]:
    """py_cpu_nms: loop over kept boxes, IoU of each against the remaining ones."""
    x1, y1, x2, y2 = boxes.T
    areas = (x2 - x1) * (y2 - y1)
    order = np.argsort(-scores, kind="stable")
    keep = []
    while order.size > 0:
        i = order[0]
        keep.append(int(i))
        rest = order[1:]
        w = np.maximum(0.0, np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]))
        h = np.maximum(0.0, np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]))
        inter = w * h
        with np.errstate(invalid="ignore", divide="ignore"):
            ovr = inter / (areas[i] + areas[rest] - inter)
        order = rest[~(ovr > thr)]
    return keep


def numpy_batched_nms(boxes, scores, idxs, thr):
    keep = []
    for c in np.unique(idxs):
        sel = np.flatnonzero(idxs == c)
        keep += [int(sel[k]) for k in numpy_greedy_nms(boxes[sel], scores[sel], thr)]
    keep = np.array(keep, dtype=np.int64)
    return keep[np.lexsort((keep, -scores[keep]))].tolist()


def _oks_iou_loop(g, d, a_g, a_d, var):
    """MMPose's ``oks_iou``: a loop over the candidates."""
    out = np.zeros(len(d), dtype=np.float32)
    for n in range(len(d)):
        dx, dy = d[n, :, 0] - g[:, 0], d[n, :, 1] - g[:, 1]
        e = (dx**2 + dy**2) / var / ((a_g + a_d[n]) / 2 + np.spacing(1)) / 2
        out[n] = np.sum(np.exp(-e)) / len(e)
    return out


def _oks_iou_vec(g, d, a_g, a_d, var):
    dx, dy = d[..., 0] - g[:, 0], d[..., 1] - g[:, 1]
    e = (dx**2 + dy**2) / var / ((a_g + a_d[:, None]) / 2 + np.spacing(1)) / 2
    return np.exp(-e).mean(-1)


def numpy_oks_nms(kpts, scores, areas, thr, vectorised=False):
    var = (np.array(COCO_SIGMAS) * 2) ** 2
    oks_iou = _oks_iou_vec if vectorised else _oks_iou_loop
    order = np.argsort(-scores, kind="stable")
    keep = []
    while order.size > 0:
        i = order[0]
        keep.append(int(i))
        ovr = oks_iou(kpts[i], kpts[order[1:]], areas[i], areas[order[1:]], var)
        order = order[1:][ovr <= thr]
    return keep


# ----------------------------------------------------------------------------- inputs
def people_boxes(n: int, people: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` detections around ``people`` boxes in a 1280x720 image (jittered copies)."""
    c = torch.rand(people, 2, generator=g, dtype=torch.float64) * torch.tensor([1280.0, 720.0])
    wh = torch.rand(people, 2, generator=g, dtype=torch.float64) * 200 + 20
    i = torch.randint(people, (n,), generator=g)
    cc = c[i] + torch.randn(n, 2, generator=g, dtype=torch.float64) * wh[i] * 0.1
    w = wh[i] * (1 + 0.1 * torch.randn(n, 2, generator=g, dtype=torch.float64))
    boxes = torch.cat([cc - w / 2, cc + w / 2], -1).float()
    return boxes, torch.rand(n, generator=g)


def people_poses(n: int, people: int, g: torch.Generator):
    base = (
        torch.rand(people, 17, 2, generator=g) * 150 + torch.rand(people, 1, 2, generator=g) * 1000
    )
    i = torch.randint(people, (n,), generator=g)
    kp = base[i] + torch.randn(n, 17, 2, generator=g) * 4
    kp = torch.cat([kp, torch.rand(n, 17, 1, generator=g)], -1)
    span = kp[..., :2].amax(1) - kp[..., :2].amin(1)
    return kp, torch.rand(n, generator=g), span.prod(-1)


def iterations(boxes: torch.Tensor, scores: torch.Tensor, thr: float) -> int:
    """Fixed-point iterations of the untiled formulation (the whole set as one tile, as on
    a GPU) on these boxes: counted, not timed."""
    b = boxes[torch.sort(scores, descending=True, stable=True).indices]
    i = torch.arange(len(b))
    A = ((box_iou(b, b) > thr) & (i[:, None] < i[None, :])).float()
    keep, count = torch.ones(len(b), dtype=torch.bool), 0
    while True:
        count += 1
        new = (keep.float() @ A) == 0
        if torch.equal(new, keep):
            return count
        keep = new


def one_tile(fn, *args):
    """``fn`` with the whole set as one tile (the untiled formulation a GPU runs)."""
    saved = nms_ops._MIN_ROWS
    nms_ops._MIN_ROWS = 1 << 30
    try:
        return fn(*args)
    finally:
        nms_ops._MIN_ROWS = saved


def wall_and_cpu(fn, device: torch.device, warmup: int, repeats: int) -> tuple[float, float]:
    """Median wall and median thread-CPU milliseconds of one call (common.py's protocol:
    warm-up, synchronised repeats). On a shared CPU the thread time is the steadier number:
    it leaves out the time the process waits for a core."""
    for _ in range(warmup):
        fn()
    sync(device)
    wall, cpu = [], []
    for _ in range(repeats):
        sync(device)
        t0, c0 = time.perf_counter(), time.thread_time()
        fn()
        sync(device)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    return statistics.median(wall) * 1e3, statistics.median(cpu) * 1e3


def run(device: torch.device, args) -> tuple[list[dict], dict]:
    rows: list[dict] = []
    info: dict = {}
    cpu = device.type == "cpu"

    def add(case: str, contender: str, fn, repeats: int | None = None) -> None:
        ms, cpu_ms = wall_and_cpu(
            fn, device, args.warmup, min(repeats or args.repeats, args.repeats)
        )
        rows.append({"case": case, "contender": contender, "ms": ms, "cpu_ms": cpu_ms})

    g = torch.Generator().manual_seed(0)
    chain = torch.tensor([[float(i), 0.0, i + 1.5, 1.0] for i in range(1000)])
    uniform = torch.rand(1000, 2, generator=g) * 1000
    uniform = torch.cat([uniform, uniform + torch.rand(1000, 2, generator=g) * 90 + 10], -1)
    box_cases = [
        ("nms 1000 people", *people_boxes(1000, 30, g), 0.5),
        ("nms 1000 uniform", uniform, torch.rand(1000, generator=g), 0.5),
        ("nms 1000 chain", chain, torch.linspace(1, 0, 1000), 0.1),
    ]
    for case, boxes, scores, thr in box_cases:
        keep = nms(boxes, scores, thr).tolist()
        info[case] = {"kept": len(keep), "iterations_one_tile": iterations(boxes, scores, thr)}
        if cpu:
            bl, sl = boxes.double().tolist(), scores.double().tolist()
            bn, sn = boxes.double().numpy(), scores.double().numpy()
            assert python_greedy_nms(bl, sl, thr) == keep == numpy_greedy_nms(bn, sn, thr)
            add(case, "loop (python)", lambda bl=bl, sl=sl, t=thr: python_greedy_nms(bl, sl, t), 3)
            add(
                case,
                "loop (numpy per box)",
                lambda bn=bn, sn=sn, t=thr: numpy_greedy_nms(bn, sn, t),
                5,
            )
        bd, sd = boxes.to(device), scores.to(device)
        add(case, "tensorpose nms", lambda bd=bd, sd=sd, t=thr: nms(bd, sd, t))
        if cpu:
            add(
                case,
                "tensorpose nms, one tile",
                lambda bd=bd, sd=sd, t=thr: one_tile(nms, bd, sd, t),
                5,
            )

    # ---------------------------------------------------------------- per-category
    boxes, scores = people_boxes(2000, 60, g)
    idxs = torch.randint(0, 80, (2000,), generator=g)
    case = "batched_nms 2000 c80"
    keep = batched_nms(boxes, scores, idxs, 0.5).tolist()
    info[case] = {"kept": len(keep)}
    if cpu:
        bn, sn, cn = boxes.double().numpy(), scores.double().numpy(), idxs.numpy()
        assert numpy_batched_nms(bn, sn, cn, 0.5) == keep
        add(case, "loop (numpy per box)", lambda: numpy_batched_nms(bn, sn, cn, 0.5), 5)
    bd, sd, cd = boxes.to(device), scores.to(device), idxs.to(device)
    add(case, "tensorpose batched_nms", lambda: batched_nms(bd, sd, cd, 0.5))

    # ---------------------------------------------------------------- OKS
    for n in (200, 500):
        kp, scores, areas = people_poses(n, 20, g)
        kp, areas = kp.double(), areas.double()
        case = f"oks_nms {n} poses"
        keep = oks_nms(kp, scores, areas, 0.9).tolist()
        info[case] = {"kept": len(keep)}
        if cpu:
            kn, sn, an = kp.numpy(), scores.double().numpy(), areas.numpy()
            info[case]["equal_to_mmpose_loop"] = numpy_oks_nms(kn, sn, an, 0.9) == keep
            add(
                case,
                "loop (numpy per box)",
                lambda kn=kn, sn=sn, an=an: numpy_oks_nms(kn, sn, an, 0.9),
                3,
            )
            add(
                case,
                "loop, vectorised oks_iou",
                lambda kn=kn, sn=sn, an=an: numpy_oks_nms(kn, sn, an, 0.9, True),
                5,
            )
        kd, sd, ad = kp.to(device), scores.to(device), areas.to(device)
        add(case, "tensorpose oks_nms", lambda kd=kd, sd=sd, ad=ad: oks_nms(kd, sd, ad, 0.9))
    for r in rows:
        r["device"] = str(device)
    return rows, info


def main() -> None:
    p = base_parser(__doc__)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    for device in devices(args.device):
        rows, info = run(device, args)
        title = f"NMS on {device} (threads {torch.get_num_threads()})"
        if device.type == "cpu":
            cpu_rows = [{**r, "ms": r["cpu_ms"]} for r in rows]
            for name, base in (
                ("pure-Python loop", "loop (python)"),
                ("numpy loop", "loop (numpy per box)"),
            ):
                print_table(f"{title}, wall time, vs the {name}", rows, base)
                print_table(f"{title}, thread CPU time, vs the {name}", cpu_rows, base)
                for r, c in zip(rows, cpu_rows, strict=True):
                    r["cpu_speedup_vs_" + base] = c["speedup_vs_" + base]
        else:
            print_table(title, rows, "tensorpose nms")
        for case, v in info.items():
            print(f"{case:<24} {v}")
        if not args.no_save:
            write_json("nms", device, {"rows": rows, "cases": info})


if __name__ == "__main__":
    main()
