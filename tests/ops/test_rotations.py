import math

import pytest
import torch

from tensorpose.ops import axis_angle_to_matrix, euler_to_matrix, matrix_to_axis_angle

f64 = torch.float64


def elementary(axis, a):
    c, s = math.cos(a), math.sin(a)
    return {
        "X": [[1, 0, 0], [0, c, -s], [0, s, c]],
        "Y": [[c, 0, s], [0, 1, 0], [-s, 0, c]],
        "Z": [[c, -s, 0], [s, c, 0], [0, 0, 1]],
    }[axis]


@pytest.mark.parametrize("order", ["XYZ", "ZXY", "ZYX", "YXZ", "ZYZ"])
def test_euler_equals_product_of_elementary_rotations(order):
    angles = torch.randn(5, 3, dtype=f64)
    R = euler_to_matrix(angles, order)
    for i in range(5):
        ref = torch.eye(3, dtype=f64)
        for k, axis in enumerate(order):
            ref = ref @ torch.tensor(elementary(axis, angles[i, k].item()), dtype=f64)
        torch.testing.assert_close(R[i], ref, rtol=0, atol=1e-14)


def test_euler_bad_order():
    with pytest.raises(ValueError, match="order"):
        euler_to_matrix(torch.zeros(3), "XYW")
    with pytest.raises(ValueError, match="three Euler angles"):
        euler_to_matrix(torch.zeros(2), "XYZ")


def test_axis_angle_round_trip_and_orthonormal():
    aa = torch.randn(100, 3, dtype=f64)
    aa = aa / aa.norm(dim=-1, keepdim=True) * torch.rand(100, 1, dtype=f64) * (math.pi - 1e-3)
    aa[0] = 0.0
    aa[1] = torch.tensor([1e-9, 0, 0])
    R = axis_angle_to_matrix(aa)
    eye = torch.eye(3, dtype=f64).expand(100, 3, 3)
    torch.testing.assert_close(R @ R.transpose(-1, -2), eye, rtol=0, atol=1e-12)
    torch.testing.assert_close(torch.linalg.det(R), torch.ones(100, dtype=f64))
    torch.testing.assert_close(matrix_to_axis_angle(R), aa, rtol=0, atol=1e-9)


def test_axis_angle_matches_euler_about_one_axis():
    a = 0.7
    R = axis_angle_to_matrix(torch.tensor([0.0, a, 0.0], dtype=f64))
    torch.testing.assert_close(R, torch.tensor(elementary("Y", a), dtype=f64))


def test_axis_angle_gradcheck_near_zero():
    aa = torch.tensor([[1e-6, -2e-6, 0.5e-6], [0.3, 0.2, -0.1]], dtype=f64, requires_grad=True)
    assert torch.autograd.gradcheck(axis_angle_to_matrix, (aa,))
