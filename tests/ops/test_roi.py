"""ROI align against a naive per-roi / per-bin / per-sample loop that follows torchvision's C++
reference; crop_boxes against the training-time crop of the bundled COCO images."""

import math

import numpy as np
import pytest
import torch

from tensorpose.augment.crops import AugmentConfig, DeviceAugment, sample_params
from tensorpose.data.images import TopDownDataset, collate_topdown
from tensorpose.ops.affine import (
    crop_matrix,
    invert_affine,
    transform_points,
    warp_affine,
    warp_affine_indexed,
)
from tensorpose.ops.roi import crop_boxes, roi_align
from tensorpose.skeleton import get_skeleton


# ----------------------------------------------------------------------------- naive twin
def naive_bilinear(f: np.ndarray, y: float, x: float) -> np.ndarray:
    """torchvision's bilinear_interpolate on one (C, H, W) map."""
    H, W = f.shape[1:]
    if y < -1.0 or y > H or x < -1.0 or x > W:
        return np.zeros(f.shape[0])
    y, x = max(y, 0.0), max(x, 0.0)
    y_low, x_low = int(y), int(x)
    if y_low >= H - 1:
        y_high = y_low = H - 1
        y = float(y_low)
    else:
        y_high = y_low + 1
    if x_low >= W - 1:
        x_high = x_low = W - 1
        x = float(x_low)
    else:
        x_high = x_low + 1
    ly, lx = y - y_low, x - x_low
    hy, hx = 1.0 - ly, 1.0 - lx
    return (
        hy * hx * f[:, y_low, x_low]
        + hy * lx * f[:, y_low, x_high]
        + ly * hx * f[:, y_high, x_low]
        + ly * lx * f[:, y_high, x_high]
    )


def naive_roi_align(features, rois, output_size, spatial_scale, sampling_ratio, aligned):
    f = features.detach().double().numpy()
    r = rois.double().numpy()
    oh, ow = output_size
    out = np.zeros((len(r), f.shape[1], oh, ow))
    offset = 0.5 if aligned else 0.0
    for k, (b, x1, y1, x2, y2) in enumerate(r):
        sw, sh = x1 * spatial_scale - offset, y1 * spatial_scale - offset
        ew, eh = x2 * spatial_scale - offset, y2 * spatial_scale - offset
        rw, rh = ew - sw, eh - sh
        if not aligned:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / oh, rw / ow
        gh = sampling_ratio if sampling_ratio > 0 else math.ceil(rh / oh)
        gw = sampling_ratio if sampling_ratio > 0 else math.ceil(rw / ow)
        count = max(gh * gw, 1)
        for ph in range(oh):
            for pw in range(ow):
                acc = np.zeros(f.shape[1])
                for iy in range(gh):
                    y = sh + ph * bh + (iy + 0.5) * bh / gh
                    for ix in range(gw):
                        x = sw + pw * bw + (ix + 0.5) * bw / gw
                        acc += naive_bilinear(f[int(b)], y, x)
                out[k, :, ph, pw] = acc / count
    return torch.from_numpy(out)


