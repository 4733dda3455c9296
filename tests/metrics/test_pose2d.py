"""2D metrics against numpy references; COCO AP through pycocotools on the bundled subset."""

import json

import numpy as np
import pytest
import torch

from tensorpose.io.coco import bundled_coco, coco_results, load_coco_keypoints
from tensorpose.metrics.pose2d import COCO_SIGMAS, auc, bbox_size, epe, joint_distance, oks, pck


def _data(seed=0, N=12, K=17):
    rng = np.random.default_rng(seed)
    target = rng.uniform(0, 200, (N, K, 2))
    pred = target + rng.normal(0, 8, (N, K, 2))
    vis = rng.integers(0, 3, (N, K))
    boxes = np.concatenate([rng.uniform(0, 50, (N, 2)), rng.uniform(40, 150, (N, 2))], 1)
    return pred, target, vis, boxes


def np_pck(pred, target, vis, norm, alpha):
    hits, count = 0, 0
    for n in range(len(pred)):
        for k in range(pred.shape[1]):
            if vis[n, k] > 0:
                count += 1
                hits += np.linalg.norm(pred[n, k] - target[n, k]) <= alpha * norm[n]
    return hits / count


def np_oks(pred, target, vis, area, sigmas):
    """COCOeval.computeOks for one detection against its ground truth."""
    out = []
    vars_ = (np.array(sigmas) * 2) ** 2
    for n in range(len(pred)):
        dx, dy = pred[n, :, 0] - target[n, :, 0], pred[n, :, 1] - target[n, :, 1]
        e = (dx**2 + dy**2) / vars_ / (area[n] + np.spacing(1)) / 2
        v = vis[n] > 0
        out.append(np.sum(np.exp(-e[v])) / v.sum() if v.any() else 0.0)
    return np.array(out)


def test_pck_auc_epe_against_loops(device):
    pred, target, vis, boxes = _data()
    t = [torch.from_numpy(x).to(device) for x in (pred, target, vis, boxes)]
    norm = bbox_size(t[3])
    assert np.allclose(norm.cpu().numpy(), np.maximum(boxes[:, 2], boxes[:, 3]))
    for alpha in (0.05, 0.1, 0.2):
        ref = np_pck(pred, target, vis, norm.cpu().numpy(), alpha)
        assert float(pck(t[0], t[1], t[2], norm, alpha)) == pytest.approx(ref)
    per = pck(t[0], t[1], t[2], norm, 0.1, per_joint=True).cpu().numpy()
    j = 3
    m = vis[:, j] > 0
    assert per[j] == pytest.approx(
        np.mean(np.linalg.norm(pred[m, j] - target[m, j], axis=-1) <= 0.1 * norm.cpu().numpy()[m])
    )
    alphas = np.arange(20) * (0.5 / 20)
    ref_auc = np.mean([np_pck(pred, target, vis, norm.cpu().numpy(), a) for a in alphas])
    assert float(auc(t[0], t[1], t[2], norm)) == pytest.approx(ref_auc)
    d = np.linalg.norm(pred - target, axis=-1)[vis > 0].mean()
    assert float(epe(t[0], t[1], t[2])) == pytest.approx(d)
    head = joint_distance(t[1], 1, 2)
    assert np.allclose(head.cpu().numpy(), np.linalg.norm(target[:, 1] - target[:, 2], axis=-1))


def test_oks_against_cocoeval_formula(device):
    pred, target, vis, boxes = _data(1)
    vis[0] = 0
    area = boxes[:, 2] * boxes[:, 3]
    got = oks(*(torch.from_numpy(x).to(device) for x in (pred, target, vis, area)))
    np.testing.assert_allclose(got.cpu().numpy(), np_oks(pred, target, vis, area, COCO_SIGMAS))
    perfect = oks(
        torch.from_numpy(target),
        torch.from_numpy(target),
        torch.from_numpy(vis),
        torch.from_numpy(area),
    )
    assert torch.allclose(perfect[1:], torch.ones(11, dtype=torch.float64))
    with pytest.raises(ValueError, match="sigmas has 17 values, keypoints have K=5"):
        oks(torch.zeros(2, 5, 2), torch.zeros(2, 5, 2), torch.ones(2, 5), torch.ones(2))


