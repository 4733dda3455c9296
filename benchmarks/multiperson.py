"""Multi-person (CenterNet) batches and decoding against their per-image loops, side by side.

Cases (same inputs, one process; results checked equal before timing):
  augment+targets  the bundled COCO subset (16 whole images, 85 people in 13 slots), random
                   scale/rotation/shift/flip, 256x256 input, 64x64 targets:
                   per-image loop (cv2.warpAffine, people and joints one by one, the per-object
                   CenterNet target loop; benchmarks/naive2d.py) vs tensorpose
                   (MultiPersonAugment: one grid_sample for the batch, plus its colour pass;
                   multiperson_targets: one centernet_targets call) and its cpu backend
                   (cv2.warpAffine image by image, the rest batched)
  decode+nms       16 images, top 20 centres, 64x64 maps (head outputs: the targets of the
                   bundled images plus noise): per-image numpy decoding (peak by peak, joint by
                   joint, mapped back to the image) + greedy OKS-NMS loop vs CenterNet.decode
                   (one batched decode, inverse affine and OKS-NMS for the whole batch)

Usage: python benchmarks/multiperson.py [--device cpu|cuda|both] [--threads 1]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import base_parser, devices, print_table, timeit, write_json
from benchmarks.naive2d import (
    centernet_decode_loop,
    centernet_targets_loop,
    multiperson_augment_loop,
    oks_nms_loop,
)
from tensorpose.augment.crops import AugmentConfig, augment_matrices, sample_params
from tensorpose.centernet.data import (
    MultiPersonAugment,
    MultiPersonDataset,
    collate_multiperson,
    letterbox_windows,
    multiperson_targets,
)
from tensorpose.metrics.pose2d import COCO_SIGMAS
from tensorpose.skeleton import get_skeleton
from tensorpose.tasks.centernet import CenterNet

SK = get_skeleton("coco17")
S = 256


def _to(batch, device):
    return {k: v.to(device) if torch.is_tensor(v) else v for k, v in batch.items()}


def _perfect_outputs(t: dict, g: torch.Generator) -> dict:
    """Head outputs: logits of the target heatmaps plus noise, regressions written at each
    object's cell (setup, not timed)."""
    B, N, K = t["joint_mask"].shape
    H = W = S // 4
    noise = lambda *s: 0.3 * torch.randn(*s, generator=g)  # noqa: E731
    o = {
        "heatmap": torch.logit(t["heatmap"].clamp(1e-3, 1 - 1e-3)) + noise(B, 1, H, W),
        "joint_heatmaps": torch.logit(t["joint_heatmaps"].clamp(1e-3, 1 - 1e-3))
        + noise(B, K, H, W),
        "size": 0.1 * noise(B, 2, H * W),
        "offset": 0.1 * noise(B, 2, H * W).abs(),
        "joint_offset": noise(B, 2 * K, H * W),
        "joint_sub_offset": 0.1 * noise(B, 2, H * W).abs(),
    }
    for b in range(B):
        for n in range(N):
            if t["box_mask"][b, n] > 0:
                i = int(t["index"][b, n])
                o["size"][b, :, i] = t["size"][b, n]
                o["offset"][b, :, i] = t["offset"][b, n]
                o["joint_offset"][b, :, i] = t["joint_offset"][b, n].reshape(-1)
            for k in range(K):
                if t["joint_mask"][b, n, k] > 0:
                    i = int(t["joint_index"][b, n, k])
                    o["joint_sub_offset"][b, :, i] = t["joint_sub_offset"][b, n, k]
    return {k: v.reshape(B, -1, H, W) for k, v in o.items()}