def random_rois(g, n, N, H, W, scale):
    """Regions inside, across and outside the map (input pixels), tiny and inverted ones."""
    c = torch.rand(n, 2, generator=g, dtype=torch.float64) * torch.tensor([W + 4, H + 4]) - 2
    wh = torch.rand(n, 2, generator=g, dtype=torch.float64) * torch.tensor([W, H]) * 0.8
    wh[: n // 6] *= 0.05  # tiny
    wh[n // 6 : n // 4] *= -0.3  # inverted (x2 < x1)
    boxes = torch.cat([c - wh / 2, c + wh / 2], -1) / scale
    b = torch.randint(0, N, (n, 1), generator=g).double()
    return torch.cat([b, boxes], -1)


@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("sampling_ratio", [-1, 0, 1, 2])
def test_roi_align_equals_naive_loop(aligned, sampling_ratio):
    g = torch.Generator().manual_seed(sampling_ratio + 10 * aligned)
    N, C, H, W = 2, 3, 9, 11
    feats = torch.randn(N, C, H, W, generator=g, dtype=torch.float64)
    for scale in (1.0, 0.5, 0.25):
        rois = random_rois(g, 16, N, H, W, scale)
        for size in ((1, 1), (2, 3), (4, 4)):
            out = roi_align(feats, rois, size, scale, sampling_ratio, aligned)
            ref = naive_roi_align(feats, rois, size, scale, sampling_ratio, aligned)
            assert out.shape == (16, C, *size) and out.dtype == torch.float64
            torch.testing.assert_close(out, ref, atol=1e-9, rtol=0)


def test_roi_align_float32_and_device(device):
    g = torch.Generator().manual_seed(3)
    feats = torch.randn(2, 4, 12, 10, generator=g)
    rois = random_rois(g, 20, 2, 12, 10, 0.5)
    out = roi_align(feats.to(device), rois.float().to(device), 7, 0.5)
    assert out.dtype == torch.float32 and out.device.type == device.type
    ref = naive_roi_align(feats, rois.float(), (7, 7), 0.5, -1, True)
    torch.testing.assert_close(out.cpu().double(), ref, atol=1e-5, rtol=1e-5)


def test_roi_align_by_hand():
    ramp = torch.arange(4.0).repeat(4, 1).view(1, 1, 4, 4)  # f(y, x) = x
    # aligned region [0.5, 2.5]^2 -> map [0, 2]; 2 bins of width 1, samples at .25, .75, ...
    out = roi_align(ramp, torch.tensor([[0.0, 0.5, 0.5, 2.5, 2.5]]), 2, sampling_ratio=2)
    torch.testing.assert_close(out[0, 0], torch.tensor([[0.5, 1.5], [0.5, 1.5]]))
    # not aligned: the same box is half a pixel further right/down
    out = roi_align(
        ramp, torch.tensor([[0.0, 0.5, 0.5, 2.5, 2.5]]), 2, sampling_ratio=2, aligned=False
    )
    torch.testing.assert_close(out[0, 0], torch.tensor([[1.0, 2.0], [1.0, 2.0]]))
    # not aligned: a degenerate region is clamped to size 1 (samples at x1 + 0.25, + 0.75)
    out = roi_align(ramp, torch.tensor([[0.0, 1.0, 1.0, 1.0, 1.0]]), 1, 1.0, 2, aligned=False)
    torch.testing.assert_close(out[0, 0], torch.tensor([[1.5]]))
    ones = torch.ones(1, 1, 4, 4)
    # border rule: x samples at -2.5 and -1.5 are below -1: nothing counts
    rois = torch.tensor([[0.0, -3, 0, -1, 4]])
    assert roi_align(ones, rois, 1, sampling_ratio=2, aligned=False).item() == 0.0
    # samples at -1.5 (zero) and -0.5 (clamped to the first column): half of the grid counts
    rois = torch.tensor([[0.0, -2, 0, 0, 4]])
    assert roi_align(ones, rois, 1, sampling_ratio=2, aligned=False).item() == 0.5
    # y = H exactly still counts (clamped to the last row), y beyond H does not
    rois = torch.tensor([[0.0, 0, 4, 4, 4]])  # aligned: y = 3.5, inside
    assert roi_align(ones, rois, 1, sampling_ratio=1).item() == 1.0
    rois = torch.tensor([[0.0, 0, 9.5, 4, 9.5]])  # y = 9 > H
    assert roi_align(ones, rois, 1, sampling_ratio=1).item() == 0.0
    # adaptive grid of an inverted aligned region is empty: zeros
    assert roi_align(ones, torch.tensor([[0.0, 3, 3, 1, 1]]), 2).abs().sum() == 0
    # batch index selects the map
    two = torch.stack([torch.zeros(1, 4, 4), torch.full((1, 4, 4), 7.0)])
    out = roi_align(two, torch.tensor([[1.0, 0, 0, 4, 4], [0, 0, 0, 4, 4]]), 2)
    assert out[0].eq(7).all() and out[1].eq(0).all()
    # no regions
    assert roi_align(ones, torch.zeros(0, 5), (2, 3)).shape == (0, 1, 2, 3)


def test_roi_align_gradcheck():
    g = torch.Generator().manual_seed(4)
    feats = torch.randn(2, 2, 6, 5, generator=g, dtype=torch.float64, requires_grad=True)
    rois = random_rois(g, 5, 2, 6, 5, 1.0)
    for sr, aligned in ((-1, True), (2, False)):
        assert torch.autograd.gradcheck(
            lambda f, sr=sr, al=aligned: roi_align(f, rois, (2, 3), 1.0, sr, al), (feats,)
        )


def test_roi_align_bad_input():
    f = torch.zeros(1, 2, 4, 4)
    with pytest.raises(ValueError, match=r"features must have shape \(N, C, H, W\)"):
        roi_align(torch.zeros(2, 4, 4), torch.zeros(1, 5), 2)
    with pytest.raises(ValueError, match=r"rois must have shape \(K, 5\)"):
        roi_align(f, torch.zeros(3, 4), 2)
    with pytest.raises(ValueError, match=r"rois\[:, 0\] \(batch index\) must be in \[0, 1\)"):
        roi_align(f, torch.tensor([[1.0, 0, 0, 1, 1]]), 2)
    with pytest.raises(ValueError, match="output_size must be positive"):
        roi_align(f, torch.zeros(1, 5), (0, 2))
    with pytest.raises(ValueError, match="spatial_scale must be positive"):
        roi_align(f, torch.zeros(1, 5), 2, spatial_scale=0.0)
    with pytest.raises(TypeError, match="sampling_ratio must be an int"):
        roi_align(f, torch.zeros(1, 5), 2, sampling_ratio=1.5)
    with pytest.raises(TypeError, match="features must be a floating point tensor"):
        roi_align(f.long(), torch.zeros(1, 5), 2)


# ----------------------------------------------------------------------------- crops
def test_warp_affine_indexed_equals_warp_affine(device):
    g = torch.Generator().manual_seed(5)
    images = torch.randint(0, 256, (2, 40, 50, 3), generator=g, dtype=torch.uint8).to(device)
    idx = torch.tensor([1, 0, 1, 1], device=device)
    c = torch.rand(4, 2, generator=g, dtype=torch.float64) * 50
    s = torch.rand(4, 1, generator=g, dtype=torch.float64) * 30 + 5
    rot = torch.rand(4, generator=g, dtype=torch.float64)
    M = crop_matrix(c, torch.cat([s, s * 4 / 3], -1), (16, 12), rotation=rot).to(device)
    x = images.permute(0, 3, 1, 2).double()
    for fill in (0.0, 9.0):
        ref = warp_affine(x[idx], M, (16, 12), fill=fill)
        out = warp_affine_indexed(x, M, (16, 12), idx, fill=fill)
        torch.testing.assert_close(out, ref, atol=1e-9, rtol=0)
    ref = warp_affine(images.permute(0, 3, 1, 2)[idx], M.float(), (16, 12))
    out = warp_affine_indexed(images.permute(0, 3, 1, 2), M.float(), (16, 12), idx)
    assert out.dtype == torch.uint8 and (out.int() - ref.int()).abs().max() <= 1
    with pytest.raises(ValueError, match=r"batch_index must be in \[0, 2\), got 2"):
        warp_affine_indexed(x.cpu(), M.cpu(), (16, 12), torch.tensor([0, 2, 0, 0]))


@pytest.fixture(scope="module")
def coco_batch():
    ds = TopDownDataset(cache_images=True)
    return collate_topdown([ds[i] for i in (0, 3, 9, 14)])


def test_crop_boxes_equals_training_crop(coco_batch):
    size = (64, 48)
    cfg = AugmentConfig.identity(size)
    params = sample_params(cfg, 4, torch.Generator().manual_seed(0))
    train = DeviceAugment(cfg, get_skeleton("coco17"))(coco_batch, params=params)
    x, y, w, h = coco_batch["bbox"].unbind(-1)
    boxes = torch.stack([torch.arange(4.0), x, y, x + w, y + h], -1)
    crops, M = crop_boxes(coco_batch["images"], boxes, size)
    assert crops.shape == (4, 3, 64, 48) and crops.dtype == torch.float32
    torch.testing.assert_close(M, train["matrices"], atol=1e-4, rtol=1e-5)
    assert float((crops - train["images"]).abs().max()) < 0.05
    # keypoints: into the crop as the training data does, and back to the image
    kp = coco_batch["keypoints"]
    crop_kp = transform_points(kp, M)
    torch.testing.assert_close(crop_kp, train["keypoints"], atol=1e-3, rtol=0)
    back = transform_points(crop_kp, invert_affine(M))
    assert float((back - kp).abs().max()) < 1e-3


def test_crop_boxes_geometry_by_hand():
    # a 30x40 box with the crop's aspect ratio and padding 1: its area is the whole crop
    img = torch.zeros(1, 100, 100, 3, dtype=torch.uint8)
    img[0, 30:70, 20:50] = 200  # the box's pixels (half a pixel further up-left)
    crops, M = crop_boxes(img, torch.tensor([[0.0, 20, 30, 50, 70]]), (8, 6), padding=1.0)
    # box corners, in keypoint coordinates as the training crop takes them, go to the crop
    # area's corners
    corners = transform_points(torch.tensor([[[20.0, 30.0], [50.0, 70.0]]]), M)
    torch.testing.assert_close(corners, torch.tensor([[[-0.5, -0.5], [5.5, 7.5]]]))
    assert crops.shape == (1, 3, 8, 6) and crops.eq(200).all()
    # several boxes on one float image, each crop read from its own image
    imgs = torch.stack([torch.zeros(3, 50, 60), torch.full((3, 50, 60), 5.0)]).double()
    boxes = torch.tensor([[1.0, 10, 10, 20, 30], [0, 5, 5, 40, 40], [1, 0, 0, 60, 50]]).double()
    crops, M = crop_boxes(imgs, boxes, (16, 12))
    assert crops.dtype == torch.float64 and M.dtype == torch.float64
    torch.testing.assert_close(crops[0], torch.full_like(crops[0], 5.0))
    assert crops[1].eq(0).all()


def test_crop_boxes_bad_input():
    with pytest.raises(ValueError, match=r"images must have shape \(B, C, H, W\)"):
        crop_boxes(torch.zeros(3, 10, 10), torch.zeros(1, 5), (8, 6))
    with pytest.raises(TypeError, match="images must be uint8 or floating point"):
        crop_boxes(torch.zeros(1, 3, 10, 10, dtype=torch.int32), torch.zeros(1, 5), (8, 6))
    with pytest.raises(ValueError, match=r"boxes must have shape \(K, 5\)"):
        crop_boxes(torch.zeros(1, 3, 10, 10), torch.zeros(1, 4), (8, 6))
    with pytest.raises(ValueError, match="padding must be positive"):
        crop_boxes(torch.zeros(1, 3, 10, 10), torch.zeros(1, 5), (8, 6), padding=0)
