"""Affine ops against OpenCV on real bundled images."""

import math
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from tensorpose.ops.affine import (
    SAMPLE_LIMIT,
    box_to_center_scale,
    crop_matrix,
    fixed_point_maps,
    fixed_point_samples,
    get_affine_transform,
    invert_affine,
    transform_points,
    warp_affine,
)

IMAGES = sorted(
    (Path(__file__).resolve().parents[2] / "tensorpose/assets/coco/images").glob("*.jpg")
)


def test_get_affine_transform_equals_cv2(device):
    rng = np.random.default_rng(0)
    src = rng.uniform(-50, 700, (64, 3, 2)).astype(np.float32)
    dst = rng.uniform(-50, 300, (64, 3, 2)).astype(np.float32)
    M = get_affine_transform(
        torch.from_numpy(src).double().to(device), torch.from_numpy(dst).double().to(device)
    )
    assert M.shape == (64, 2, 3) and M.dtype == torch.float64
    ref = np.stack([cv2.getAffineTransform(s, d) for s, d in zip(src, dst, strict=True)])
    np.testing.assert_allclose(M.cpu().numpy(), ref, rtol=1e-9, atol=1e-9)


def test_get_affine_transform_bad_input():
    with pytest.raises(ValueError, match=r"src must have shape \(\.\.\., 3, 2\)"):
        get_affine_transform(torch.zeros(2, 4, 2), torch.zeros(2, 3, 2))
    with pytest.raises(TypeError, match="dst must be a torch.Tensor"):
        get_affine_transform(torch.zeros(3, 2), np.zeros((3, 2)))
    collinear = torch.tensor([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]])
    with pytest.raises(RuntimeError, match="singular"):
        get_affine_transform(collinear, collinear)


