"""Batched Procrustes alignment vs the obvious per-pose loop (Umeyama 1991 in numpy)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tensorpose.ops.procrustes import procrustes_align

RNG = np.random.default_rng(1)


def naive_align(p: np.ndarray, t: np.ndarray) -> np.ndarray:
    """One pose at a time: similarity (s, R, trans) minimising |s R p + trans - t|^2, proper R."""
    out = []
    for a, b in zip(p.reshape(-1, *p.shape[-2:]), t.reshape(-1, *t.shape[-2:]), strict=True):
        ma, mb = a.mean(0), b.mean(0)
        ac, bc = a - ma, b - mb
        U, D, Vt = np.linalg.svd(bc.T @ ac / len(a))
        S = np.eye(3)
        if np.linalg.det(U) * np.linalg.det(Vt) < 0:
            S[2, 2] = -1
        R = U @ S @ Vt
        s = np.trace(np.diag(D) @ S) / ((ac**2).sum() / len(a))
        out.append((s * (R @ ac.T)).T + mb)
    return np.stack(out).reshape(p.shape)


@pytest.mark.parametrize("shape", [(17, 3), (5, 17, 3), (2, 3, 9, 3)])
def test_matches_the_per_pose_loop(shape, device):
    p, t = RNG.normal(size=shape), RNG.normal(size=shape)
    got = procrustes_align(torch.tensor(p, device=device), torch.tensor(t, device=device))
    np.testing.assert_allclose(got.cpu().numpy(), naive_align(p, t), rtol=1e-9, atol=1e-12)


def test_mirrored_pose_gets_a_proper_rotation():
    t = RNG.normal(size=(4, 17, 3))
    p = t * np.array([-1.0, 1.0, 1.0])
    got = procrustes_align(torch.tensor(p), torch.tensor(t)).numpy()
    np.testing.assert_allclose(got, naive_align(p, t), rtol=1e-9, atol=1e-12)
    for a, b in zip(got, p, strict=True):
        M = np.linalg.lstsq(b - b.mean(0), a - a.mean(0), rcond=None)[0]
        assert np.linalg.det(M) > 0


def test_bad_input_names_the_argument():
    a = torch.zeros(2, 17, 3)
    with pytest.raises(ValueError, match=r"pred must have shape \(\.\.\., J, 3\)"):
        procrustes_align(torch.zeros(2, 17, 2), a)
    with pytest.raises(ValueError, match="same shape"):
        procrustes_align(a, torch.zeros(2, 16, 3))
    with pytest.raises(TypeError, match="target must be a torch.Tensor"):
        procrustes_align(a, np.zeros((2, 17, 3)))


def test_gradcheck():
    p = torch.tensor(RNG.normal(size=(2, 6, 3)), requires_grad=True)
    t = torch.tensor(RNG.normal(size=(2, 6, 3)))
    assert torch.autograd.gradcheck(lambda x: procrustes_align(x, t), (p,))
