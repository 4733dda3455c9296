"""tensorpose.ops.assignment.linear_assignment (the track linking of io.openpose and multiperson)
is scipy's linear_sum_assignment, ties included."""

import numpy as np
import pytest

from tensorpose.ops.assignment import linear_assignment


def test_assign_matches_scipy_with_ties_and_forbidden_pairs():
    linear_sum_assignment = pytest.importorskip("scipy.optimize").linear_sum_assignment
    rng = np.random.default_rng(0)
    for t in range(600):
        A, B = rng.integers(1, 9, 2)
        cost = rng.random((A, B)) * 100
        if t % 3 == 0:
            cost = np.round(cost / 20)  # many ties
        if t % 2 == 0:
            cost[rng.random((A, B)) < 0.3] = np.inf
        finite = np.isfinite(cost)
        big = float(cost[finite].max()) * 2 + 1 if finite.any() else 1.0
        r, c = linear_sum_assignment(np.where(finite, cost, big))
        keep = finite[r, c]
        r2, c2 = linear_assignment(cost)
        np.testing.assert_array_equal(r2, r[keep])
        np.testing.assert_array_equal(c2, c[keep])


def test_assign_empty():
    r, c = linear_assignment(np.zeros((0, 3)))
    assert r.shape == c.shape == (0,)
