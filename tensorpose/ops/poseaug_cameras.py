"""Random viewpoints for synthetic 2D: global rotation of the body, random pinhole cameras and
the depth shift that keeps a subject in the image, and the camera-independent 2D input
``K^-1 [u, v, 1]`` (:func:`normalize_with_intrinsics`, :func:`default_intrinsics`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ._checks import check_last_dims, check_tensor
from ._poseaug_base import _check_generator, _check_range, _const, _uniform
from .camera import intrinsic_matrix, look_at
from .rotations import euler_to_matrix

__all__ = [
    "DEFAULT_FOCAL_FACTOR",
    "default_intrinsics",
    "fit_in_frame",
    "global_rotation",
    "normalize_with_intrinsics",
    "sample_cameras",
    "sample_global_angles",
]


DEFAULT_FOCAL_FACTOR = 1.0
""":func:`default_intrinsics` uses ``focal = DEFAULT_FOCAL_FACTOR * max(width, height)``: a
53 deg field of view across the long side, between the Human3.6M cameras (1.15 x 1000 px) and
phone video (about 0.85-0.9 x the long side)."""


def global_rotation(angles: torch.Tensor) -> torch.Tensor:
    """``(..., 3)`` yaw, pitch, roll (radians; Y up) -> ``R = R_y(yaw) R_x(pitch) R_z(roll)``
    ``(..., 3, 3)``: yaw turns about the vertical, pitch leans forward/back, roll sideways."""
    check_tensor("angles", angles)
    check_last_dims("angles", angles, (3,), "yaw, pitch, roll")
    return euler_to_matrix(angles, "YXZ")


def sample_global_angles(
    shape: Sequence[int],
    generator: torch.Generator,
    yaw_deg: float = 180.0,
    pitch_deg: float = 10.0,
    roll_deg: float = 10.0,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Uniform yaw in ``+-yaw_deg``, pitch in ``+-pitch_deg``, roll in ``+-roll_deg``:
    ``(*shape, 3)`` radians for :func:`global_rotation`."""
    _check_generator(generator)
    for name, v in (("yaw_deg", yaw_deg), ("pitch_deg", pitch_deg), ("roll_deg", roll_deg)):
        if not 0 <= v <= 180:
            raise ValueError(f"{name} must be in [0, 180], got {v}")
    u = _uniform((*shape, 3), generator, -1.0, 1.0, dtype)
    scale = (math.radians(yaw_deg), math.radians(pitch_deg), math.radians(roll_deg))
    return u * _const(scale, generator.device, dtype)


