"""COCO person keypoints: read and validate annotation JSON, write results JSON.

Reading keeps going past bad records: each one is skipped (or, for a labelled keypoint outside
its image, repaired) and reported in :attr:`CocoKeypoints.problems` with its id, and a warning
summarises them; ``strict=True`` raises on the first instead. What counts as bad:

- an image without ``id``/``file_name`` or with a non-positive ``width``/``height``;
- an annotation without ``id``, ``image_id``, ``bbox`` or ``keypoints``; an ``image_id`` that is
  not in ``images``; a ``bbox`` that is not four finite numbers with ``w > 0`` and ``h > 0``
  (zero area); ``keypoints`` whose length is not ``3 K``, that are not finite, or with a
  visibility outside {0, 1, 2};
- repaired and reported: a labelled keypoint (``v > 0``) outside the image (``x`` or ``y`` below
  0 or beyond the size) becomes unlabelled (``v = 0``); a ``num_keypoints`` that disagrees with
  the count of labelled keypoints is replaced by the count.

Crowd annotations (``iscrowd=1``) and people with fewer than ``min_keypoints`` labelled
keypoints are skipped without being problems (counted in :attr:`CocoKeypoints.skipped`), as
the usual top-down pipelines do; both are configurable.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = [
    "CocoError",
    "CocoKeypoints",
    "PersonRecord",
    "Problem",
    "bundled_coco",
    "coco_results",
    "load_coco_keypoints",
    "write_coco_results",
]


class CocoError(ValueError):
    """A COCO file could not be used; the message names the file and the field or record."""


@dataclass(frozen=True)
class Problem:
    """One bad record: ``kind`` is ``"image"`` or ``"annotation"``, ``id`` its COCO id."""

    kind: str
    id: object
    reason: str

    def __str__(self) -> str:
        return f"{self.kind} id={self.id}: {self.reason}"


@dataclass
class PersonRecord:
    """One annotated person.

    Attributes:
        ann_id, image_id: COCO ids.
        file: the image file.
        width, height: image size from the JSON.
        bbox: ``(4,)`` float64 ``x, y, w, h``.
        keypoints: ``(K, 2)`` float64 pixels.
        visibility: ``(K,)`` int64 in {0, 1, 2} (0 unlabelled, 1 labelled but occluded,
            2 visible).
        area: segment area (for OKS); the box area when the JSON has none.
        iscrowd: crowd flag.
    """

    ann_id: int
    image_id: int
    file: Path
    width: int
    height: int
    bbox: np.ndarray
    keypoints: np.ndarray
    visibility: np.ndarray
    area: float
    iscrowd: bool = False

    @property
    def num_keypoints(self) -> int:
        return int((self.visibility > 0).sum())


@dataclass
class CocoKeypoints:
    """A loaded COCO person-keypoint file.

    Attributes:
        path: the JSON file.
        records: the people kept, in annotation order.
        images: ``image_id -> {"file": Path, "width": int, "height": int}`` for valid images.
        keypoint_names: the category's keypoint names (``K`` of them).
        links: skeleton links as 0-based ``(a, b)`` pairs (the JSON's are 1-based).
        problems: bad records, each with its id and reason.
        skipped: counts of records skipped on purpose (``"crowd"``, ``"few_keypoints"``,
            ``"other_category"``).
    """

    path: Path
    records: list[PersonRecord]
    images: dict[int, dict]
    keypoint_names: list[str]
    links: list[tuple[int, int]]
    problems: list[Problem] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.records)

    def arrays(self) -> dict[str, np.ndarray]:
        """The records stacked: ``bbox (N, 4)``, ``keypoints (N, K, 2)``, ``visibility (N, K)``,
        ``area (N,)``, ``ann_id (N,)``, ``image_id (N,)``."""
        K = len(self.keypoint_names)
        r = self.records
        return {
            "bbox": np.array([p.bbox for p in r], np.float64).reshape(-1, 4),
            "keypoints": np.array([p.keypoints for p in r], np.float64).reshape(-1, K, 2),
            "visibility": np.array([p.visibility for p in r], np.int64).reshape(-1, K),
            "area": np.array([p.area for p in r], np.float64),
            "ann_id": np.array([p.ann_id for p in r], np.int64),
            "image_id": np.array([p.image_id for p in r], np.int64),
        }


def bundled_coco() -> Path:
    """The COCO subset shipped with the package: 16 images, 43 people with keypoints (see
    ``tensorpose/assets/ATTRIBUTION.md``)."""
    return Path(__file__).resolve().parent.parent / "assets" / "coco" / "person_keypoints.json"


def _finite_numbers(x: object, n: int | None = None) -> bool:
    if not isinstance(x, (list, tuple)) or (n is not None and len(x) != n):
        return False
    return all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in x
    )


def load_coco_keypoints(
    path: str | Path,
    image_root: str | Path | None = None,
    *,
    num_keypoints: int | None = 17,
    category_id: int | None = 1,
    skip_crowd: bool = True,
    min_keypoints: int = 1,
    strict: bool = False,
    warn: bool = True,
) -> CocoKeypoints:
    """Read a COCO person-keypoint annotation file.

    Args:
        path: the JSON file.
        image_root: folder of the images; default ``<json folder>/images`` when it exists,
            else the JSON's folder.
        num_keypoints: expected ``K`` (the category's keypoint count must match); ``None``
            takes it from the category.
        category_id: the person category; ``None`` takes the first category with keypoints.
        skip_crowd: skip ``iscrowd=1`` annotations.
        min_keypoints: skip people with fewer labelled keypoints (0 keeps everyone, e.g. for
            CenterNet centres).
        strict: raise :class:`CocoError` on the first bad record instead of reporting it.
        warn: emit one warning that summarises the bad records.

    Returns:
        :class:`CocoKeypoints`.

    Raises:
        FileNotFoundError: no such file.
        CocoError: not JSON, no ``images``/``annotations`` lists, no keypoint category, a ``K``
            that differs from ``num_keypoints``; with ``strict``, any bad record.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such COCO annotation file")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise CocoError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    if not isinstance(data, dict):
        raise CocoError(f"{path}: expected a JSON object with 'images' and 'annotations'")
    for key in ("images", "annotations"):
        if not isinstance(data.get(key), list):
            raise CocoError(f"{path}: field '{key}' must be a list")
    if image_root is None:
        image_root = path.parent / "images" if (path.parent / "images").is_dir() else path.parent
    image_root = Path(image_root)

    cats = [c for c in data.get("categories", []) if isinstance(c, dict) and c.get("keypoints")]
    if category_id is not None:
        cats = [c for c in cats if c.get("id") == category_id]
    if not cats:
        raise CocoError(f"{path}: field 'categories' has no keypoint category (id={category_id})")
    cat = cats[0]
    names = [str(n) for n in cat["keypoints"]]
    K = len(names)
    if num_keypoints is not None and num_keypoints != K:
        raise CocoError(
            f"{path}: category {cat.get('id')} has K={K} keypoints, expected {num_keypoints}"
        )
    links = []
    for link in cat.get("skeleton", []) or []:
        if _finite_numbers(link, 2) and all(1 <= v <= K for v in link):
            links.append((int(link[0]) - 1, int(link[1]) - 1))

    problems: list[Problem] = []

    def report(kind: str, rid: object, reason: str) -> None:
        p = Problem(kind, rid, reason)
        if strict:
            raise CocoError(f"{path}: {p}")
        problems.append(p)

    images: dict[int, dict] = {}
    for im in data["images"]:
        iid = im.get("id") if isinstance(im, dict) else None
        if iid is None or not isinstance(im.get("file_name"), str):
            report("image", iid, "needs 'id' and 'file_name'")
            continue
        w, h = im.get("width"), im.get("height")
        if not _finite_numbers([w, h]) or w <= 0 or h <= 0:
            report("image", iid, f"width/height must be positive numbers, got {w!r}/{h!r}")
            continue
        images[iid] = {"file": image_root / im["file_name"], "width": int(w), "height": int(h)}

    records: list[PersonRecord] = []
    skipped = {"crowd": 0, "few_keypoints": 0, "other_category": 0}
    for ann in data["annotations"]:
        aid = ann.get("id") if isinstance(ann, dict) else None
        if aid is None:
            report("annotation", None, "has no 'id'")
            continue
        if ann.get("category_id", cat.get("id")) != cat.get("id"):
            skipped["other_category"] += 1
            continue
        if skip_crowd and ann.get("iscrowd", 0):
            skipped["crowd"] += 1
            continue
        iid = ann.get("image_id")
        if iid not in images:
            report("annotation", aid, f"image_id {iid!r} is not a valid image")
            continue
        bbox = ann.get("bbox")
        if not _finite_numbers(bbox, 4):
            report("annotation", aid, f"bbox must be 4 finite numbers, got {bbox!r}")
            continue
        if not (bbox[2] > 0 and bbox[3] > 0):
            report("annotation", aid, f"bbox {bbox} has zero area (w and h must be > 0)")
            continue
        kps = ann.get("keypoints")
        if not isinstance(kps, list) or len(kps) != 3 * K:
            n = len(kps) if isinstance(kps, list) else type(kps).__name__
            report("annotation", aid, f"keypoints must have 3*K = {3 * K} values, got {n}")
            continue
        if not _finite_numbers(kps):
            report("annotation", aid, "keypoints must be finite numbers")
            continue
        arr = np.asarray(kps, np.float64).reshape(K, 3)
        vis = arr[:, 2]
        bad_v = ~np.isin(vis, (0, 1, 2))
        if bad_v.any():
            j = int(np.flatnonzero(bad_v)[0])
            report(
                "annotation",
                aid,
                f"keypoint {j} ({names[j]}) has visibility {vis[j]:g}, expected 0, 1 or 2",
            )
            continue
        vis = vis.astype(np.int64)
        labelled = int((vis > 0).sum())
        stated = ann.get("num_keypoints", labelled)
        if stated != labelled:
            report("annotation", aid, f"num_keypoints is {stated!r} but {labelled} are labelled")
        xy = arr[:, :2].copy()
        W, H = images[iid]["width"], images[iid]["height"]
        outside = (vis > 0) & ((xy[:, 0] < 0) | (xy[:, 1] < 0) | (xy[:, 0] > W) | (xy[:, 1] > H))
        if outside.any():
            j = int(np.flatnonzero(outside)[0])
            report(
                "annotation",
                aid,
                f"{int(outside.sum())} labelled keypoint(s) outside the {W}x{H} image (first: "
                f"{names[j]} at {xy[j, 0]:g}, {xy[j, 1]:g}); marked unlabelled",
            )
            vis = np.where(outside, 0, vis)
        if int((vis > 0).sum()) < min_keypoints:
            skipped["few_keypoints"] += 1
            continue
        xy[vis == 0] = 0.0
        area = ann.get("area")
        area = float(area) if _finite_numbers([area]) and area > 0 else float(bbox[2] * bbox[3])
        records.append(
            PersonRecord(
                ann_id=int(aid),
                image_id=int(iid),
                file=images[iid]["file"],
                width=W,
                height=H,
                bbox=np.asarray(bbox, np.float64),
                keypoints=xy,
                visibility=vis,
                area=area,
                iscrowd=bool(ann.get("iscrowd", 0)),
            )
        )
    if problems and warn:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        warnings.warn(
            f"{path}: {len(problems)} bad record(s) skipped or repaired: {problems[0]}{more}; "
            "see CocoKeypoints.problems",
            stacklevel=2,
        )
    return CocoKeypoints(path, records, images, names, links, problems, skipped)


def coco_results(
    image_ids: Sequence[int] | np.ndarray,
    keypoints,
    keypoint_scores=None,
    scores=None,
    category_id: int = 1,
) -> list[dict]:
    """Predictions as COCO keypoint results (the list that ``COCO.loadRes`` takes).

    Args:
        image_ids: ``(N,)``.
        keypoints: ``(N, K, 2)`` image pixels (tensor or array).
        keypoint_scores: ``(N, K)`` per-keypoint confidences; default 1.
        scores: ``(N,)`` person scores; default the mean keypoint score.
        category_id: the person category.
    """
    kp = _numpy(keypoints).astype(np.float64)
    if kp.ndim != 3 or kp.shape[-1] != 2:
        raise ValueError(f"keypoints must have shape (N, K, 2), got {kp.shape}")
    N, K = kp.shape[:2]
    ids = _numpy(image_ids).reshape(-1)
    if len(ids) != N:
        raise ValueError(f"image_ids has {len(ids)} entries, keypoints has N={N}")
    ks = np.ones((N, K)) if keypoint_scores is None else _numpy(keypoint_scores).astype(float)
    if ks.shape != (N, K):
        raise ValueError(f"keypoint_scores must have shape ({N}, {K}), got {ks.shape}")
    sc = ks.mean(1) if scores is None else _numpy(scores).astype(float).reshape(-1)
    flat = np.concatenate([kp, ks[..., None]], -1).reshape(N, 3 * K)
    return [
        {
            "image_id": int(ids[i]),
            "category_id": int(category_id),
            "keypoints": [round(float(v), 3) for v in flat[i]],
            "score": float(sc[i]),
        }
        for i in range(N)
    ]


def write_coco_results(path: str | Path, *args, **kwargs) -> Path:
    """Write :func:`coco_results` (same arguments after ``path``) as JSON; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(coco_results(*args, **kwargs)))
    return path


def _numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)
