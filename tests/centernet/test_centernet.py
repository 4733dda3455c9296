"""CenterNet task logic: perfect head outputs (built from the targets by a per-object loop)
decode back to the ground truth through the inverse letterbox (pycocotools AP), OKS-NMS
against the greedy loop of the bottom-up code bases, and a tiny model that trains."""

import numpy as np
import pytest
import torch

from tensorpose.centernet.data import MultiPersonDataset, collate_multiperson
from tensorpose.centernet.model import batched_oks_nms, build_model
from tensorpose.metrics.pose2d import COCO_SIGMAS, coco_keypoint_ap
from tensorpose.ops.nms import oks_matrix, oks_nms
from tensorpose.tasks.centernet import CenterNet, evaluate

pytest.importorskip("pycocotools")


@pytest.fixture(scope="module")
def ds():
    return MultiPersonDataset(cache_images=True)


def _to(batch, device):
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def _perfect_outputs(t: dict, S: int) -> dict:
    """Head outputs that a perfect network would give: logits of the target heatmaps and the
    regression targets written at each object's cell (a loop over objects)."""
    B, N, K = t["joint_mask"].shape
    H = W = S // 4
    logit = lambda p: torch.logit(p.clamp(1e-4, 1 - 1e-4))  # noqa: E731
    o = {
        "heatmap": logit(t["heatmap"]),
        "joint_heatmaps": logit(t["joint_heatmaps"]),
        "size": torch.zeros(B, 2, H * W),
        "offset": torch.zeros(B, 2, H * W),
        "joint_offset": torch.zeros(B, 2 * K, H * W),
        "joint_sub_offset": torch.zeros(B, 2, H * W),
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
                    o["joint_sub_offset"][b, :, int(t["joint_index"][b, n, k])] = t[
                        "joint_sub_offset"
                    ][b, n, k]
    return {k: v.reshape(B, -1, H, W) for k, v in o.items()}


def test_perfect_outputs_decode_to_the_ground_truth(device, ds):
    S = 256
    cn = CenterNet(input_size=S)
    batch = _to(collate_multiperson([ds[i] for i in range(len(ds))]), device)
    prep = cn.prepare(batch, plain=True)
    out = _perfect_outputs({k: v.cpu() for k, v in prep["targets"].items()}, S)
    dec = cn.decode({k: v.to(device) for k, v in out.items()}, prep["matrices"])
    results = cn.results(dec, batch["image_id"])
    ap = coco_keypoint_ap(ds.annotations, results, image_ids=ds.image_ids)
    # 1 map pixel = 10 image pixels: snapping collisions of small people cost a little
    assert ap["AP"] > 0.9 and ap["AP50"] > 0.97
    # a joint's score is its heatmap in its cell: ~1 for (almost) every labelled joint
    labelled = sum(r.num_keypoints for r in ds.records)
    kept = dec["keep"].cpu()
    confident = (dec["keypoint_scores"].cpu() > 0.99) & kept.unsqueeze(-1)
    assert 0.9 * labelled <= int(confident.sum()) <= 1.05 * labelled
    # the centre of every person comes back within one map pixel
    assert int(kept.sum()) >= 85
    for i in range(len(ds)):
        c = dec["boxes"][i].cpu()
        for r in ds.people[ds.image_ids[i]]:
            x, y, w, h = r.bbox
            d = ((c[:, 0] + c[:, 2]) / 2 - (x + w / 2)).abs() + (
                (c[:, 1] + c[:, 3]) / 2 - (y + h / 2)
            ).abs()
            assert float(d[kept[i]].min()) < 2 * 4 * max(r.width, r.height) / S


def _naive_oks_nms(kpts, scores, areas, thr, sigmas=COCO_SIGMAS):
    """The greedy OKS-NMS loop of the bottom-up code bases (numpy, one pose at a time)."""
    order = list(np.argsort(-scores, kind="stable"))
    var = (2 * np.asarray(sigmas)) ** 2
    keep = []
    while order:
        i = order.pop(0)
        keep.append(i)
        rest = []
        for j in order:
            d2 = ((kpts[i, :, :2] - kpts[j, :, :2]) ** 2).sum(-1)
            e = d2 / var / ((areas[i] + areas[j]) / 2 + np.spacing(1)) / 2
            if np.exp(-e).mean() <= thr:
                rest.append(j)
        order = rest
    return keep


def test_oks_matrix_and_nms_equal_the_greedy_loop():
    g = np.random.default_rng(0)
    for n, thr in ((30, 0.5), (40, 0.9), (1, 0.5)):
        base = g.uniform(0, 200, (n // 3 + 1, 17, 2))
        kp = base[g.integers(0, len(base), n)] + g.normal(0, 3, (n, 17, 2))
        kp = np.concatenate([kp, g.uniform(0, 1, (n, 17, 1))], -1)
        scores = g.uniform(0, 1, n)
        areas = g.uniform(500, 5000, n)
        o = oks_matrix(torch.from_numpy(kp), torch.from_numpy(areas)).numpy()
        i, j = 0, n - 1
        var = (2 * np.asarray(COCO_SIGMAS)) ** 2
        e = ((kp[i, :, :2] - kp[j, :, :2]) ** 2).sum(-1) / var / ((areas[i] + areas[j]) / 2) / 2
        assert np.isclose(o[i, j], np.exp(-e).mean())
        got = oks_nms(torch.from_numpy(kp), torch.from_numpy(scores), torch.from_numpy(areas), thr)
        assert got.tolist() == _naive_oks_nms(kp, scores, areas, thr)


def test_batched_nms_equals_per_image_loop(device):
    g = np.random.default_rng(1)
    B, k = 4, 12
    base = g.uniform(0, 300, (B, 3, 17, 2))
    kp = base[:, g.integers(0, 3, k)] + g.normal(0, 2, (B, k, 17, 2))
    kp[1] = kp[0]  # identical poses in two images must not suppress each other
    kp = np.concatenate([kp, np.ones((B, k, 17, 1))], -1)
    scores, areas = g.uniform(0, 1, (B, k)), g.uniform(800, 3000, (B, k))
    keep = batched_oks_nms(*(torch.from_numpy(a).to(device) for a in (kp, scores, areas)), 0.7)
    for b in range(B):
        ref = np.zeros(k, bool)
        ref[_naive_oks_nms(kp[b], scores[b], areas[b], 0.7)] = True
        assert np.array_equal(keep[b].cpu().numpy(), ref)


def test_tiny_model_trains_and_evaluates(ds):
    torch.manual_seed(0)
    cn = CenterNet(input_size=64)
    model = build_model(17, depth=10, width=8)
    batch = collate_multiperson([ds[i] for i in range(2)])
    prep = cn.prepare(batch, torch.Generator().manual_seed(0))
    assert prep["x"].shape == (2, 3, 64, 64)
    opt = torch.optim.Adam(model.parameters(), 1e-2)
    losses = []
    for _ in range(6):
        terms = cn.loss(model(prep["x"]), prep)
        opt.zero_grad()
        terms["loss"].backward()
        opt.step()
        losses.append(float(terms["loss"].detach()))
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert set(terms) >= {"heatmap", "size", "offset", "joint_offset", "joint_heatmaps"}
    two = MultiPersonDataset([r for r in ds.records if r.image_id in ds.image_ids[:2]])
    with pytest.raises(ValueError, match="annotations"):
        evaluate(model, cn, two)
    out = evaluate(model, cn, two, ds.annotations, batch_size=2)
    assert out["images"] == 2 and 0 <= out["AP"] <= 1
    assert {r["image_id"] for r in out["results"]} <= set(ds.image_ids[:2])
    assert all(len(r["keypoints"]) == 51 for r in out["results"])


def test_bad_arguments():
    with pytest.raises(ValueError, match="multiple of 32"):
        CenterNet(input_size=100)
    with pytest.raises(ValueError, match="sigmas"):
        CenterNet(sigmas=(0.1,) * 5)
    with pytest.raises(ValueError, match="mean/std"):
        CenterNet(std=(0.2, 0.0, 0.2))
