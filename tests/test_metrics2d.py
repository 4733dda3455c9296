"""2D metrics against numpy references; COCO AP through pycocotools on the bundled subset."""

import json

import numpy as np
import pytest
import torch

from tensorpose.io.coco import bundled_coco, coco_results, load_coco_keypoints
from tensorpose.metrics2d import COCO_SIGMAS, auc, bbox_size, epe, joint_distance, oks, pck


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
    from tensorpose.metrics2d import coco_keypoint_ap

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