def run(device: torch.device, args) -> list[dict]:
    rows: list[dict] = []
    t = lambda fn: timeit(fn, device, args.warmup, args.repeats) * 1e3  # noqa: E731
    cpu = device.type == "cpu"
    ds = MultiPersonDataset(cache_images=True)
    items = [ds[i] for i in range(len(ds))]
    batch = collate_multiperson(items)
    B = len(items)

    # ---------------------------------------------------------------- augment + targets
    cfg = AugmentConfig(output_size=(S, S), scale=0.25, rotation=15, rotation_prob=1.0, shift=0.1,
                        brightness=0, contrast=0, saturation=0, hue=0, noise=0,
                        shadow_prob=0)  # fmt: skip
    params = sample_params(cfg, B, torch.Generator().manual_seed(0))
    center, scale = letterbox_windows(batch["image_size"])
    M = augment_matrices(center.double(), scale.double(), params, (S, S)).numpy()
    fi = np.array(SK.flip_index)
    case = f"augment+targets B{B} {S}"

    def loop():
        out = []
        for i, s in enumerate(items):  # the baseline: image by image
            crop, bx, kp, vis = multiperson_augment_loop(
                s["image"], M[i], s["boxes"], s["keypoints"], s["visibility"],
                bool(params.flip[i]), fi, S,
            )  # fmt: skip
            valid = np.ones(len(bx), bool)
            out.append((crop, centernet_targets_loop(bx / 4, kp / 4, vis, valid, S // 4, S // 4)))
        return out

    aug = MultiPersonAugment(cfg, SK)
    dev_batch = _to(batch, device)
    dev_params = params.to(device)

    def batched():
        a = aug(dev_batch, params=dev_params)
        return a, multiperson_targets(a)

    a, tg = batched()
    ref = loop()
    hm_ref = np.stack([r[1][0] for r in ref])
    assert np.abs(tg["heatmap"].cpu().numpy() - hm_ref).max() < 1e-4, "targets differ"
    img_ref = np.stack([r[0] for r in ref]).transpose(0, 3, 1, 2).astype(np.float32)
    assert np.abs(a["images"].cpu().numpy() - img_ref).mean() < 1.0, "images differ"
    if cpu:
        rows.append({"case": case, "contender": "loop (numpy)", "ms": t(loop)})
        aug_cpu = MultiPersonAugment(cfg, SK, backend="cpu")

        def batched_cpu():
            a = aug_cpu(batch, params=params)
            return a, multiperson_targets(a)

        a_cpu, tg_cpu = batched_cpu()
        assert torch.equal(tg_cpu["heatmap"], tg["heatmap"].cpu())
        assert (a_cpu["images"] - a["images"].cpu()).abs().mean() < 0.5
        rows.append({"case": case, "contender": "tensorpose cpu backend", "ms": t(batched_cpu)})
    rows.append({"case": case, "contender": "tensorpose", "ms": t(batched)})

    # ---------------------------------------------------------------- decode + OKS-NMS
    cn = CenterNet(SK, S, top_k=20, nms_threshold=0.9)
    prep = cn.prepare(batch, plain=True)
    out = _perfect_outputs(prep["targets"], torch.Generator().manual_seed(1))
    rows3 = np.tile([[[0, 0, 1.0]]], (B, 1, 1))
    Minv = np.linalg.inv(np.concatenate([prep["matrices"].double().numpy(), rows3], 1))[:, :2]
    probs = {k: torch.sigmoid(v) if "heatmap" in k else v for k, v in out.items()}
    np_out = {k: v.numpy() for k, v in probs.items()}
    case = f"decode+nms B{B} k20 {S // 4}x{S // 4}"

    def decode_loop():
        res = []
        for b in range(B):  # the baseline: image by image
            sc, bx, kp, ks = centernet_decode_loop({k: v[b] for k, v in np_out.items()}, Minv[b])
            area = np.maximum((bx[:, 2] - bx[:, 0]) * (bx[:, 3] - bx[:, 1]), 1.0)
            keep = oks_nms_loop(kp, sc, area, 0.9, COCO_SIGMAS)
            res.append((sc, kp, ks, keep))
        return res

    dev_out = {k: v.to(device) for k, v in out.items()}
    dev_M = prep["matrices"].to(device)
    dec = cn.decode(dev_out, dev_M)
    for b, (sc, kp, ks, keep) in enumerate(decode_loop()):
        assert np.allclose(dec["scores"][b].cpu().numpy(), sc, atol=1e-5), "scores differ"
        assert np.abs(dec["keypoints"][b].cpu().numpy() - kp).max() < 1e-2, "keypoints differ"
        assert np.allclose(dec["keypoint_scores"][b].cpu().numpy(), ks, atol=1e-5)
        assert sorted(np.flatnonzero(dec["keep"][b].cpu().numpy())) == sorted(keep), "nms"
    if cpu:
        rows.append({"case": case, "contender": "loop (numpy)", "ms": t(decode_loop)})
    rows.append({"case": case, "contender": "tensorpose",
                 "ms": t(lambda: cn.decode(dev_out, dev_M))})  # fmt: skip
    for r in rows:
        r["device"] = str(device)
    return rows


def main() -> None:
    p = base_parser(__doc__)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    for device in devices(args.device):
        rows = run(device, args)
        title = f"multi-person batches and decoding vs per-image loops on {device} "
        print_table(title + f"(threads {torch.get_num_threads()})", rows, "loop (numpy)")
        if not args.no_save:
            write_json("multiperson", device, {"rows": rows})


if __name__ == "__main__":
    main()
