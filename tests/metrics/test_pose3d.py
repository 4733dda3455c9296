"""Metrics vs straightforward numpy references written here (VideoPose3D definitions)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tensorpose import metrics
from tensorpose.ops.kinematics import flip
from tensorpose.ops.procrustes import procrustes_align
from tensorpose.skeleton import get_skeleton

SK = get_skeleton("h36m17")
RNG = np.random.default_rng(0)


# ---------------------------------------------------------------------- numpy references
def ref_mpjpe(p, t):
    return np.mean(np.linalg.norm(p - t, axis=-1))


def ref_umeyama(p, t):
    """Similarity (s, R, trans) minimising |s R p + trans - t|^2 for one pose, proper rotation
    (Umeyama 1991), applied to p. Independent of the library's formulation."""
    mp, mt = p.mean(0), t.mean(0)
    pc, tc = p - mp, t - mt
    cov = tc.T @ pc / len(p)
    U, D, Vt = np.linalg.svd(cov)
    S = np.eye(3)
    if np.linalg.det(U) * np.linalg.det(Vt) < 0:
        S[2, 2] = -1
    R = U @ S @ Vt
    var_p = (pc**2).sum() / len(p)
    s = np.trace(np.diag(D) @ S) / var_p
    return (s * (R @ pc.T)).T + mt


def ref_p_mpjpe(p, t):
    p2, t2 = p.reshape(-1, *p.shape[-2:]), t.reshape(-1, *t.shape[-2:])
    errs = [
        np.linalg.norm(ref_umeyama(a, b) - b, axis=-1).mean() for a, b in zip(p2, t2, strict=True)
    ]
    return np.mean(errs)


def ref_n_mpjpe(p, t):
    out = []
    for a, b in zip(p.reshape(-1, *p.shape[-2:]), t.reshape(-1, *t.shape[-2:]), strict=True):
        s = (a * b).sum() / (a * a).sum()  # least-squares scale
        out.append(np.linalg.norm(s * a - b, axis=-1).mean())
    return np.mean(out)


def ref_mpjve(p, t):
    vals = []
    for k in range(1, p.shape[0]):
        vals.append(np.linalg.norm((p[k] - p[k - 1]) - (t[k] - t[k - 1]), axis=-1).mean())
    return np.mean(vals)


def ref_bone_std(x):
    stds = []
    for parent, child in SK.bones:
        lengths = [np.linalg.norm(x[f, child] - x[f, parent]) for f in range(x.shape[0])]
        stds.append(np.std(lengths))
    return np.mean(stds)


def random_rotation(rng):
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return q * np.sign(np.linalg.det(q))


def T(x):
    return torch.from_numpy(np.asarray(x, dtype=np.float64))


# ---------------------------------------------------------------------- tests
def test_mpjpe_matches_reference():
    p, t = RNG.normal(size=(4, 6, 17, 3)), RNG.normal(size=(4, 6, 17, 3))
    assert float(metrics.mpjpe(T(p), T(t))) == pytest.approx(ref_mpjpe(p, t), rel=1e-12)
    none = metrics.mpjpe(T(p), T(t), "none")
    assert none.shape == (4, 6)
    assert float(none[1, 2]) == pytest.approx(ref_mpjpe(p[1, 2], t[1, 2]), rel=1e-12)


@pytest.mark.parametrize("case", ["random", "similar", "mirrored", "scaled"])
def test_p_mpjpe_matches_reference(case):
    t = RNG.normal(size=(5, 17, 3))
    if case == "random":
        p = RNG.normal(size=(5, 17, 3))
    elif case == "similar":  # rotation + scale + translation: aligns exactly
        p = 1.7 * t @ random_rotation(RNG).T + np.array([0.3, -1.0, 2.0])
    elif case == "mirrored":  # a reflection cannot be undone by a proper rotation
        p = t * np.array([-1.0, 1.0, 1.0])
    else:
        p = 0.5 * t + 0.01 * RNG.normal(size=t.shape)
    got = float(metrics.p_mpjpe(T(p), T(t)))
    assert got == pytest.approx(ref_p_mpjpe(p, t), rel=1e-9, abs=1e-12)
    if case == "similar":
        assert got < 1e-10
    if case == "mirrored":
        assert got > 0.1


def test_p_mpjpe_reflection_fix_on_flipped_skeleton():
    t = RNG.normal(size=(3, 17, 3))
    p = flip(T(t), SK, axis=0).numpy()
    got = metrics.p_mpjpe(T(p), T(t), "none").numpy()
    want = [ref_p_mpjpe(p[i : i + 1], t[i : i + 1]) for i in range(3)]
    np.testing.assert_allclose(got, want, rtol=1e-9)
    # The aligned pose is a proper similarity image of pred: no reflection sneaks in.
    aligned = procrustes_align(T(p), T(t)).numpy()
    for a, b in zip(aligned, p, strict=True):
        ac, bc = a - a.mean(0), b - b.mean(0)
        M = np.linalg.lstsq(bc, ac, rcond=None)[0]
        assert np.linalg.det(M) > 0


@pytest.mark.parametrize("scale", [0.5, 2.0, 3.3])
def test_n_mpjpe_undoes_scale(scale):
    t = RNG.normal(size=(4, 17, 3))
    p = scale * t
    assert float(metrics.n_mpjpe(T(p), T(t))) < 1e-12
    q = RNG.normal(size=(4, 17, 3))
    assert float(metrics.n_mpjpe(T(q), T(t))) == pytest.approx(ref_n_mpjpe(q, t), rel=1e-10)
    # Mirrored input: scale cannot fix it.
    m = t * np.array([-1.0, 1.0, 1.0])
    assert float(metrics.n_mpjpe(T(m), T(t))) == pytest.approx(ref_n_mpjpe(m, t), rel=1e-10)


def test_mpjve_matches_reference():
    p, t = RNG.normal(size=(9, 17, 3)), RNG.normal(size=(9, 17, 3))
    assert float(metrics.mpjve(T(p), T(t))) == pytest.approx(ref_mpjve(p, t), rel=1e-12)
    assert metrics.mpjve(T(p), T(t), "none").shape == (8,)
    # A constant offset has zero velocity error.
    assert float(metrics.mpjve(T(t + 0.3), T(t))) < 1e-12
    with pytest.raises(ValueError, match="at least 2 frames"):
        metrics.mpjve(T(p[:1]), T(t[:1]))


def test_bone_length_std_matches_reference():
    x = RNG.normal(size=(7, 17, 3))
    assert float(metrics.bone_length_std(T(x), SK)) == pytest.approx(ref_bone_std(x), rel=1e-10)
    assert metrics.bone_length_std(T(x)[None], SK, "none").shape == (1, 16)
    rigid = np.stack([x[0] @ random_rotation(RNG).T for _ in range(5)])
    assert float(metrics.bone_length_std(T(rigid), SK)) < 1e-12


def test_bad_inputs():
    a = torch.zeros(2, 17, 3)
    with pytest.raises(ValueError, match="same shape"):
        metrics.mpjpe(a, torch.zeros(2, 16, 3))
    with pytest.raises(ValueError, match="reduction"):
        metrics.mpjpe(a, a, "sum")
    with pytest.raises(ValueError, match=r"\(\.\.\., J, 3\)"):
        metrics.p_mpjpe(torch.zeros(2, 17, 2), torch.zeros(2, 17, 2))
    with pytest.raises(TypeError):
        metrics.mpjpe(np.zeros((2, 17, 3)), a)