def sample_cameras(
    n: int,
    generator: torch.Generator,
    target: torch.Tensor,
    image_sizes: Sequence[tuple[int, int]] = ((1000, 1000), (1920, 1080), (1080, 1920)),
    fov_deg: tuple[float, float] = (40.0, 75.0),
    principal_offset: float = 0.03,
    distance_m: tuple[float, float] = (2.5, 9.0),
    elevation_deg: tuple[float, float] = (-10.0, 35.0),
    roll_deg: float = 5.0,
    off_centre: float = 0.5,
) -> dict[str, torch.Tensor]:
    """``n`` random pinhole cameras looking (roughly) at ``target``, in a Y-up world.

    Each camera: an image size from ``image_sizes`` (width, height; portrait allowed), a field
    of view across the long side uniform in ``fov_deg`` (``focal = long / 2 / tan(fov / 2)``,
    square pixels), the principal point off the image centre by up to ``principal_offset`` of
    the width/height, a position at ``distance_m`` from the target, ``elevation_deg`` above
    the horizontal plane (positive: looking down) on the world ``+z`` side (turn the subject,
    not the camera, for other azimuths), a roll about the optical axis in ``+-roll_deg``, and
    the aim turned off the target by up to ``off_centre`` of the half field of view (the subject
    is not always in the middle). Use :func:`fit_in_frame` to keep a subject inside the image.

    Args:
        n: number of cameras.
        generator: the only source of randomness; outputs are on its device.
        target: ``(n, 3)`` or ``(3,)`` world points to look at.

    Returns:
        dict with ``K (n, 3, 3)``, ``R (n, 3, 3)``, ``t (n, 3)`` (``x_cam = R x + t``),
        ``size (n, 2)`` (width, height), all in ``target``'s dtype on the generator's device.
    """
    _check_generator(generator)
    check_tensor("target", target)
    check_last_dims("target", target, (3,), "xyz")
    if not image_sizes or any(len(s) != 2 or min(s) <= 0 for s in image_sizes):
        raise ValueError(f"image_sizes must be (width, height) pairs > 0, got {image_sizes}")
    f0, f1 = _check_range("fov_deg", fov_deg, 1.0)
    if f1 >= 170:
        raise ValueError(f"fov_deg must be below 170, got {fov_deg}")
    d0, d1 = _check_range("distance_m", distance_m)
    if d0 <= 0:
        raise ValueError(f"distance_m must be positive, got {distance_m}")
    e0, e1 = _check_range("elevation_deg", elevation_deg)
    if not -90 < e0 <= e1 < 90:
        raise ValueError(f"elevation_deg must lie inside (-90, 90), got {elevation_deg}")
    if not 0 <= principal_offset < 0.5 or not 0 <= off_centre <= 1:
        raise ValueError(
            f"principal_offset must be in [0, 0.5) and off_centre in [0, 1], got "
            f"{principal_offset}, {off_centre}"
        )
    dtype, dev = target.dtype, generator.device
    sizes = _const(tuple(tuple(int(v) for v in s) for s in image_sizes), dev, dtype)
    pick = torch.randint(len(image_sizes), (n,), generator=generator, device=dev)
    size = sizes[pick]  # (n, 2)
    u = torch.rand(n, 9, generator=generator, device=dev, dtype=dtype)
    fov = torch.deg2rad(f0 + (f1 - f0) * u[:, 0])
    focal = size.amax(-1) / 2 / torch.tan(fov / 2)
    centre = size * (0.5 + principal_offset * (2 * u[:, 1:3] - 1))
    K = intrinsic_matrix(torch.stack([focal, focal], -1), centre, dtype=dtype, device=dev)
    dist = d0 + (d1 - d0) * u[:, 3]
    elev = torch.deg2rad(e0 + (e1 - e0) * u[:, 4])
    tgt = target.to(dev).expand(n, 3)
    eye = tgt + torch.stack([torch.zeros_like(dist), elev.sin(), elev.cos()], -1) * dist[:, None]
    R, _ = look_at(eye, tgt)
    # Roll about the optical axis, then turn the aim off the target (pan about the camera's y,
    # tilt about its x) by up to off_centre of the half field of view.
    half = torch.atan(size / 2 / focal[:, None])  # (n, 2) half fields of view x, y
    pan = off_centre * half[:, 0] * (2 * u[:, 5] - 1)
    tilt = off_centre * half[:, 1] * (2 * u[:, 6] - 1)
    roll = math.radians(roll_deg) * (2 * u[:, 7] - 1)
    turn = euler_to_matrix(torch.stack([tilt, pan, roll], -1), "XYZ")
    R = turn @ R
    t = -(R @ eye.unsqueeze(-1)).squeeze(-1)
    return {"K": K, "R": R, "t": t, "size": size}