def test_crop_matrix_conventions(device):
    # k = 1 and the window centre on the output centre: cv2.getRotationMatrix2D exactly
    H, W = 64, 48
    o = torch.tensor([(W - 1) / 2, (H - 1) / 2], dtype=torch.float64, device=device)
    theta = torch.tensor([0.3, -1.1], dtype=torch.float64, device=device)
    M = crop_matrix(
        o.expand(2, 2), torch.tensor([[W, H]] * 2, device=device).double(), (H, W), rotation=theta
    )
    for i in range(2):
        ref = cv2.getRotationMatrix2D(((W - 1) / 2, (H - 1) / 2), math.degrees(theta[i]), 1.0)
        np.testing.assert_allclose(M[i].cpu().numpy(), ref, atol=1e-12)
    # three point pairs (window centre, top-middle, left-middle) through getAffineTransform
    c = torch.tensor([[200.0, 150.0]], dtype=torch.float64)
    s = torch.tensor([[90.0, 120.0]], dtype=torch.float64)
    th, sh = 0.7, torch.tensor([[5.0, -3.0]], dtype=torch.float64)
    M = crop_matrix(c, s, (H, W), rotation=torch.tensor([th], dtype=torch.float64), shift=sh)
    cc = (c + sh)[0].numpy()
    half = 90.0 / 2
    src = np.stack(
        [
            cc,
            cc + half * np.array([math.sin(th), -math.cos(th)]),
            cc + half * np.array([-math.cos(th), -math.sin(th)]),
        ]
    ).astype(np.float32)
    dst = np.array(
        [
            [(W - 1) / 2, (H - 1) / 2],
            [(W - 1) / 2, (H - 1) / 2 - W / 2],
            [(W - 1) / 2 - W / 2, (H - 1) / 2],
        ],
        np.float32,
    )
    np.testing.assert_allclose(M[0].numpy(), cv2.getAffineTransform(src, dst), atol=2e-4)
    # a flip mirrors the output: x -> W - 1 - x
    Mf = crop_matrix(
        c,
        s,
        (H, W),
        rotation=torch.tensor([th], dtype=torch.float64),
        shift=sh,
        flip=torch.tensor([True]),
    )
    F = torch.tensor([[-1.0, 0.0, W - 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    ref = F @ torch.cat([M[0], torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64)])
    assert torch.allclose(Mf[0], ref[:2], atol=1e-12)


def test_box_to_center_scale():
    boxes = torch.tensor([[10.0, 20.0, 30.0, 80.0], [0.0, 0.0, 120.0, 40.0]])
    c, s = box_to_center_scale(boxes, 0.75, padding=1.25)
    assert torch.allclose(c, torch.tensor([[25.0, 60.0], [60.0, 20.0]]))
    assert torch.allclose(s, torch.tensor([[75.0, 100.0], [150.0, 200.0]]))
    assert torch.allclose(s[:, 0] / s[:, 1], torch.tensor(0.75))
    with pytest.raises(ValueError, match="aspect_ratio"):
        box_to_center_scale(boxes, 0.0)


def _random_matrices(n, rng, W_img, H_img, size):
    H, W = size
    c = torch.from_numpy(
        rng.uniform([0.3 * W_img, 0.3 * H_img], [0.7 * W_img, 0.7 * H_img], (n, 2))
    )
    s = torch.from_numpy(rng.uniform(80, 500, (n, 1))) * torch.tensor([[W / H, 1.0]])
    rot = torch.from_numpy(rng.uniform(-1.2, 1.2, n))
    flip = torch.from_numpy(rng.uniform(size=n) < 0.5)
    return crop_matrix(c, s, size, rotation=rot, flip=flip)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_warp_affine_equals_cv2_on_real_images(device, dtype):
    rng = np.random.default_rng(1)
    size = (128, 96)
    diffs = []
    for path in IMAGES[:6]:
        img = cv2.imread(str(path))  # (H, W, 3) uint8
        M = _random_matrices(3, rng, img.shape[1], img.shape[0], size)
        x = torch.from_numpy(img).permute(2, 0, 1)[None].expand(3, -1, -1, -1)
        if dtype == torch.float32:
            img = img.astype(np.float32)
            x = x.float()
        out = warp_affine(x.to(device), M.to(device), size)
        assert out.dtype == dtype and out.shape == (3, 3, *size)
        for i in range(3):
            ref = cv2.warpAffine(
                img,
                M[i].numpy(),
                size[::-1],
                flags=cv2.INTER_LINEAR,
                borderMode=cv2.BORDER_CONSTANT,
                borderValue=0,
            )
            got = out[i].permute(1, 2, 0).cpu().numpy().astype(np.float64)
            diffs.append(np.abs(got - ref).mean())
    assert max(diffs) < 0.5, diffs


def test_warp_affine_fill_and_padding_invariance():
    img = cv2.imread(str(IMAGES[0]))
    H0, W0 = img.shape[:2]
    M = _random_matrices(1, np.random.default_rng(2), W0, H0, (64, 48))
    ref = cv2.warpAffine(
        img,
        M[0].numpy(),
        (48, 64),
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=(127, 127, 127),
    )
    x = torch.from_numpy(img).permute(2, 0, 1)[None]
    out = warp_affine(x, M, (64, 48), fill=127.0)
    assert np.abs(out[0].permute(1, 2, 0).numpy().astype(float) - ref).mean() < 0.5
    # zero padding below/right of an image (a collated batch) changes nothing with fill 0
    padded = torch.zeros(1, 3, H0 + 37, W0 + 11, dtype=torch.uint8)
    padded[..., :H0, :W0] = x
    assert torch.equal(warp_affine(padded, M, (64, 48)), warp_affine(x, M, (64, 48)))


def test_transform_points_equals_cv2(device):
    rng = np.random.default_rng(3)
    M = _random_matrices(8, rng, 640, 480, (256, 192))
    pts = rng.uniform(0, 640, (8, 17, 2))
    got = transform_points(torch.from_numpy(pts).to(device), M.to(device)).cpu().numpy()
    for i in range(8):
        ref = cv2.transform(pts[i][:, None, :], M[i].numpy())[:, 0]
        np.testing.assert_allclose(got[i], ref, atol=1e-3)
    inv = invert_affine(M)
    for i in range(8):
        np.testing.assert_allclose(
            inv[i].numpy(), cv2.invertAffineTransform(M[i].numpy()), atol=1e-9
        )
    back = transform_points(transform_points(torch.from_numpy(pts), M), inv)
    np.testing.assert_allclose(back.numpy(), pts, atol=1e-9)


def test_warped_keypoints_land_on_warped_pixels():
    # a single bright pixel moves exactly where transform_points sends its coordinates
    img = torch.zeros(1, 1, 50, 60)
    img[0, 0, 20, 33] = 255
    M = crop_matrix(
        torch.tensor([[30.0, 25.0]]),
        torch.tensor([[30.0, 25.0]]),
        (50, 60),
        rotation=torch.tensor([0.5]),
    )
    out = warp_affine(img, M, (50, 60))
    q = transform_points(torch.tensor([[[33.0, 20.0]]]), M)[0, 0]
    w = out[0, 0]
    ys, xs = torch.meshgrid(torch.arange(50.0), torch.arange(60.0), indexing="ij")
    centroid = torch.stack([(w * xs).sum() / w.sum(), (w * ys).sum() / w.sum()])
    assert torch.allclose(centroid, q, atol=0.05)


def test_warp_affine_bad_input_and_gradcheck():
    with pytest.raises(ValueError, match=r"images must have shape \(B, C, H, W\)"):
        warp_affine(torch.zeros(3, 10, 10), torch.zeros(1, 2, 3), (4, 4))
    with pytest.raises(ValueError, match=r"matrices must have shape \(B, 2, 3\) with B=2"):
        warp_affine(torch.zeros(2, 3, 10, 10), torch.zeros(1, 2, 3), (4, 4))
    x = torch.rand(1, 2, 6, 7, dtype=torch.float64, requires_grad=True)
    M = crop_matrix(
        torch.tensor([[3.0, 2.5]]), torch.tensor([[5.0, 4.0]]), (4, 5), rotation=torch.tensor([0.2])
    ).double()
    assert torch.autograd.gradcheck(lambda im: warp_affine(im, M, (4, 5)), (x,))


def test_uint8_warps_read_only_their_pixels_and_equal_the_float_path():
    """On a CPU a uint8 image is sampled pixel by pixel (no float copy of the whole image) with
    grid_sample's arithmetic: the same values, bit for bit, as warping the float image."""
    from tensorpose.ops.affine import warp_affine_indexed

    g = torch.Generator().manual_seed(3)
    images = torch.randint(0, 256, (3, 37, 29, 3), dtype=torch.uint8, generator=g)
    nchw = images.permute(0, 3, 1, 2)  # channels-last, as decoded frames are
    K = 7
    center = torch.rand(K, 2, generator=g) * torch.tensor([29.0, 37.0])
    scale = 5 + torch.rand(K, 2, generator=g) * 40  # crops partly outside the image too
    M = crop_matrix(center, scale, (16, 12), rotation=torch.rand(K, generator=g) * 6 - 3)
    idx = torch.tensor([0, 2, 1, 1, 0, 2, 2])
    for out_dtype in (torch.float32, torch.uint8):
        a = warp_affine_indexed(nchw, M, (16, 12), idx, out_dtype=out_dtype)
        b = warp_affine_indexed(nchw.float(), M, (16, 12), idx, out_dtype=out_dtype)
        assert a.dtype == b.dtype == out_dtype and torch.equal(a, b)
        a = warp_affine(nchw, M[:3], (16, 12), out_dtype=out_dtype)
        b = warp_affine(nchw.float(), M[:3], (16, 12), out_dtype=out_dtype)
        assert torch.equal(a, b)
    assert warp_affine(nchw, M[:3], (16, 12)).dtype == torch.uint8


def test_fixed_point_samples_equal_the_float64_formula_pixel_by_pixel():
    """Each output pixel's source point ``round(32 (t0 x + (t1 y + t2)))`` of the inverse
    matrix in float64, half to even (a plain loop), clamped to SAMPLE_LIMIT; the maps are its
    ``>> 5`` and ``& 31``. One ROI is huge, so that its points run far outside any image."""
    g = torch.Generator().manual_seed(3)
    center = torch.rand(3, 2, generator=g, dtype=torch.float64) * 500
    side = torch.tensor([300.0, 41.3, 1e9], dtype=torch.float64)
    M = crop_matrix(center, torch.stack([side, side], -1), (6, 7),
                    torch.rand(3, generator=g, dtype=torch.float64) * 6 - 3).float()  # fmt: skip
    qx, qy = fixed_point_samples(M, (6, 7))
    inv = invert_affine(M.double()).numpy()
    for k in range(3):
        for y in range(6):
            for x in range(7):
                for i, q in enumerate((qx, qy)):
                    t = inv[k, i]
                    v = float(np.rint((t[0] * x + (t[1] * y + t[2])) * 32))
                    assert q[k, y, x].item() == min(max(v, -SAMPLE_LIMIT), SAMPLE_LIMIT)
    assert qx.dtype == torch.int32 and (qx[2].abs() == SAMPLE_LIMIT).any()
    first, frac = fixed_point_maps(M, (6, 7))
    assert torch.equal(first[..., 0], (qx >> 5).long())
    assert torch.equal(frac[..., 1], (qy & 31).long())
