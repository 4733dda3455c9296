"""compose / decompose / forward_kinematics / flip against naive per-bone loops."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorpose import Skeleton
from tensorpose.ops import (
    axis_angle_to_matrix,
    bone_lengths,
    compose,
    decompose,
    flip,
    forward_kinematics,
)
from tensorpose.skeleton import get_skeleton

f64 = torch.float64


# ----------------------------------------------------------------------------- naive references
def naive_decompose(joints, sk):
    lengths, dirs = [], []
    for p, c in sk.bones:
        v = joints[..., c, :] - joints[..., p, :]
        n = v.norm(dim=-1, keepdim=True)
        lengths.append(n)
        dirs.append(v / n)
    return torch.stack(lengths, -2), torch.stack(dirs, -2)


def naive_compose(lengths, dirs, sk, root=None):
    lengths, dirs = torch.broadcast_tensors(lengths, dirs[..., :1])[0], dirs
    out = [None] * sk.num_joints
    out[sk.root] = torch.zeros_like(dirs[..., 0, :]) if root is None else root + 0 * dirs[..., 0, :]
    bone_of = {c: s for s, (_, c) in enumerate(sk.bones)}
    # visit in depth order so parents are ready (the naive way: one joint at a time)
    for level in sk.levels[1:]:
        for j in level:
            s = bone_of[j]
            out[j] = out[sk.parents[j]] + lengths[..., s, :] * dirs[..., s, :]
    return torch.stack(out, -2)


def naive_fk(R, offsets, root_pos, sk):
    J = sk.num_joints
    G, P = [None] * J, [None] * J
    for level in sk.levels:
        for j in level:
            p = sk.parents[j]
            if p == -1:
                G[j] = R[..., j, :, :]
                P[j] = root_pos + offsets[j]
            else:
                G[j] = G[p] @ R[..., j, :, :]
                P[j] = P[p] + (G[p] @ offsets[j].unsqueeze(-1)).squeeze(-1)
    return torch.stack(P, -2), torch.stack(G, -3)


@st.composite
def random_trees(draw):
    """A random tree with its joints in a shuffled order (parents may have larger indices)."""
    J = draw(st.integers(1, 12))
    parents_in_order = [-1] + [draw(st.integers(0, j - 1)) for j in range(1, J)]
    perm = draw(st.permutations(range(J)))  # perm[old] = new index
    parents = [0] * J
    for old, p in enumerate(parents_in_order):
        parents[perm[old]] = -1 if p == -1 else perm[p]
    return Skeleton([f"j{i}" for i in range(J)], parents)


# ----------------------------------------------------------------------------- round trips
@settings(max_examples=60, deadline=None)
@given(sk=random_trees(), D=st.sampled_from([2, 3]), lead=st.sampled_from([(), (3,), (2, 4)]),
       seed=st.integers(0, 2**16))  # fmt: skip
def test_round_trip_random_trees(sk, D, lead, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*lead, sk.num_joints, D, generator=g, dtype=f64)
    lengths, dirs = decompose(x, sk)
    assert lengths.shape == (*lead, sk.num_bones, 1)
    assert dirs.shape == (*lead, sk.num_bones, D)
    back = compose(lengths, dirs, sk, root=x[..., sk.root, :])
    torch.testing.assert_close(back, x, rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", ["seed15", "h36m17", "mpii16", "coco17", "cmu31"])
def test_equals_naive_loops(name, device):
    sk = get_skeleton(name)
    x = torch.randn(2, 5, sk.num_joints, 3, dtype=f64, device=device)
    L, Dr = decompose(x, sk)
    nL, nD = naive_decompose(x, sk)
    torch.testing.assert_close(L, nL, rtol=0, atol=1e-12)
    torch.testing.assert_close(Dr, nD, rtol=0, atol=1e-12)
    # per-sequence lengths (B, 1, S, 1) with per-frame directions (B, T, S, D): the main use
    lens = L.mean(1, keepdim=True)
    root = torch.randn(2, 5, 3, dtype=f64, device=device)
    torch.testing.assert_close(
        compose(lens, Dr, sk, root), naive_compose(lens, Dr, sk, root), rtol=0, atol=1e-12
    )
    torch.testing.assert_close(
        bone_lengths(x, sk), naive_decompose(x, sk)[0].squeeze(-1), rtol=0, atol=1e-12
    )


def test_float32_and_any_leading_dims(device):
    sk = get_skeleton("h36m17")
    x = torch.randn(2, 3, 4, 17, 2, device=device)
    L, D = decompose(x, sk)
    torch.testing.assert_close(compose(L, D, sk, x[..., 0, :]), x, rtol=1e-5, atol=1e-5)
    y = torch.randn(17, 3, device=device)  # no batch dims at all
    L, D = decompose(y, sk)
    torch.testing.assert_close(compose(L, D, sk, y[0]), y, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- gradients
def test_gradcheck_compose_decompose():
    sk = get_skeleton("seed15")
    x = torch.randn(2, 15, 3, dtype=f64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: decompose(x, sk), (x,))
    L, D = decompose(x.detach(), sk)
    L.requires_grad_()
    D.requires_grad_()
    root = torch.randn(2, 3, dtype=f64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda L, D, r: compose(L, D, sk, r), (L, D, root))


def test_zero_length_bones_give_zero_direction_and_finite_gradients():
    sk = get_skeleton("cmu31")  # has real zero-offset joints (LHipJoint, lowerneck, ...)
    x = torch.randn(4, 31, 3, dtype=f64)
    x[:, 1] = x[:, 0]  # LHipJoint on top of Hips
    x = x.requires_grad_()
    L, D = decompose(x, sk)
    s = [c for _, c in sk.bones].index(1)
    assert (L[:, s] == 0).all() and (D[:, s] == 0).all()
    (L.sum() + (D * torch.randn_like(D)).sum()).backward()
    assert torch.isfinite(x.grad).all()
    lengths = torch.zeros(1, 30, 1, requires_grad=True)
    compose(lengths, torch.randn(1, 30, 3), sk).sum().backward()
    assert torch.isfinite(lengths.grad).all()


# ----------------------------------------------------------------------------- bad input
def test_bad_input_messages():
    sk = get_skeleton("h36m17")
    with pytest.raises(ValueError, match=r"J=17.*got \(2, 15, 3\)"):
        decompose(torch.randn(2, 15, 3), sk)
    with pytest.raises(ValueError, match="2 or 3 coordinates.*D=4"):
        decompose(torch.randn(2, 17, 4), sk)
    with pytest.raises(ValueError, match="non-finite"):
        decompose(torch.full((2, 17, 3), float("nan")), sk)
    with pytest.raises(ValueError, match="directions has non-finite"):
        compose(torch.ones(16, 1), torch.full((16, 3), float("inf")), sk)
    with pytest.raises(TypeError, match="floating point"):
        decompose(torch.zeros(17, 3, dtype=torch.long), sk)
    with pytest.raises(TypeError, match="torch.Tensor"):
        decompose([[0.0] * 3] * 17, sk)
    with pytest.raises(ValueError, match="does not broadcast"):
        compose(torch.ones(2, 1, 16, 1), torch.randn(3, 5, 16, 3), sk)
    with pytest.raises(ValueError, match=r"lengths must have shape \(\.\.\., 16, 1\)"):
        compose(torch.ones(2, 16, 3), torch.randn(2, 16, 3), sk)
    with pytest.raises(ValueError, match="S=16 bones"):
        compose(torch.ones(2, 15, 1), torch.randn(2, 15, 3), sk)
    with pytest.raises(ValueError, match="root must have shape"):
        compose(torch.ones(16, 1), torch.randn(16, 3), sk, root=torch.zeros(2))


# ----------------------------------------------------------------------------- flip
def test_flip_swaps_sides_and_is_an_involution(device):
    sk = get_skeleton("coco17")
    x = torch.randn(3, 17, 2, dtype=f64, device=device)
    y = flip(x, sk, axis=0)
    for j, name in enumerate(sk.names):
        twin = name.replace("l_", "r_") if name.startswith("l_") else name.replace("r_", "l_")
        k = sk.names.index(twin)
        torch.testing.assert_close(y[:, j, 0], -x[:, k, 0])
        torch.testing.assert_close(y[:, j, 1], x[:, k, 1])
    torch.testing.assert_close(flip(y, sk, axis=0), x)
    with pytest.raises(ValueError, match="axis"):
        flip(x, sk, axis=2)


def test_flip_preserves_mirrored_bone_lengths():
    sk = get_skeleton("h36m17")
    x = torch.randn(5, 17, 3, dtype=f64)
    Lx, Ly = bone_lengths(x, sk), bone_lengths(flip(x, sk, axis=2), sk)
    # bone s (child c) maps to the bone whose child is flip_index[c]
    child_to_bone = {c: s for s, (_, c) in enumerate(sk.bones)}
    perm = [child_to_bone[sk.flip_index[c]] for _, c in sk.bones]
    torch.testing.assert_close(Ly, Lx[:, perm])


# ----------------------------------------------------------------------------- rotation FK
def random_rotations(*shape, dtype=f64, device="cpu"):
    return axis_angle_to_matrix(torch.randn(*shape, 3, dtype=dtype, device=device))


@pytest.mark.parametrize("name", ["cmu31", "mpii16", "seed15"])
def test_forward_kinematics_equals_naive(name, device):
    sk = get_skeleton(name)
    R = random_rotations(4, sk.num_joints, device=device)
    off = torch.randn(sk.num_joints, 3, dtype=f64, device=device)
    root = torch.randn(4, 3, dtype=f64, device=device)
    P, G = forward_kinematics(R, off, root, sk, return_rotations=True)
    nP, nG = naive_fk(R, off, root, sk)
    torch.testing.assert_close(P, nP, rtol=0, atol=1e-12)
    torch.testing.assert_close(G, nG, rtol=0, atol=1e-12)
    # per-frame offsets (..., J, 3) broadcast too, root None means the origin
    P2 = forward_kinematics(R, off.expand(4, -1, -1), None, sk)
    torch.testing.assert_close(P2, nP - root.unsqueeze(-2), rtol=0, atol=1e-12)


def test_forward_kinematics_identity_pose_is_cumulative_offsets():
    sk = get_skeleton("h36m17")
    off = torch.randn(17, 3, dtype=f64)
    P = forward_kinematics(torch.eye(3, dtype=f64).expand(17, 3, 3), off, None, sk)
    L = torch.linalg.vector_norm(off[[c for _, c in sk.bones]], dim=-1)
    torch.testing.assert_close(bone_lengths(P, sk), L)


def test_forward_kinematics_gradcheck_and_bad_input():
    sk = get_skeleton("seed15")
    aa = torch.randn(2, 15, 3, dtype=f64, requires_grad=True)
    off = torch.randn(15, 3, dtype=f64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda a, o: forward_kinematics(axis_angle_to_matrix(a), o, None, sk), (aa, off)
    )
    with pytest.raises(ValueError, match="J=15 rotation matrices"):
        forward_kinematics(torch.randn(2, 14, 3, 3), torch.randn(15, 3), None, sk)
    with pytest.raises(ValueError, match="root_positions"):
        forward_kinematics(torch.randn(2, 15, 3, 3), torch.randn(15, 3), torch.zeros(2, 2), sk)


def test_rotation_fk_rotates_a_chain():
    sk = Skeleton(["a", "b", "c"], [-1, 0, 1])
    R = torch.eye(3, dtype=f64).repeat(3, 1, 1)
    R[1] = axis_angle_to_matrix(torch.tensor([0.0, 0.0, math.pi / 2], dtype=f64))
    off = torch.tensor([[0.0, 0, 0], [1, 0, 0], [1, 0, 0]], dtype=f64)
    P = forward_kinematics(R, off, None, sk)
    torch.testing.assert_close(P, torch.tensor([[0.0, 0, 0], [1, 0, 0], [1, 1, 0]], dtype=f64))


# ----------------------------------------------------------------------------- torch.compile
def test_compile_path_equals_eager_with_gradients():
    # Compiled without grad, compose/decompose take the fused gather path; with grad (and in
    # eager) the GEMM path: all must agree, values and gradients.
    sk = get_skeleton("mpii16")  # root not at index 0, parents after children
    x = torch.randn(2, 7, 16, 3, dtype=f64)
    root = torch.randn(2, 7, 3, dtype=f64)

    def round_trip(x, root):
        L, D = decompose(x, sk)
        return compose(L.mean(1, keepdim=True), D, sk, root)

    compiled = torch.compile(round_trip, fullgraph=True)
    with torch.no_grad():  # the fused gather path
        torch.testing.assert_close(compiled(x, root), round_trip(x, root), rtol=0, atol=1e-12)
    xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
    eager = round_trip(xe, root)
    compiled = compiled(xc, root)
    torch.testing.assert_close(compiled, eager, rtol=0, atol=1e-12)
    g = torch.randn_like(eager)
    eager.backward(g)
    compiled.backward(g)
    torch.testing.assert_close(xc.grad, xe.grad, rtol=0, atol=1e-12)