def fit_in_frame(
    points: torch.Tensor,
    K: torch.Tensor,
    size: torch.Tensor,
    margin: float = 0.02,
    min_depth: float = 0.5,
) -> torch.Tensor:
    """The smallest push along each camera's optical axis that puts every point inside its
    image (with ``margin`` of the width/height free on each side) and at least ``min_depth``
    in front of it.

    A point at camera coordinates ``(x, y, z)`` projects inside when ``z + s >= fx * x /
    (right - cx)`` for ``x > 0`` (and the mirrored conditions for the left, top and bottom
    edges); ``s`` is the largest requirement over the points, never negative.

    Args:
        points: ``(n, ..., 3)`` camera coordinates of each camera's subject (any number of
            points per camera).
        K: ``(n, 3, 3)`` intrinsics (principal point inside the margins).
        size: ``(n, 2)`` width, height in pixels.

    Returns:
        ``(n,)`` shifts: use ``points + shift * e_z``.
    """
    check_tensor("points", points, 2)
    check_last_dims("points", points, (3,), "camera xyz")
    check_last_dims("K", K, (3, 3), "intrinsics")
    check_last_dims("size", size, (2,), "width, height")
    if not 0 <= margin < 0.5:
        raise ValueError(f"margin must be in [0, 0.5), got {margin}")
    n = points.shape[0]
    if K.shape[0] != n or size.shape[0] != n:
        raise ValueError(
            f"points, K and size need the same first dim, got {points.shape[0]}, "
            f"{K.shape[0]}, {size.shape[0]}"
        )
    x, y, z = points.reshape(n, -1, 3).unbind(-1)  # (n, P) each
    need = torch.full_like(z, min_depth)
    for coord, axis in ((x, 0), (y, 1)):  # the two image axes
        f, c = K[:, axis, axis, None], K[:, axis, 2, None]
        lo, hi = margin * size[:, axis, None], (1 - margin) * size[:, axis, None]
        room = torch.where(coord > 0, hi - c, c - lo).clamp_min(1e-6)  # pixels to the edge
        need = torch.maximum(need, f * coord.abs() / room)  # depth each point needs
    return (need - z).amax(-1).clamp_min(0)


def normalize_with_intrinsics(pixels: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """Camera-independent 2D: ``K^-1 [u, v, 1]`` as ``(x/z, y/z)`` (the ray through each pixel
    at unit depth).

    Args:
        pixels: ``(..., N, 2)``.
        K: ``(..., 3, 3)`` intrinsics, broadcast like ``R`` in
            :func:`~tensorpose.ops.camera.world_to_camera` (``(B, 1, 3, 3)`` for windows
            ``(B, R, J, 2)``). Any invertible K (skew allowed).

    Returns:
        ``(..., N, 2)``.

    Example:
        >>> K = torch.tensor([[1000.0, 0, 500], [0, 1000, 400], [0, 0, 1]])
        >>> normalize_with_intrinsics(torch.tensor([[600.0, 200.0]]), K)
        tensor([[ 0.1000, -0.2000]])
    """
    check_tensor("pixels", pixels, 1)
    check_last_dims("pixels", pixels, (2,), "uv pixels")
    check_tensor("K", K, 2)
    check_last_dims("K", K, (3, 3), "intrinsic matrix")
    Kinv = torch.linalg.inv(K.to(pixels.dtype))
    h = pixels @ Kinv[..., :, :2].transpose(-1, -2) + Kinv[..., None, :, 2]
    return h[..., :2] / h[..., 2:]


def default_intrinsics(
    width: float | torch.Tensor,
    height: float | torch.Tensor,
    focal_factor: float = DEFAULT_FOCAL_FACTOR,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Intrinsics for an image whose camera is unknown: ``focal = focal_factor * max(width,
    height)``, principal point at the image centre (see :data:`DEFAULT_FOCAL_FACTOR`).

    Returns:
        ``(..., 3, 3)`` (leading dims of ``width``/``height``).
    """
    w = torch.as_tensor(width, dtype=dtype, device=device)
    h = torch.as_tensor(height, dtype=dtype, device=device)
    if focal_factor <= 0:
        raise ValueError(f"focal_factor must be positive, got {focal_factor}")
    w, h = torch.broadcast_tensors(w, h)
    focal = focal_factor * torch.maximum(w, h)
    f2 = torch.stack([focal, focal], -1)  # (..., 2): never read as (fx, fy) of one camera
    return intrinsic_matrix(f2, torch.stack([w / 2, h / 2], -1), dtype=dtype, device=device)
