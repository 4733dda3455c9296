"""Pictures (matplotlib, imported lazily: ``pip install tensorpose[viz]``).

- :func:`plot_curves`: train/val loss and MPJPE per epoch.
- :func:`plot_skeletons_3d`: ground-truth and predicted 3D skeletons side by side, from several
  viewpoints. Inputs are camera coordinates (x right, y down, z forward); plots show them with
  up = -y so people stand upright. Left limbs blue, right limbs red, the rest grey.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from .skeleton import Skeleton

__all__ = ["plot_curves", "plot_skeletons_3d"]

LEFT, RIGHT, CENTRE = "tab:blue", "tab:red", "0.35"


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise ImportError(
            "pictures need matplotlib: pip install 'tensorpose[viz]' (or pip install matplotlib)"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _bone_colours(skeleton: Skeleton) -> list[str]:
    out = []
    for _, child in skeleton.bones:
        n = skeleton.names[child].lower()
        left = n.startswith(("l_", "left"))
        right = n.startswith(("r_", "right"))
        out.append(LEFT if left else RIGHT if right else CENTRE)
    return out


def plot_curves(history: Sequence[dict], path: str | Path, title: str = "") -> Path:
    """Two panels: loss (train, val) and MPJPE in mm (train, val, val P-MPJPE) per epoch."""
    plt = _pyplot()
    ep = [h["epoch"] for h in history]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    a.plot(ep, [h["train_loss"] for h in history], "o-", ms=3, label="train")
    a.plot(ep, [h["val_loss"] for h in history], "s-", ms=3, label="val (held out)")
    a.set_xlabel("epoch")
    a.set_ylabel("loss")
    a.set_yscale("log")
    a.set_title("loss")
    a.legend()
    b.plot(ep, [h["train_mpjpe_mm"] for h in history], "o-", ms=3, label="train MPJPE")
    b.plot(ep, [h["val_mpjpe_mm"] for h in history], "s-", ms=3, label="val MPJPE")
    b.plot(ep, [h["val_p_mpjpe_mm"] for h in history], "^--", ms=3, label="val P-MPJPE")
    b.set_xlabel("epoch")
    b.set_ylabel("mm (log scale)")
    b.set_title("joint error")
    b.set_yscale("log")
    b.legend()
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    plain = FuncFormatter(lambda v, _: f"{v:g}")
    for ax in (a, b):
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_skeletons_3d(
    gt: torch.Tensor,
    pred: torch.Tensor,
    skeleton: Skeleton,
    path: str | Path,
    views: Sequence[tuple[float, float, str]] = (
        (8.0, -90.0, "camera view"),
        (8.0, 0.0, "side view"),
    ),
    labels: Sequence[str] | None = None,
    title: str = "",
) -> Path:
    """Ground truth and prediction for ``F`` frames side by side (columns: frame x {ground
    truth, prediction}; the prediction panel repeats the ground truth in light grey), one row per
    viewpoint ``(elevation, azimuth, name)`` in degrees (azimuth -90 looks along the camera's
    optical axis, 0 from the subject's side).

    Args:
        gt, pred: ``(F, J, 3)`` root-relative camera coordinates (metres).
        labels: per-frame captions (e.g. frame number and error).
    """
    plt = _pyplot()
    gt = gt.detach().cpu().double()
    pred = pred.detach().cpu().double()
    F = gt.shape[0]
    colours = _bone_colours(skeleton)

    # camera (x right, y down, z forward) -> plot (X = x, Y = z depth, Z = -y up)
    def to_plot(p: torch.Tensor) -> torch.Tensor:
        return torch.stack([p[..., 0], p[..., 2], -p[..., 1]], -1)

    g, p = to_plot(gt), to_plot(pred)
    both = torch.cat([g, p])  # (2F, J, 3)
    centre = (both.amax((0, 1)) + both.amin((0, 1))) / 2
    half = float((both.amax((0, 1)) - both.amin((0, 1))).max()) / 2 * 1.05
    fig = plt.figure(figsize=(2.3 * 2 * F, 2.6 * len(views)))
    for r, (elev, azim, vname) in enumerate(views):
        for f in range(F):
            panels = ((g[f], "ground truth", None), (p[f], "prediction", g[f]))
            for k, (pose, name, ghost) in enumerate(panels):
                ax = fig.add_subplot(len(views), 2 * F, r * 2 * F + 2 * f + k + 1, projection="3d")
                if ghost is not None:
                    for a, b_ in skeleton.bones:
                        seg = ghost[[a, b_]]
                        ax.plot(seg[:, 0], seg[:, 1], seg[:, 2], color="0.8", lw=1.5)
                for (a, b_), col in zip(skeleton.bones, colours, strict=True):
                    seg = pose[[a, b_]]
                    ax.plot(seg[:, 0], seg[:, 1], seg[:, 2], color=col, lw=2.2)
                ax.scatter(pose[:, 0], pose[:, 1], pose[:, 2], s=5, color="k", depthshade=False)
                ax.view_init(elev=elev, azim=azim)
                for i, setter in enumerate((ax.set_xlim, ax.set_ylim, ax.set_zlim)):
                    c = float(centre[i])
                    setter(c - half, c + half)
                ax.set_box_aspect((1, 1, 1))
                ax.set_xticklabels([])
                ax.set_yticklabels([])
                ax.set_zticklabels([])
                ax.set_xlabel("x", labelpad=-12, fontsize=7)
                ax.set_ylabel("depth", labelpad=-12, fontsize=7)
                ax.set_zlabel("up", labelpad=-12, fontsize=7)
                cap = f"{vname}: {name}"
                if r == 0 and labels is not None:
                    cap = f"{labels[f]}\n{cap}"
                ax.set_title(cap, fontsize=8)
    if title:
        fig.suptitle(title + "   (left limbs blue, right limbs red)", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
