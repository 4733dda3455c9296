"""One-line summaries of data files (the ``bvh-info`` and ``coco-info`` commands)."""

from __future__ import annotations

from pathlib import Path

from .io.bvh import bundled_bvh, load_bvh
from .io.coco import bundled_coco, load_coco_keypoints

__all__ = ["bvh_info", "coco_info"]


def bvh_info(files: list[str | Path] | None = None, mapping: str | None = None) -> list[str]:
    """Per BVH file (default: the bundled CMU files): frames, frame rate, joints, end sites and
    the median height of the mapped skeleton (``mapping``: default detect)."""
    lines = []
    for p in files or bundled_bvh():  # a few files
        m = load_bvh(p)
        pos, sk = m.to_skeleton(mapping)
        height = (pos[:, sk.index("head"), 1] - pos[:, :, 1].min(1).values).median()
        lines.append(
            f"{p}: {m.num_frames} frames at {m.fps:.1f} fps, {len(m.joint_names)} joints, "
            f"{len(m.end_sites)} end sites; {sk.name} median height {height:.2f} m"
        )
    return lines


def coco_info(path: str | Path | None = None, min_keypoints: int = 1) -> list[str]:
    """A COCO keypoint file (default: the bundled subset): images, people kept, labelled
    keypoints, skipped annotations by reason, then one line per bad record."""
    path = path or bundled_coco()
    d = load_coco_keypoints(path, min_keypoints=min_keypoints, warn=False)
    vis = sum(r.num_keypoints for r in d.records)
    lines = [
        f"{path}: {len(d.images)} images, {len(d)} people kept ({vis} labelled keypoints, "
        f"K={len(d.keypoint_names)}); skipped: "
        + ", ".join(f"{k} {v}" for k, v in d.skipped.items())
    ]
    return lines + [f"  bad record: {p}" for p in d.problems]
