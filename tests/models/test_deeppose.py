"""DeepPose regressors, heads, and a learning smoke test on bundled COCO crops."""

import pytest
import torch

from tensorpose.augment.crops import AugmentConfig, CpuAugment, sample_params
from tensorpose.data.images import TopDownDataset
from tensorpose.losses import heatmap_mse, masked_mse
from tensorpose.metrics.pose2d import pck
from tensorpose.models import (
    AlexNetRegressor,
    centernet_pose_net,
    deeppose,
    heatmap_pose_net,
)
from tensorpose.models.deeppose import denormalize_coords, normalize_coords
from tensorpose.ops.heatmap import decode_heatmaps, gaussian_heatmaps
from tensorpose.skeleton import get_skeleton

SK = get_skeleton("coco17")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    # On a shared 2-core machine, a second OpenMP thread slows conv training down many times.
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_alexnet_shapes():
    for size in (227, 224):
        m = AlexNetRegressor(17, input_size=size, fc_width=64).eval()
        assert m(torch.rand(2, 3, size, size)).shape == (2, 17, 2)
    full = AlexNetRegressor(17)
    assert full.fc6.in_features == 256 * 6 * 6 and full.fc8.out_features == 34
    with pytest.raises(ValueError, match=r"x must have shape \(B, 3, 227, 227\)"):
        full(torch.rand(1, 3, 224, 224))
    with pytest.raises(ValueError, match="backbone must be"):
        deeppose(17, "vgg")


def test_resnet_and_heads_shapes():
    x = torch.rand(2, 3, 128, 96)
    assert deeppose(17, "resnet10", width=8)(x).shape == (2, 17, 2)
    assert heatmap_pose_net(17, 10, 8)(x).shape == (2, 17, 32, 24)
    out = centernet_pose_net(17, 10, 8)(torch.rand(1, 3, 128, 128))
    assert out["heatmap"].shape == (1, 1, 32, 32) and out["joint_offset"].shape == (1, 34, 32, 32)
    assert torch.allclose(out["heatmap"].mean(), torch.tensor(-2.19), atol=0.5)


def test_coordinate_normalisation_round_trip():
    kp = torch.rand(3, 17, 2) * 200
    u = normalize_coords(kp, (256, 192))
    assert torch.allclose(denormalize_coords(u, (256, 192)), kp, atol=1e-4)
    corners = normalize_coords(torch.tensor([[-0.5, -0.5], [191.5, 255.5]]), (256, 192))
    assert torch.allclose(corners, torch.tensor([[-0.5, -0.5], [0.5, 0.5]]))


def _crops(size, n=8):
    ds = TopDownDataset(aspect_ratio=size[1] / size[0], cache_images=True)
    cfg = AugmentConfig.identity(size)
    params = sample_params(cfg, n, torch.Generator().manual_seed(0))
    b = CpuAugment(cfg, SK).apply([ds[i] for i in range(n)], params)
    return (b["images"].float() / 255 - 0.45) / 0.225, b["keypoints"], b["visibility"]


def test_deeppose_learns_on_bundled_crops():
    """Regression loss falls over a few dozen steps on 8 real crops (memorisation: the proof
    that data, targets, model and loss fit together before a trainer exists)."""
    torch.manual_seed(0)
    size = (96, 96)
    x, kp, vis = _crops(size)
    y = normalize_coords(kp, size)
    model = deeppose(17, "resnet10", width=16)
    opt = torch.optim.Adam(model.parameters(), 3e-3)
    losses = []
    for _ in range(40):
        loss = masked_mse(model(x), y, vis)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    assert float(losses[-1]) < float(losses[0]) / 10
    model.eval()
    with torch.no_grad():
        pred = denormalize_coords(model(x), size)
    norm = torch.full((8,), float(max(size)))
    assert float(pck(pred, kp, vis, norm, 0.2)) > 0.9


def test_heatmap_model_learns_on_bundled_crops():
    torch.manual_seed(0)
    size = (128, 96)
    x, kp, vis = _crops(size)
    hm, w = gaussian_heatmaps(kp, vis, (32, 24), sigma=2.0, stride=4.0)
    model = heatmap_pose_net(17, 10, 16)
    opt = torch.optim.Adam(model.parameters(), 3e-3)
    first = None
    for _ in range(30):
        loss = heatmap_mse(model(x), hm, w) * 1000
        opt.zero_grad()
        loss.backward()
        opt.step()
        first = float(loss.detach()) if first is None else first
    assert float(loss.detach()) < first / 2
    coords, _ = decode_heatmaps(model(x).detach(), stride=4.0)
    assert coords.shape == (8, 17, 2)
