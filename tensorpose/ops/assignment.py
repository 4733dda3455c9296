"""Minimum-cost matching of rows to columns (:func:`linear_assignment`): the linking of 2D
tracks (:mod:`tensorpose.io.openpose`) and of 3D people over time
(:mod:`tensorpose.multiview.people`) match a handful of tracks to a handful of detections per
frame."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["linear_assignment"]


def linear_assignment(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Minimum-cost matching of rows to columns of ``cost (A, B)`` (``inf`` = forbidden).

    The exact solver of scipy's ``linear_sum_assignment`` (shortest augmenting paths, Crouse
    2016, ties broken as scipy breaks them) in plain Python: the matrices here are a few
    tracks by a few people, and importing ``scipy.optimize`` costs 0.4 s. Returns matched
    ``(rows, cols)`` sorted by row, forbidden pairs dropped."""
    A, B = cost.shape
    if A == 0 or B == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    finite = np.isfinite(cost)
    big = float(cost[finite].max()) * 2 + 1 if finite.any() else 1.0
    filled = np.where(finite, cost, big)
    transposed = A > B
    col4row = _shortest_augmenting_paths((filled.T if transposed else filled).tolist())
    r, c = np.arange(len(col4row)), np.asarray(col4row, dtype=np.int64)
    if transposed:
        order = np.argsort(c)
        r, c = c[order], r[order]
    keep = finite[r, c]
    return r[keep].astype(np.int64), c[keep].astype(np.int64)


def _shortest_augmenting_paths(cost: list[list[float]]) -> list[int]:
    """The column of each row of ``cost`` (rows <= columns, finite) in a minimum-cost
    matching: scipy's ``rectangular_lsap`` step for step."""
    nr, nc = len(cost), len(cost[0])
    u, v = [0.0] * nr, [0.0] * nc
    col4row, row4col = [-1] * nr, [-1] * nc
    for cur in range(nr):  # one augmenting path per row (a handful of tracks)
        path, spc = [-1] * nc, [math.inf] * nc
        sr, sc = [False] * nr, [False] * nc
        remaining = list(range(nc - 1, -1, -1))
        i, sink, min_val = cur, -1, 0.0
        while sink == -1:  # Dijkstra over the columns left
            sr[i] = True
            index, lowest = -1, math.inf
            for it, j in enumerate(remaining):  # the columns left (a handful of detections)
                r = min_val + cost[i][j] - u[i] - v[j]
                if r < spc[j]:
                    path[j], spc[j] = i, r
                if spc[j] < lowest or (spc[j] == lowest and row4col[j] == -1):
                    lowest, index = spc[j], it
            min_val = lowest
            j = remaining[index]
            if row4col[j] == -1:
                sink = j
            else:
                i = row4col[j]
            sc[j] = True
            remaining[index] = remaining[-1]
            remaining.pop()
        u[cur] += min_val
        for i in range(nr):  # dual update of the rows visited (a handful)
            if sr[i] and i != cur:
                u[i] += min_val - spc[col4row[i]]
        for j in range(nc):  # dual update of the columns visited (a handful)
            if sc[j]:
                v[j] -= min_val - spc[j]
        j = sink
        while True:  # augment along the path back to the current row
            i = path[j]
            row4col[j] = i
            col4row[i], j = j, col4row[i]
            if i == cur:
                break
    return col4row