def test_coco_keypoint_ap_with_pycocotools(tmp_path):
    pytest.importorskip("pycocotools")
    from tensorpose.metrics.pose2d import coco_keypoint_ap

    c = load_coco_keypoints(bundled_coco())
    a = c.arrays()
    gt = json.loads(bundled_coco().read_text())
    # ground truth as predictions: AP 1
    res = coco_results(a["image_id"], a["keypoints"], np.where(a["visibility"] > 0, 1.0, 0.0))
    stats = coco_keypoint_ap(gt, res)
    assert stats["AP"] == pytest.approx(1.0) and stats["AR"] == pytest.approx(1.0)
    # noisy predictions: lower AP, and the same through a results file
    rng = np.random.default_rng(0)
    noisy = a["keypoints"] + rng.normal(0, 6, a["keypoints"].shape)
    p = tmp_path / "res.json"
    p.write_text(json.dumps(coco_results(a["image_id"], noisy)))
    s2 = coco_keypoint_ap(bundled_coco(), p)
    assert 0.0 < s2["AP"] < 0.99


def test_shapes_are_checked():
    N = K = 17  # N == K: an (N, K) normaliser would broadcast silently
    pred, target, vis, boxes = (torch.from_numpy(x) for x in _data(2, N, K))
    norm = bbox_size(boxes)
    with pytest.raises(ValueError, match=r"normalizer must have shape \(17,\).*got \(17, 17\)"):
        pck(pred, target, vis, norm[:, None].expand(N, K))
    with pytest.raises(ValueError, match=r"normalizer must have shape \(17,\).*got \(\)"):
        pck(pred, target, vis, norm[0])
    with pytest.raises(ValueError, match=r"normalizer must have shape \(17,\).*got \(17, 1\)"):
        auc(pred, target, vis, norm[:, None])
    area = boxes[:, 2] * boxes[:, 3]
    with pytest.raises(ValueError, match=r"area must have shape \(17,\).*got \(17, 1\)"):
        oks(pred, target, vis, area[:, None])
    assert oks(pred, target, vis, area).shape == (N,)
    with pytest.raises(ValueError, match=r"visibility must have shape \(17, 17\)"):
        epe(pred, target, vis[:, :5])
    with pytest.raises(ValueError, match=r"pred and target must both be \(\.\.\., K, 2\)"):
        epe(pred, target[:5], vis)
    with pytest.raises(TypeError, match="pred must be a torch.Tensor, got ndarray"):
        epe(pred.numpy(), target, vis)
    with pytest.raises(TypeError, match="floating point"):
        epe(pred.long(), target.long(), vis)
    with pytest.raises(ValueError, match=r"sigmas has \(2, 17\) values"):
        oks(pred, target, vis, area, torch.ones(2, 17))
    with pytest.raises(ValueError, match=r"boxes must have shape \(\.\.\., 4\), got \(17, 3\)"):
        bbox_size(boxes[:, :3])
    with pytest.raises(ValueError, match=r"b must be a joint index in \[0, 17\), got 17"):
        joint_distance(target, 0, 17)
    with pytest.raises(ValueError, match="alpha must be a finite number >= 0"):
        pck(pred, target, vis, norm, alpha=-0.1)
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        auc(pred, target, vis, norm, steps=0)
    with pytest.raises(ValueError, match="max_alpha must be a finite number > 0"):
        auc(pred, target, vis, norm, max_alpha=float("nan"))
    # batched leading dims are fine: one normaliser per person
    b = (pred.reshape(1, N, K, 2), target.reshape(1, N, K, 2), vis.reshape(1, N, K))
    assert float(pck(*b, norm[None])) == pytest.approx(float(pck(pred, target, vis, norm)))


def test_coco_keypoint_ap_checks_results():
    pytest.importorskip("pycocotools")
    from tensorpose.metrics.pose2d import coco_keypoint_ap

    gt = json.loads(bundled_coco().read_text())
    with pytest.raises(ValueError, match=r"results\[1\] must be a dict with keys"):
        coco_keypoint_ap(gt, [{"image_id": 1, "category_id": 1, "keypoints": [], "score": 1}, 5])
