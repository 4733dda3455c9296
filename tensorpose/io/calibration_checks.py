"""Plausibility checks of a multi-camera calibration, vectorised over the cameras.

:func:`check_cameras` is the one validation of every :class:`tensorpose.io.calibration.Calibration`
(it runs in ``Calibration.__post_init__``; the readers run it first with the names their file
format uses, so a message names the file, the camera and the key as written in the file). The
bounds refuse nonsense, not unusual cameras:

- image size: ``1 <= width, height <= 100000`` px (:data:`MAX_IMAGE_PX`);
- ``K``: finite, of the form ``[[fx, s, cx], [0, fy, cy], [0, 0, 1]]`` (so never singular once
  the focal lengths are positive), ``fx, fy`` in ``1e-3 .. 1e7`` px (:data:`FOCAL_PX`; ``1e-3``
  keeps normalised cameras with ``f = 1`` valid), skew ``|s| <= max(fx, fy)``;
- principal point at most one image size outside the image: ``-w <= cx <= 2 w``,
  ``-h <= cy <= 2 h``;
- distortion ``k1, k2, p1, p2, k3``: finite, ``|k| <= 1000`` (:data:`MAX_DISTORTION`; real
  lenses are below ~10 in normalised coordinates);
- ``R``: finite, a rotation: ``max |R R^T - I| <= 1e-4`` and ``|det R - 1| <= 1e-4``
  (:data:`ROTATION_TOL`);
- ``t``: finite, ``|t_i| <= 1e6`` m (:data:`MAX_TRANSLATION_M`);
- no two cameras with centres within 1 mm (:data:`SAME_CENTRE_M`) and the same rotation (every
  entry within :data:`ROTATION_TOL`): a duplicated camera makes a triangulation degenerate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from ..errors import InputError

__all__ = [
    "FOCAL_PX",
    "MAX_DISTORTION",
    "MAX_IMAGE_PX",
    "MAX_TRANSLATION_M",
    "ROTATION_TOL",
    "SAME_CENTRE_M",
    "check_cameras",
]

FOCAL_PX = (1e-3, 1e7)
MAX_DISTORTION = 1e3
MAX_IMAGE_PX = 100_000
MAX_TRANSLATION_M = 1e6
ROTATION_TOL = 1e-4
SAME_CENTRE_M = 1e-3

DIST_NAMES = ("k1", "k2", "p1", "p2", "k3")

KEYS = {"size": "size", "K": "K", "focal": "K (fx, fy)", "skew": "K (skew)",
        "principal": "K (cx, cy)", "dist": tuple(f"dist ({k})" for k in DIST_NAMES),
        "R": "R", "t": "t"}  # fmt: skip
"""What each checked quantity is called in a message (readers pass their file's names)."""


def _g(v: float | torch.Tensor) -> str:
    return f"{float(v):.6g}"


def check_cameras(
    names: Sequence[str],
    K: torch.Tensor,
    dist: torch.Tensor,
    R: torch.Tensor,
    t: torch.Tensor,
    size: torch.Tensor,
    where: str = "Calibration",
    labels: Sequence[str] | None = None,
    keys: Mapping[str, object] | None = None,
) -> None:
    """Check ``C`` cameras against the bounds of the module docstring (one host sync).

    Args:
        names: the ``C`` camera names.
        K, dist, R, t, size: ``(C, 3, 3)``, ``(C, 5)``, ``(C, 3, 3)``, ``(C, 3)``, ``(C, 2)``
            (any float dtype and device; checked in float64).
        where: the file (or ``"Calibration"``) that starts every message.
        labels: per camera, how a message names it (default ``"camera 'name':"``).
        keys: names of the checked quantities in the file (see :data:`KEYS`).

    Raises:
        ValueError: one line for the first failing check of the first camera that fails it:
            ``"{where}: {label} {key}: {what was wrong}"``.
    """
    C = len(names)
    if C == 0:
        raise InputError(f"{where}: no camera")
    keys = {**KEYS, **(keys or {})}
    labels = list(labels) if labels is not None else [f"camera {n!r}:" for n in names]
    f64 = torch.float64
    K, dist, R, t, size = (x.detach().to(f64) for x in (K, dist, R, t, size))
    fx, fy, s, cx, cy = K[:, 0, 0], K[:, 1, 1], K[:, 0, 1], K[:, 0, 2], K[:, 1, 2]
    w, h = size[:, 0], size[:, 1]
    lo, hi = FOCAL_PX
    form = torch.stack([K[:, 1, 0], K[:, 2, 0], K[:, 2, 1], K[:, 2, 2] - 1], -1)
    eye = torch.eye(3, dtype=f64, device=R.device)
    orth = (R @ R.transpose(-1, -2) - eye).abs().amax((-1, -2))
    det = torch.linalg.det(R)
    same, gap = _duplicates(R, t)
    checks = [  # (bad cameras (C,), message builder); the first failing row is reported
        (~(size.isfinite().all(-1) & (size >= 1).all(-1) & (size <= MAX_IMAGE_PX).all(-1)),
         lambda c: (keys["size"], f"image size {_g(w[c])} x {_g(h[c])} px must be in "
                    f"1..{MAX_IMAGE_PX}")),
        (~K.isfinite().all((-1, -2)),
         lambda c: (keys["K"], f"non-finite intrinsics {K[c].tolist()}")),
        (~(form == 0).all(-1),
         lambda c: (keys["K"], f"{K[c].tolist()} is not an intrinsic matrix [[fx, s, cx], "
                    "[0, fy, cy], [0, 0, 1]] (singular or projective)")),
        (~((fx >= lo) & (fx <= hi) & (fy >= lo) & (fy <= hi)),
         lambda c: (keys["focal"], f"focal lengths fx = {_g(fx[c])}, fy = {_g(fy[c])} px must "
                    f"be in {lo:g}..{hi:g} px")),
        (s.abs() > torch.maximum(fx, fy),
         lambda c: (keys["skew"], f"skew {_g(s[c])} is larger than the focal length")),
        (~((cx >= -w) & (cx <= 2 * w) & (cy >= -h) & (cy <= 2 * h)),
         lambda c: (keys["principal"], f"principal point ({_g(cx[c])}, {_g(cy[c])}) px is more "
                    f"than one image size ({_g(w[c])} x {_g(h[c])}) outside the image")),
        (~(dist.isfinite() & (dist.abs() <= MAX_DISTORTION)).all(-1),
         lambda c: _dist_message(dist[c], keys["dist"])),
        (~R.isfinite().all((-1, -2)),
         lambda c: (keys["R"], f"non-finite rotation {R[c].tolist()}")),
        ((orth > ROTATION_TOL) | ((det - 1).abs() > ROTATION_TOL),
         lambda c: (keys["R"], f"not a rotation (det {_g(det[c])}, max |R R^T - I| = "
                    f"{float(orth[c]):.2g}; tolerance {ROTATION_TOL:g})")),
        (~(t.isfinite() & (t.abs() <= MAX_TRANSLATION_M)).all(-1),
         lambda c: (keys["t"], f"translation {t[c].tolist()} m is not finite within "
                    f"{MAX_TRANSLATION_M:g} m")),
        (same.any(-1),
         lambda c: (keys["t"], _same_message(c, same, gap, names))),
    ]  # fmt: skip
    bad = torch.stack([b for b, _ in checks])  # (checks, C)
    if not bool(bad.any()):
        return
    row = int(bad.any(-1).nonzero()[0, 0])
    c = int(bad[row].nonzero()[0, 0])
    key, why = checks[row][1](c)
    raise InputError(f"{where}: {labels[c]} {key}: {why}")


def _duplicates(R: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(C, C)``: camera ``i`` duplicates an earlier camera ``j < i`` (centres within 1 mm,
    the same rotation); and the distances between the centres in metres."""
    centres = -(R.transpose(-1, -2) @ t.unsqueeze(-1)).squeeze(-1)
    gap = torch.cdist(centres, centres)
    same = (gap <= SAME_CENTRE_M) & ((R[:, None] - R[None]).abs().amax((-1, -2)) <= ROTATION_TOL)
    return same & torch.ones_like(same).tril(-1), gap


def _dist_message(d: torch.Tensor, keys: Sequence[str]) -> tuple[str, str]:
    """The first distortion coefficient out of bounds, named."""
    ok = d.isfinite() & (d.abs() <= MAX_DISTORTION)
    i = int((~ok).nonzero()[0, 0])
    v = float(d[i])
    return keys[i], (
        f"distortion {DIST_NAMES[i]} = {_g(v)} is not finite within |k| <= {MAX_DISTORTION:g}"
    )


def _same_message(c: int, same: torch.Tensor, gap: torch.Tensor, names: Sequence[str]) -> str:
    j = int(same[c].nonzero()[0, 0])
    return (
        f"the same pose as camera {names[j]!r} (centres {float(gap[c, j]) * 1000:.3g} mm apart, "
        "same rotation): a triangulation with both is degenerate"
    )
