"""Pinhole cameras as pure tensor functions: world -> camera coordinates, projection to pixels,
screen normalisation (VideoPose3D convention), look-at extrinsics and seeded virtual cameras;
OpenCV's lens distortion (:func:`distort`, :func:`project_points`, :func:`undistort_points`,
equal to ``cv2.projectPoints`` / ``cv2.undistortPoints``).

Conventions (OpenCV): camera ``x`` right, ``y`` down, ``z`` forward; ``x_cam = R @ x_world + t``;
intrinsics ``K = [[fx, 0, cx], [0, fy, cy], [0, 0, 1]]`` in pixels. Everything is batched over
leading dims and differentiable; randomness only through an explicit ``torch.Generator``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ._checks import broadcast_shapes, check_last_dims, check_tensor

__all__ = [
    "H36M_FOCAL",
    "camera_to_opensim",
    "camera_to_world",
    "distort",
    "fit_to_rays",
    "image_coordinates",
    "intrinsic_matrix",
    "look_at",
    "normalize_screen",
    "project",
    "project_points",
    "undistort_points",
    "virtual_cameras",
    "world_to_camera",
]

H36M_FOCAL = 1145.0
"""Focal length in pixels of the Human3.6M cameras (fx, fy = 1145.0, 1143.8 for camera
54138969 in VideoPose3D's ``h36m_dataset.py``), for a 1000-pixel-wide image."""


def intrinsic_matrix(
    focal: float | torch.Tensor,
    center: Sequence[float] | torch.Tensor,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Pinhole intrinsics ``K (..., 3, 3)`` from a focal length (scalar, ``(...,)`` or
    ``(..., 2)`` for ``fx, fy``) and a principal point ``(..., 2)``, both in pixels.

    Example:
        >>> intrinsic_matrix(1000.0, (500.0, 500.0))[0]
        tensor([1000.,    0.,  500.])
    """
    f = torch.as_tensor(focal, dtype=dtype, device=device)
    c = torch.as_tensor(center, dtype=dtype, device=device)
    if c.shape[-1:] != (2,):
        raise ValueError(f"center must have shape (..., 2), got {tuple(c.shape)}")
    if f.dim() == 0 or f.shape[-1] != 2:
        f = f.unsqueeze(-1).expand(*f.shape, 2)
    lead = broadcast_shapes(f.shape[:-1], c.shape[:-1])
    f, c = f.expand(*lead, 2), c.expand(*lead, 2)
    zero, one = torch.zeros_like(f[..., 0]), torch.ones_like(f[..., 0])
    rows = [
        torch.stack([f[..., 0], zero, c[..., 0]], -1),
        torch.stack([zero, f[..., 1], c[..., 1]], -1),
        torch.stack([zero, zero, one], -1),
    ]
    return torch.stack(rows, -2)


def world_to_camera(points: torch.Tensor, R: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """``x_cam = R @ x + t`` for points ``(..., N, 3)``, ``R (..., 3, 3)``, ``t (..., 3)``.

    The leading dims of ``R`` and ``t`` broadcast against those of ``points`` without ``N``:
    for points ``(C, T, J, 3)`` of ``C`` cameras pass ``R (C, 1, 3, 3)`` and ``t (C, 1, 3)``.
    """
    check_tensor("points", points, 2)
    check_last_dims("points", points, (3,), "xyz")
    check_last_dims("R", R, (3, 3), "rotation matrix")
    check_last_dims("t", t, (3,), "translation")
    return points @ R.transpose(-1, -2) + t.unsqueeze(-2)


def camera_to_world(points: torch.Tensor, R: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`world_to_camera`: ``x = R^T (x_cam - t)``."""
    check_tensor("points", points, 2)
    check_last_dims("points", points, (3,), "xyz")
    return (points - t.unsqueeze(-2)) @ R


def project(points: torch.Tensor, K: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Pinhole projection of camera-coordinate points ``(..., N, 3)`` to pixels ``(..., N, 2)``.

    ``K (..., 3, 3)`` broadcasts like ``R`` in :func:`world_to_camera`.

    Depths are clamped to at least ``eps`` (points behind the camera give meaningless but finite
    pixels). No lens distortion.

    Example:
        >>> K = intrinsic_matrix(100.0, (50.0, 40.0))
        >>> project(torch.tensor([[0.1, -0.2, 2.0]]), K)
        tensor([[55., 30.]])
    """
    check_tensor("points", points, 2)
    check_last_dims("points", points, (3,), "xyz")
    check_last_dims("K", K, (3, 3), "intrinsic matrix")
    uvw = points @ K.transpose(-1, -2)
    return uvw[..., :2] / uvw[..., 2:].clamp_min(eps)


def normalize_screen(pixels: torch.Tensor, width: float, height: float) -> torch.Tensor:
    """VideoPose3D's screen normalisation: ``x / w * 2 - [1, h / w]`` (x spans [-1, 1], the
    aspect ratio is kept)."""
    check_tensor("pixels", pixels, 1)
    check_last_dims("pixels", pixels, (2,), "uv pixels")
    shift = pixels.new_tensor([1.0, height / width])
    return pixels / width * 2 - shift


def image_coordinates(normalized: torch.Tensor, width: float, height: float) -> torch.Tensor:
    """Inverse of :func:`normalize_screen`."""
    check_last_dims("normalized", normalized, (2,), "normalised uv")
    shift = normalized.new_tensor([1.0, height / width])
    return (normalized + shift) * width / 2


def look_at(
    eye: torch.Tensor, target: torch.Tensor, up: Sequence[float] = (0.0, 1.0, 0.0)
) -> tuple[torch.Tensor, torch.Tensor]:
    """Extrinsics of a camera at ``eye (..., 3)`` looking at ``target (..., 3)`` with world ``up``.

    Returns ``R (..., 3, 3)`` (rows: camera x right, y down, z forward in world coordinates) and
    ``t (..., 3)`` with ``x_cam = R @ x + t``. Undefined when looking straight along ``up``.
    """
    check_last_dims("eye", eye, (3,), "xyz")
    check_last_dims("target", target, (3,), "xyz")
    eye, target = torch.broadcast_tensors(eye, target)
    up_t = eye.new_tensor(up).expand_as(eye)
    z = torch.nn.functional.normalize(target - eye, dim=-1)
    x = torch.nn.functional.normalize(torch.linalg.cross(z, up_t, dim=-1), dim=-1)
    y = torch.linalg.cross(z, x, dim=-1)
    R = torch.stack([x, y, z], -2)
    t = -(R @ eye.unsqueeze(-1)).squeeze(-1)
    return R, t


def virtual_cameras(
    n: int,
    generator: torch.Generator,
    target: torch.Tensor,
    azimuth: tuple[float, float] = (-math.pi, math.pi),
    elevation: tuple[float, float] = (math.radians(-10.0), math.radians(30.0)),
    distance: tuple[float, float] = (3.0, 6.0),
    up_axis: int = 1,
) -> dict[str, torch.Tensor]:
    """``n`` cameras placed uniformly at random around ``target`` and looking at it.

    Azimuth is measured about the world ``up_axis``, elevation upwards from the horizontal plane
    (positive: camera above the target, looking down), distance from the target (radians, metres).

    Args:
        n: number of cameras.
        generator: the only source of randomness (CPU generator).
        target: ``(3,)`` world point the cameras look at.

    Returns:
        dict with ``R (n, 3, 3)``, ``t (n, 3)``, ``eye (n, 3)``, ``azimuth``, ``elevation``,
        ``distance`` (each ``(n,)``), in ``target``'s dtype and device.
    """
    check_tensor("target", target)
    check_last_dims("target", target, (3,), "xyz")
    if up_axis not in (1, 2):
        raise ValueError(f"up_axis must be 1 (Y up) or 2 (Z up), got {up_axis}")
    # Argument checks over the three scalar ranges (not a loop over data).
    for name, (lo, hi) in (("azimuth", azimuth), ("elevation", elevation), ("distance", distance)):
        if not lo <= hi:
            raise ValueError(f"{name} range must be (low, high) with low <= high, got {(lo, hi)}")
    if not -math.pi / 2 < elevation[0] <= elevation[1] < math.pi / 2:
        raise ValueError(f"elevation must lie strictly inside (-pi/2, pi/2), got {elevation}")
    if distance[0] <= 0:
        raise ValueError(f"distance must be positive, got {distance}")
    u = torch.rand(n, 3, generator=generator, dtype=torch.float64)
    az = azimuth[0] + u[:, 0] * (azimuth[1] - azimuth[0])
    el = elevation[0] + u[:, 1] * (elevation[1] - elevation[0])
    d = distance[0] + u[:, 2] * (distance[1] - distance[0])
    horiz_a = d * el.cos() * az.sin()
    horiz_b = d * el.cos() * az.cos()
    vert = d * el.sin()
    if up_axis == 1:  # Y up: ground plane is X-Z
        offset = torch.stack([horiz_a, vert, horiz_b], -1)
        up = (0.0, 1.0, 0.0)
    else:  # Z up: ground plane is X-Y
        offset = torch.stack([horiz_a, horiz_b, vert], -1)
        up = (0.0, 0.0, 1.0)
    tgt = target.detach().to(torch.float64).cpu()
    eye = tgt + offset
    R, t = look_at(eye, tgt.expand_as(eye), up)
    out = {"R": R, "t": t, "eye": eye, "azimuth": az, "elevation": el, "distance": d}
    return {k: v.to(dtype=target.dtype, device=target.device) for k, v in out.items()}


# ----------------------------------------------------------------------------- lens distortion
UNDISTORT_ITERATIONS = 5
"""Fixed-point iterations of :func:`undistort_points`: OpenCV's default for
``cv2.undistortPoints`` (``TermCriteria(COUNT, 5, 0.01)``)."""


def opencv_dist5(name: str, dist: torch.Tensor) -> torch.Tensor:
    """``(..., 4)`` or ``(..., 5)`` OpenCV coefficients -> ``(..., 5)`` ``k1, k2, p1, p2, k3``."""
    check_tensor(name, dist)
    n = dist.shape[-1]
    if n == 5:
        return dist
    if n == 4:
        return torch.cat([dist, torch.zeros_like(dist[..., :1])], -1)
    raise ValueError(
        f"{name} must have shape (..., 4) or (..., 5) (k1, k2, p1, p2[, k3]), "
        f"got {tuple(dist.shape)}"
    )


def distort(normalized: torch.Tensor, dist: torch.Tensor) -> torch.Tensor:
    """OpenCV's radial-tangential lens model on normalised image coordinates.

    ``r2 = x^2 + y^2``, ``x_d = x (1 + k1 r2 + k2 r2^2 + k3 r2^3) + 2 p1 x y + p2 (r2 + 2 x^2)``,
    ``y_d = y (1 + ...) + p1 (r2 + 2 y^2) + 2 p2 x y``.

    Args:
        normalized: ``(..., 2)`` undistorted ``x / z, y / z``.
        dist: ``(..., 4)`` or ``(..., 5)`` ``k1, k2, p1, p2[, k3]``, broadcasting against the
            leading dims of ``normalized``.

    Returns:
        ``(..., 2)`` distorted normalised coordinates.

    Example:
        >>> distort(torch.tensor([0.5, 0.0]), torch.tensor([0.1, 0.0, 0.0, 0.0]))
        tensor([0.5125, 0.0000])
    """
    check_tensor("normalized", normalized)
    check_last_dims("normalized", normalized, (2,), "normalised xy")
    xd, yd = _distort_xy(*normalized.unbind(-1), opencv_dist5("dist", dist))
    return torch.stack([xd, yd], -1)


def _distort_xy(
    x: torch.Tensor, y: torch.Tensor, dist: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`distort` on separate coordinate tensors (``dist (..., 5)`` broadcasting)."""
    k1, k2, p1, p2, k3 = dist.unbind(-1)
    r2 = torch.mul(x, x).addcmul_(y, y)
    radial = ((k3 * r2 + k2) * r2 + k1).mul_(r2).add_(1)
    xy2 = 2 * x * y
    xd = torch.addcmul(p1 * xy2, x, radial).addcmul_(p2, torch.addcmul(r2, x, x, value=2))
    yd = torch.addcmul(p2 * xy2, y, radial).addcmul_(p1, torch.addcmul(r2, y, y, value=2))
    return xd, yd


def project_uvz(
    points: torch.Tensor, K: torch.Tensor, dist: torch.Tensor, R: torch.Tensor, t: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pixel ``u``, ``v`` and depth ``z`` (each ``(...)``, contiguous) of ``points (..., 3)``;
    every leading dim of the camera parameters (``dist (..., 5)``) broadcasts against those of
    ``points``. Works on coordinate components: strided views are slow to combine on CPU."""
    px, py, pz = points.movedim(-1, 0)

    def row(i: int) -> torch.Tensor:
        r = R[..., i, :]
        return (r[..., 0] * px).addcmul_(r[..., 1], py).addcmul_(r[..., 2], pz) + t[..., i]

    xc, yc, z = row(0), row(1), row(2)
    inv = torch.where(z == 0, 1.0, z).reciprocal_()  # OpenCV: z == 0 -> divide by 1
    xd, yd = _distort_xy(xc.mul_(inv), yc.mul_(inv), dist)
    u = xd * K[..., 0, 0] + K[..., 0, 2]  # out of place: K may broadcast wider
    v = yd * K[..., 1, 1] + K[..., 1, 2]
    return u, v, z


def _project_broadcast(
    points: torch.Tensor, K: torch.Tensor, dist: torch.Tensor, R: torch.Tensor, t: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pixels ``(..., 2)`` and depths ``(...)`` of ``points (..., 3)``; every leading dim of the
    camera parameters broadcasts against those of ``points`` (no ``N`` dim)."""
    u, v, z = project_uvz(points, K, dist, R, t)
    return torch.stack([u, v], -1), z


def project_points(
    points: torch.Tensor, K: torch.Tensor, dist: torch.Tensor, R: torch.Tensor, t: torch.Tensor
) -> torch.Tensor:
    """World points to distorted pixels, as ``cv2.projectPoints(points, rvec, t, K, dist)``.

    ``x_cam = R @ x + t``; ``(x, y) = x_cam[:2] / z`` (OpenCV divides by ``z`` as is: points
    behind the camera give mirrored pixels, ``z = 0`` divides by 1); :func:`distort`; then
    ``u = fx x + cx``, ``v = fy y + cy`` (like OpenCV, ``K[0, 1]`` (skew) is not used).

    Args:
        points: ``(..., N, 3)`` world points.
        K: ``(..., 3, 3)`` intrinsics in pixels.
        dist: ``(..., 4)`` or ``(..., 5)`` ``k1, k2, p1, p2[, k3]``.
        R: ``(..., 3, 3)`` world -> camera rotation.
        t: ``(..., 3)`` world -> camera translation.

        The leading dims of the camera parameters broadcast against those of ``points``
        without ``N``: for ``C`` cameras and points ``(C, N, 3)`` pass ``K (C, 3, 3)``; for the
        same ``N`` points seen by every camera pass ``points (1, N, 3)`` or ``(N, 3)``.

    Returns:
        ``(..., N, 2)`` pixels.

    Example:
        >>> K = intrinsic_matrix(100.0, (50.0, 40.0), dtype=torch.float64)
        >>> R, t = torch.eye(3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
        >>> dist = torch.tensor([0.1, 0.0, 0.0, 0.0, 0.0], dtype=torch.float64)
        >>> project_points(torch.tensor([[1.0, 0.0, 2.0]], dtype=torch.float64), K, dist, R, t)
        tensor([[101.2500,  40.0000]], dtype=torch.float64)
    """
    check_tensor("points", points, 2)
    check_last_dims("points", points, (3,), "xyz")
    check_last_dims("K", K, (3, 3), "intrinsic matrix")
    check_last_dims("R", R, (3, 3), "rotation matrix")
    check_last_dims("t", t, (3,), "translation")
    dist = opencv_dist5("dist", dist)
    uv, _ = _project_broadcast(
        points, K.unsqueeze(-3), dist.unsqueeze(-2), R.unsqueeze(-3), t.unsqueeze(-2)
    )
    return uv


def undistort_points(
    pixels: torch.Tensor,
    K: torch.Tensor,
    dist: torch.Tensor,
    pixel: bool = False,
    iterations: int = UNDISTORT_ITERATIONS,
) -> torch.Tensor:
    """Remove lens distortion from observed pixels, as ``cv2.undistortPoints(pixels, K, dist)``.

    OpenCV's fixed-point scheme: from ``(x0, y0) = ((u - cx) / fx, (v - cy) / fy)``, repeat
    ``iterations`` times ``x = (x0 - dx(x, y)) / radial(x, y)`` (tangential terms ``dx, dy``);
    a point where ``1 / radial`` turns negative keeps ``(x0, y0)``, as in OpenCV. The loop is
    over the fixed iterations, every point at once.

    Args:
        pixels: ``(..., N, 2)`` distorted pixels.
        K: ``(..., 3, 3)`` intrinsics; ``dist``: ``(..., 4)`` or ``(..., 5)``; leading dims
            broadcast against those of ``pixels`` without ``N`` (as in :func:`project_points`).
        pixel: return pixels of the undistorted image (``K @ [x, y, 1]``, as OpenCV with
            ``P=K``) instead of normalised coordinates.
        iterations: fixed-point iterations (OpenCV's default 5).

    Returns:
        ``(..., N, 2)`` normalised ``x / z, y / z`` (or pixels with ``pixel=True``).

    Example:
        >>> K = intrinsic_matrix(100.0, (50.0, 40.0), dtype=torch.float64)
        >>> dist = torch.tensor([0.1, 0.0, 0.0, 0.0], dtype=torch.float64)
        >>> uv = torch.tensor([[101.25, 40.0]], dtype=torch.float64)
        >>> undistort_points(uv, K, dist).round(decimals=4)
        tensor([[0.5000, 0.0000]], dtype=torch.float64)
    """
    check_tensor("pixels", pixels, 2)
    check_last_dims("pixels", pixels, (2,), "uv pixels")
    check_last_dims("K", K, (3, 3), "intrinsic matrix")
    if iterations < 0:
        raise ValueError(f"iterations must be >= 0, got {iterations}")
    K = K.unsqueeze(-3)
    k1, k2, p1, p2, k3 = opencv_dist5("dist", dist).unsqueeze(-2).unbind(-1)
    x0 = (pixels[..., 0] - K[..., 0, 2]) / K[..., 0, 0]
    y0 = (pixels[..., 1] - K[..., 1, 2]) / K[..., 1, 1]
    x, y = x0, y0
    frozen = torch.zeros_like(x0, dtype=torch.bool)
    for _ in range(iterations):  # fixed-point iterations (OpenCV's scheme), not a data loop
        r2 = torch.mul(x, x).addcmul_(y, y)
        icdist = ((k3 * r2 + k2) * r2 + k1).mul_(r2).add_(1).reciprocal_()
        # Once frozen a point keeps (x0, y0) (applied at the end; later values are unused).
        frozen = frozen | (icdist < 0)
        xy2 = 2 * x * y
        dx = torch.addcmul(r2, x, x, value=2).mul_(p2).addcmul_(p1, xy2)
        dy = torch.addcmul(r2, y, y, value=2).mul_(p1).addcmul_(p2, xy2)
        x = (x0 - dx).mul_(icdist)
        y = (y0 - dy).mul_(icdist)
    x = torch.where(frozen, x0, x)
    y = torch.where(frozen, y0, y)
    if not pixel:
        return torch.stack([x, y], -1)
    u = K[..., 0, 0] * x + K[..., 0, 1] * y + K[..., 0, 2]
    v = K[..., 1, 0] * x + K[..., 1, 1] * y + K[..., 1, 2]
    w = K[..., 2, 0] * x + K[..., 2, 1] * y + K[..., 2, 2]
    return torch.stack([u / w, v / w], -1)


def fit_to_rays(
    joints: torch.Tensor, rays: torch.Tensor, weights: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Place root-relative 3D joints in front of a camera and slide each onto its 2D ray.

    1. The translation ``t`` that best places the joints on their rays: least squares of the
       algebraic reprojection error ``(X_j + t_x) - x_j (Z_j + t_z)`` and
       ``(Y_j + t_y) - y_j (Z_j + t_z)`` over the joints, weighted by ``weights`` (one 3 x 3
       linear solve per frame).
    2. Each joint with a positive weight moves along the image plane onto its ray at its own
       depth: ``(x_j d_j, y_j d_j, d_j)`` with ``d_j = Z_j + t_z``; the others stay at
       ``joints + t``. The result re-projects exactly onto the 2D keypoints; bone lengths are no
       longer kept.

    Args:
        joints: ``(..., J, 3)`` camera-frame joints up to a translation (e.g. root-relative
            lifter output), metres.
        rays: ``(..., J, 2)`` normalised image coordinates ``x / z, y / z`` (``K^-1 [u, v, 1]``,
            undistorted).
        weights: ``(..., J)`` non-negative; ``None`` = all ones. Every frame needs at least two
            joints with a positive weight.

    Returns:
        ``(placed (..., J, 3), t (..., 3))``: the joints in camera coordinates and the
        translation found in step 1.

    Example:
        >>> P = torch.tensor([[[0.0, 0.0, 0.0], [0.0, 0.5, 0.2]]], dtype=torch.float64)
        >>> t0 = torch.tensor([0.1, -0.2, 4.0], dtype=torch.float64)
        >>> rays = (P + t0)[..., :2] / (P + t0)[..., 2:]
        >>> placed, t = fit_to_rays(P, rays)
        >>> torch.allclose(t, t0[None]), torch.allclose(placed, P + t0)
        (True, True)
    """
    check_tensor("joints", joints, 2)
    check_last_dims("joints", joints, (3,), "x, y, z")
    check_tensor("rays", rays, 2)
    if rays.shape != (*joints.shape[:-1], 2):
        raise ValueError(
            f"rays must have shape {(*joints.shape[:-1], 2)} like joints, got {tuple(rays.shape)}"
        )
    w = torch.ones_like(joints[..., 0]) if weights is None else weights.to(joints)
    if w.shape != joints.shape[:-1]:
        raise ValueError(
            f"weights must have shape {tuple(joints.shape[:-1])}, got {tuple(w.shape)}"
        )
    if bool((w < 0).any()) or not bool(torch.isfinite(w).all()):
        raise ValueError("weights must be finite and non-negative")
    if bool(((w > 0).sum(-1) < 2).any()):
        raise ValueError("every frame needs at least two joints with a positive weight")
    X, Y, Z = joints.unbind(-1)
    x, y = rays.unbind(-1)
    # Normal equations of the rows [1, 0, -x] t = x Z - X and [0, 1, -y] t = y Z - Y.
    zero = torch.zeros_like(x)
    one = torch.ones_like(x)
    A = torch.stack(
        [torch.stack([one, zero, -x], -1), torch.stack([zero, one, -y], -1)], -2
    )  # (..., J, 2, 3)
    b = torch.stack([x * Z - X, y * Z - Y], -1)  # (..., J, 2)
    wA = A * w[..., None, None]
    AtA = torch.einsum("...jki,...jkl->...il", wA, A)
    Atb = torch.einsum("...jki,...jk->...i", wA, b)
    try:
        t = torch.linalg.solve(AtA, Atb)  # (..., 3)
    except torch.linalg.LinAlgError as e:
        raise ValueError("the weighted joints lie on one ray: no translation fits") from e
    d = Z + t[..., None, 2]
    on_ray = torch.stack([x * d, y * d, d], -1)
    placed = torch.where((w > 0)[..., None], on_ray, joints + t[..., None, :])
    return placed, t


def camera_to_opensim(joints: torch.Tensor) -> torch.Tensor:
    """Camera frame (x right, y down, z forward) -> Y-up frame (x right, y up, z towards the
    camera): a rotation by 180 degrees about x, ``(x, -y, -z)``. ``joints: (..., 3)``."""
    return joints * joints.new_tensor([1.0, -1.0, -1.0])
