"""Region crops side by side with their loops.

Cases (same inputs for every contender, one process):
  roi_align  64 regions on a (2, 64, 48, 64) stride-4 feature map, 7x7 bins, 2x2 samples and
             adaptive grids: the naive per-region / per-bin / per-sample loop (numpy, the
             test's reference) vs tensorpose ``roi_align``.
  crop       16 person boxes on 4 uint8 640x480 images -> 256x192 crops: a per-box
             ``cv2.warpAffine`` loop (the CPU's per-sample fast path), ``warp_affine`` of one
             image copy per box (one ``grid_sample``), and ``crop_boxes`` (a gather from the
             images, no copies).

Times: median wall time (benchmarks/common.py's protocol) and median thread CPU time of the
same calls; on a shared CPU quote the CPU-time ratios.

Usage: python benchmarks/roi.py [--device cpu|cuda|both] [--threads 1]
"""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import base_parser, devices, print_table, write_json
from benchmarks.nms import wall_and_cpu
from tensorpose.ops.affine import warp_affine
from tensorpose.ops.roi import crop_boxes, roi_align


def naive_roi_align(f: np.ndarray, rois: np.ndarray, oh: int, ow: int, scale: float, sr: int):
    """torchvision's reference loop, aligned=True (the test's naive twin)."""
    H, W = f.shape[2:]
    out = np.zeros((len(rois), f.shape[1], oh, ow))
    for k, (b, x1, y1, x2, y2) in enumerate(rois):
        sw, sh = x1 * scale - 0.5, y1 * scale - 0.5
        rw, rh = x2 * scale - 0.5 - sw, y2 * scale - 0.5 - sh
        bh, bw = rh / oh, rw / ow
        gh = sr if sr > 0 else int(np.ceil(rh / oh))
        gw = sr if sr > 0 else int(np.ceil(rw / ow))
        fm = f[int(b)]
        for ph in range(oh):
            for pw in range(ow):
                acc = np.zeros(f.shape[1])
                for iy in range(gh):
                    y = sh + ph * bh + (iy + 0.5) * bh / gh
                    for ix in range(gw):
                        x = sw + pw * bw + (ix + 0.5) * bw / gw
                        if y < -1 or y > H or x < -1 or x > W:
                            continue
                        yy, xx = max(y, 0.0), max(x, 0.0)
                        y0, x0 = min(int(yy), H - 1), min(int(xx), W - 1)
                        y1_, x1_ = min(y0 + 1, H - 1), min(x0 + 1, W - 1)
                        yy, xx = (float(y0), xx) if y0 >= H - 1 else (yy, xx)
                        xx = float(x0) if x0 >= W - 1 else xx
                        ly, lx = yy - y0, xx - x0
                        acc += (
                            (1 - ly) * (1 - lx) * fm[:, y0, x0]
                            + (1 - ly) * lx * fm[:, y0, x1_]
                            + ly * (1 - lx) * fm[:, y1_, x0]
                            + ly * lx * fm[:, y1_, x1_]
                        )
                out[k, :, ph, pw] = acc / max(gh * gw, 1)
    return out


def run(device: torch.device, args) -> list[dict]:
    rows: list[dict] = []
    cpu = device.type == "cpu"

    def add(case: str, contender: str, fn, repeats: int | None = None) -> None:
        reps = min(repeats or args.repeats, args.repeats)
        ms, cpu_ms = wall_and_cpu(fn, device, args.warmup, reps)
        rows.append({"case": case, "contender": contender, "ms": ms, "cpu_ms": cpu_ms})

    g = torch.Generator().manual_seed(0)
    feats = torch.randn(2, 64, 48, 64, generator=g)
    xy = torch.rand(64, 2, generator=g) * torch.tensor([200.0, 150.0])
    wh = torch.rand(64, 2, generator=g) * 80 + 20
    rois = torch.cat([torch.randint(0, 2, (64, 1), generator=g).float(), xy, xy + wh], -1)
    for sr in (2, -1):
        case = f"roi_align K64 7x7 sr{sr}"
        out = roi_align(feats, rois, 7, 0.25, sr)
        if cpu:
            fn, rn = feats.double().numpy(), rois.double().numpy()
            ref = naive_roi_align(fn, rn, 7, 7, 0.25, sr)
            assert np.abs(out.double().numpy() - ref).max() < 1e-4
            add(
                case,
                "loop (numpy)",
                lambda fn=fn, rn=rn, sr=sr: naive_roi_align(fn, rn, 7, 7, 0.25, sr),
                3,
            )
        fd, rd = feats.to(device), rois.to(device)
        add(
            case, "tensorpose roi_align", lambda fd=fd, rd=rd, sr=sr: roi_align(fd, rd, 7, 0.25, sr)
        )

    # ---------------------------------------------------------------- crops
    images = torch.randint(0, 256, (4, 480, 640, 3), generator=g, dtype=torch.uint8)
    c = torch.rand(16, 2, generator=g) * torch.tensor([560.0, 400.0]) + 40
    s = torch.rand(16, 2, generator=g) * torch.tensor([100.0, 200.0]) + 40
    boxes = torch.cat([torch.arange(16).remainder(4).float()[:, None], c - s / 2, c + s / 2], -1)
    case = "crop 16 boxes 256x192"
    crops, M = crop_boxes(images, boxes, (256, 192))
    idx = boxes[:, 0].long()
    if cpu:
        imgs_np, M_np = images.numpy(), M.double().numpy()

        def cv2_loop():
            return [
                cv2.warpAffine(imgs_np[i], M_np[k], (192, 256), flags=cv2.INTER_LINEAR)
                for k, i in enumerate(idx.tolist())
            ]

        ref = np.stack(cv2_loop())
        assert np.abs(crops.permute(0, 2, 3, 1).numpy() - ref).mean() < 0.5
        add(case, "loop (cv2 per box)", cv2_loop, 10)
    imd, bd, Md, idd = images.to(device), boxes.to(device), M.to(device), idx.to(device)
    add(
        case,
        "warp_affine (image copies)",
        lambda: warp_affine(imd.permute(0, 3, 1, 2)[idd], Md, (256, 192), out_dtype=torch.float32),
    )
    add(case, "tensorpose crop_boxes", lambda: crop_boxes(imd, bd, (256, 192)))
    for r in rows:
        r["device"] = str(device)
    return rows


def main() -> None:
    p = base_parser(__doc__)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    cv2.setNumThreads(args.threads)
    for device in devices(args.device):
        rows = run(device, args)
        title = f"region crops on {device} (threads {torch.get_num_threads()})"
        if device.type == "cpu":
            cpu_rows = [{**r, "ms": r["cpu_ms"]} for r in rows]
            align = [r for r in rows if r["case"].startswith("roi")]
            crop = [r for r in rows if r["case"].startswith("crop")]
            print_table(f"{title}, wall time", align, "loop (numpy)")
            print_table(f"{title}, wall time", crop, "loop (cv2 per box)")
            calign = [r for r in cpu_rows if r["case"].startswith("roi")]
            ccrop = [r for r in cpu_rows if r["case"].startswith("crop")]
            print_table(f"{title}, thread CPU time", calign, "loop (numpy)")
            print_table(f"{title}, thread CPU time", ccrop, "loop (cv2 per box)")
            for r, cr in zip(align + crop, calign + ccrop, strict=True):
                for key in cr:
                    if key.startswith("speedup_vs_"):
                        r["cpu_" + key] = cr[key]
        else:
            print_table(title, rows, "tensorpose roi_align")
        if not args.no_save:
            write_json("roi", device, {"rows": rows})


if __name__ == "__main__":
    main()
