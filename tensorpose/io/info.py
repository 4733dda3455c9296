"""One-line summaries of data files (the ``bvh-info`` and ``coco-info`` commands)."""

from __future__ import annotations

from pathlib import Path

from .bvh import bundled_bvh, load_bvh
from .coco import bundled_coco, load_coco_keypoints, missing_images

__all__ = ["bvh_info", "coco_info"]


def bvh_info(
    files: list[str | Path] | None = None, mapping: str | None = None, units: str = ""
) -> list[str]:
    """Per BVH file (default: the bundled CMU files): frames, frame rate, joints, end sites and
    the median height of the mapped skeleton (``mapping``, ``units``: default detect)."""
    lines = []
    for p in files or bundled_bvh():  # a few files
        m = load_bvh(p)
        pos, sk = m.to_skeleton(mapping, units=units)
        height = (pos[:, sk.index("head"), 1] - pos[:, :, 1].min(1).values).median()
        lines.append(
            f"{p}: {m.num_frames} frames at {m.fps:.1f} fps, {len(m.joint_names)} joints, "
            f"{len(m.end_sites)} end sites; {sk.name} median height {height:.2f} m"
        )
    return lines


def coco_info(
    path: str | Path | None = None, min_keypoints: int = 1, images: str | Path | None = None
) -> list[str]:
    """A COCO keypoint file (default: the bundled subset): images, people kept, labelled
    keypoints, skipped annotations by reason, then one line per bad record, then the image
    folder and the image files missing from it (``images``: the folder; default: found next to
    the file, see :func:`tensorpose.io.coco.image_folder`)."""
    path = path or bundled_coco()
    d = load_coco_keypoints(path, images, min_keypoints=min_keypoints, warn=False)
    vis = sum(r.num_keypoints for r in d.records)
    lines = [
        f"{path}: {len(d.images)} images, {len(d)} people kept ({vis} labelled keypoints, "
        f"K={len(d.keypoint_names)}); skipped: "
        + ", ".join(f"{k} {v}" for k, v in d.skipped.items())
    ]
    lines += [f"  bad record: {p}" for p in d.problems]
    missing = missing_images(d)
    people = {d.images[r.image_id]["file"] for r in d.records}
    lines.append(
        f"images in {d.image_root}: {len(d.images) - len(missing)} found, {len(missing)} missing"
        f" ({sum(m in people for m in missing)} of them with kept people)"
    )
    return lines + [f"  missing image: {m}" for m in missing]
