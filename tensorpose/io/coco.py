"""COCO person keypoints: read and validate annotation JSON, write results JSON.

File-level faults raise :class:`CocoError` (a ``ValueError``) naming the file and the field or
line: a folder instead of a file, text that is not JSON, no ``images``/``annotations`` lists, a
``categories`` that is not a list, no keypoint category, its ``keypoints`` not a list of names,
its ``skeleton`` not a list of 1-based ``[a, b]`` keypoint pairs, its ``id`` not an integer.

Reading keeps going past bad records: each one is skipped (or, for a labelled keypoint outside
its image, repaired) and reported in :attr:`CocoKeypoints.problems` with its id, and a warning
summarises them; ``strict=True`` raises on the first instead. What counts as bad:

- an image without ``id``/``file_name``, an ``id`` that is not an integer (``3.0`` counts as 3;
  ``3.5``, ``"3"`` or ``[3]`` do not), an ``id`` that several images share (all of them are
  skipped: their people could belong to either file), or a ``width``/``height`` that is not a
  positive integer;
- an annotation without an integer ``id``, an ``id`` that several annotations share (all are
  skipped), a ``category_id`` that is not an integer, an ``iscrowd`` other than 0/1, an
  ``image_id`` that is not a valid image; a ``bbox`` that is not four finite numbers with
  ``w > 0`` and ``h > 0`` (zero area); ``keypoints`` whose length is not ``3 K``, that are not
  finite, or with a visibility outside {0, 1, 2};
- repaired and reported: a labelled keypoint (``v > 0``) outside the image (``x`` or ``y`` below
  0 or beyond the size) becomes unlabelled (``v = 0``); a ``num_keypoints`` that disagrees with
  the count of labelled keypoints is replaced by the count.

Crowd annotations (``iscrowd=1``) and people with fewer than ``min_keypoints`` labelled
keypoints are skipped without being problems (counted in :attr:`CocoKeypoints.skipped`), as
the usual top-down pipelines do; both are configurable.

Images are looked up in the ``images`` folder given to :func:`load_coco_keypoints`, else next
to the JSON or in COCO's own layout (:func:`image_folder`); :func:`missing_images` lists the
image files that are not there.
"""

from __future__ import annotations

import json
import math
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError, MissingFileError
from .files import read_bytes, read_text

__all__ = [
    "CocoError",
    "CocoKeypoints",
    "PersonRecord",
    "Problem",
    "bundled_coco",
    "coco_results",
    "image_folder",
    "load_coco_keypoints",
    "load_detections",
    "missing_images",
    "read_coco_json",
    "write_coco_results",
]

MAX_JSON_BYTES = 1 << 30
"""Largest COCO annotation, results or detections file read (1 GiB)."""


class CocoError(InputError):
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
        image_root: the folder the image files are looked up in (see :func:`image_folder`).
    """

    path: Path
    records: list[PersonRecord]
    images: dict[int, dict]
    keypoint_names: list[str]
    links: list[tuple[int, int]]
    problems: list[Problem] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    image_root: Path | None = None

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
    return all(_finite(v) for v in x)


def _finite(v: object) -> bool:
    """A JSON number (not a bool) that is finite as a float."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an integer beyond float range
        return False


def _as_id(v: object) -> int | None:
    """A COCO id as an int: an integer, or a float with an integral value; else ``None``."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        return int(v)
    return None


def _shown(v: object, limit: int = 40) -> str:
    """``repr(v)`` shortened for messages."""
    s = repr(v)
    return s if len(s) <= limit else s[:limit] + "..."


# ---------------------------------------------------------------------- parse
def read_coco_json(path: str | Path) -> dict:
    """The annotation file as a dict with ``images`` and ``annotations`` lists.

    Raises:
        FileNotFoundError: no such file.
        CocoError: a folder, not UTF-8/16/32 text, not JSON (the message has the line), nested
            too deeply, or not an object with those two lists.
    """
    path = Path(path)
    if path.is_dir():
        raise CocoError(f"{path}: is a folder, expected a COCO annotation JSON file")
    data = read_bytes(path, MAX_JSON_BYTES, "COCO annotation file")
    try:
        data = json.loads(data)
    except json.JSONDecodeError as e:
        raise CocoError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    except UnicodeDecodeError as e:
        raise CocoError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except ValueError as e:  # e.g. an integer with more digits than Python converts
        raise CocoError(f"{path}: not valid JSON ({e})") from None
    except RecursionError:
        raise CocoError(f"{path}: not valid JSON (nested too deeply)") from None
    if not isinstance(data, dict):
        raise CocoError(f"{path}: expected a JSON object with 'images' and 'annotations'")
    for key in ("images", "annotations"):
        if not isinstance(data.get(key), list):
            raise CocoError(f"{path}: field '{key}' must be a list, got {_shown(data.get(key))}")
    return data


def image_folder(path: str | Path, images: str | Path | None = None) -> Path:
    """Where the images of annotation file ``path`` are.

    ``images`` when given (it must be a folder). Otherwise the first folder that exists of:
    ``<json folder>/images``; for COCO's own layout (``annotations/person_keypoints_val2017.json``
    beside ``val2017/``), the split named by the file name's last ``_`` part in the JSON
    folder's parent, ``<parent>/val2017`` or ``<parent>/images/val2017``; else the JSON's folder.

    Raises:
        FileNotFoundError: ``images`` is given and is not a folder.
    """
    if images is not None:
        images = Path(images)
        if not images.is_dir():
            raise MissingFileError(f"images folder not found: {images}")
        return images
    here = Path(path).parent
    split = Path(path).stem.rpartition("_")[2]
    candidates = [here / "images"]
    if split and split != Path(path).stem:
        candidates += [here.parent / split, here.parent / "images" / split]
    return next((c for c in candidates if c.is_dir()), here)


# ---------------------------------------------------------------------- validate
def _keypoint_category(
    path: Path, data: dict, category_id: int | None, num_keypoints: int | None
) -> tuple[dict, list[str], list[tuple[int, int]]]:
    """The person category: ``(category, keypoint names, 0-based links)``; file-level errors."""
    cats = data.get("categories", [])
    if not isinstance(cats, list):
        raise CocoError(f"{path}: field 'categories' must be a list, got {_shown(cats)}")
    found = [
        (i, c)
        for i, c in enumerate(cats)
        if isinstance(c, dict)
        and c.get("keypoints")
        and (category_id is None or _as_id(c.get("id")) == category_id)
    ]
    if not found:
        raise CocoError(f"{path}: field 'categories' has no keypoint category (id={category_id})")
    if category_id is not None and len(found) > 1:
        raise CocoError(f"{path}: {len(found)} categories have id {category_id}")
    i, cat = found[0]
    if _as_id(cat.get("id")) is None:
        raise CocoError(
            f"{path}: categories[{i}].id must be an integer, got {_shown(cat.get('id'))}"
        )
    names = cat["keypoints"]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise CocoError(f"{path}: categories[{i}].keypoints must be a list of names")
    K = len(names)
    if num_keypoints is not None and num_keypoints != K:
        raise CocoError(
            f"{path}: category {cat.get('id')} has K={K} keypoints, expected {num_keypoints}"
        )
    skeleton = cat.get("skeleton")
    skeleton = [] if skeleton is None else skeleton
    if not isinstance(skeleton, list):
        raise CocoError(f"{path}: categories[{i}].skeleton must be a list of [a, b] pairs")
    links = []
    for j, link in enumerate(skeleton):
        ab = [_as_id(v) for v in link] if isinstance(link, list) and len(link) == 2 else [None]
        if not all(v is not None and 1 <= v <= K for v in ab):
            raise CocoError(
                f"{path}: categories[{i}].skeleton[{j}] must be two keypoint numbers in 1..{K}, "
                f"got {_shown(link)}"
            )
        links.append((ab[0] - 1, ab[1] - 1))
    return cat, list(names), links


@dataclass
class _Context:
    """What checking and building an annotation's record needs."""

    images: dict[int, dict]
    repeated_images: set[int]
    repeated: set[int]
    category_id: int | None
    names: list[str]
    skip_crowd: bool
    min_keypoints: int
    skipped: dict[str, int] = field(
        default_factory=lambda: {"crowd": 0, "few_keypoints": 0, "other_category": 0}
    )

    @property
    def K(self) -> int:
        return len(self.names)


class _Reporter:
    """Collects bad records (or raises on the first, with ``strict``)."""

    def __init__(self, path: Path, strict: bool) -> None:
        self.path, self.strict = path, strict
        self.problems: list[Problem] = []

    def __call__(self, kind: str, rid: object, reason: str) -> None:
        p = Problem(kind, rid, reason)
        if self.strict:
            raise CocoError(f"{self.path}: {p}")
        self.problems.append(p)


def _repeated(entries: list, key: str) -> set[int]:
    """The integer ids that more than one entry of ``entries`` has under ``key``."""
    ids = [_as_id(e.get(key)) if isinstance(e, dict) else None for e in entries]
    counts = Counter(i for i in ids if i is not None)
    return {i for i, n in counts.items() if n > 1}


def _valid_images(entries: list, root: Path, report: _Reporter) -> dict[int, dict]:
    """``image_id -> {"file", "width", "height"}`` of the images that pass; others reported."""
    repeated = _repeated(entries, "id")
    images: dict[int, dict] = {}
    for im in entries:  # one check per record
        raw = im.get("id") if isinstance(im, dict) else None
        iid = _as_id(raw)
        name = im.get("file_name") if isinstance(im, dict) else None
        if raw is None or not isinstance(name, str) or not name:
            report("image", _shown(raw) if raw is not None else None, "needs 'id' and 'file_name'")
            continue
        if iid is None:
            report("image", _shown(raw), "id must be an integer")
            continue
        if iid in repeated:
            report("image", iid, f"id {iid} is used by more than one image; all are skipped")
            continue
        w, h = im.get("width"), im.get("height")
        w_i, h_i = _as_id(w), _as_id(h)
        if w_i is None or h_i is None or w_i <= 0 or h_i <= 0:
            report(
                "image", iid, f"width/height must be positive integers, got {_shown(w)}/{_shown(h)}"
            )
            continue
        images[iid] = {"file": root / name, "width": w_i, "height": h_i}
    return images


def _checked_keypoints(ann: dict, aid: int, K: int, names: list[str], report: _Reporter):
    """``(K, 3)`` float64 keypoints with visibility in {0, 1, 2}, or ``None`` (reported)."""
    kps = ann.get("keypoints")
    if not isinstance(kps, list) or len(kps) != 3 * K:
        n = len(kps) if isinstance(kps, list) else type(kps).__name__
        report("annotation", aid, f"keypoints must have 3*K = {3 * K} values, got {n}")
        return None
    if not _finite_numbers(kps):
        report("annotation", aid, "keypoints must be finite numbers")
        return None
    arr = np.asarray(kps, np.float64).reshape(K, 3)
    bad_v = ~np.isin(arr[:, 2], (0, 1, 2))
    if bad_v.any():
        j = int(np.flatnonzero(bad_v)[0])
        report(
            "annotation",
            aid,
            f"keypoint {j} ({names[j]}) has visibility {arr[j, 2]:g}, expected 0, 1 or 2",
        )
        return None
    return arr


def _checked_annotation(ann: object, ctx: _Context, report: _Reporter) -> tuple | None:
    """``(aid, iid, bbox, keypoints (K, 3))`` for a person annotation that passes; ``None`` for
    one that is skipped (counted in ``ctx.skipped``) or bad (reported)."""
    raw = ann.get("id") if isinstance(ann, dict) else None
    aid = _as_id(raw)
    if raw is None or aid is None:
        report(
            "annotation",
            None if raw is None else _shown(raw),
            "has no 'id'" if raw is None else "id must be an integer",
        )
        return None
    if aid in ctx.repeated:
        report("annotation", aid, f"id {aid} is used by more than one annotation; all are skipped")
        return None
    cat = ann.get("category_id", ctx.category_id)
    if _as_id(cat) is None:
        report("annotation", aid, f"category_id must be an integer, got {_shown(cat)}")
        return None
    if _as_id(cat) != ctx.category_id:
        ctx.skipped["other_category"] += 1
        return None
    crowd = ann.get("iscrowd", 0)
    if crowd not in (0, 1):  # (False and True compare equal to these)
        report("annotation", aid, f"iscrowd must be 0 or 1, got {_shown(crowd)}")
        return None
    if ctx.skip_crowd and crowd:
        ctx.skipped["crowd"] += 1
        return None
    raw_iid = ann.get("image_id")
    iid = _as_id(raw_iid)
    if iid not in ctx.images:
        why = " (its id is used by more than one image)" if iid in ctx.repeated_images else ""
        report("annotation", aid, f"image_id {_shown(raw_iid)} is not a valid image{why}")
        return None
    bbox = ann.get("bbox")
    if not _finite_numbers(bbox, 4):
        report("annotation", aid, f"bbox must be 4 finite numbers, got {_shown(bbox, 80)}")
        return None
    if not (bbox[2] > 0 and bbox[3] > 0):
        report("annotation", aid, f"bbox {bbox} has zero area (w and h must be > 0)")
        return None
    arr = _checked_keypoints(ann, aid, ctx.K, ctx.names, report)
    return None if arr is None else (aid, iid, bbox, arr)


# ---------------------------------------------------------------------- build
def _person_record(
    ann: dict, checked: tuple, ctx: _Context, report: _Reporter
) -> PersonRecord | None:
    """The record of a checked annotation (keypoints outside the image repaired and reported,
    ``num_keypoints`` recounted); ``None`` when too few keypoints are labelled."""
    aid, iid, bbox, arr = checked
    names = ctx.names
    vis = arr[:, 2].astype(np.int64)
    labelled = int((vis > 0).sum())
    stated = ann.get("num_keypoints", labelled)
    if stated != labelled:
        report("annotation", aid, f"num_keypoints is {_shown(stated)} but {labelled} are labelled")
    xy = arr[:, :2].copy()
    image = ctx.images[iid]
    W, H = image["width"], image["height"]
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
    if int((vis > 0).sum()) < ctx.min_keypoints:
        ctx.skipped["few_keypoints"] += 1
        return None
    xy[vis == 0] = 0.0
    area = ann.get("area")
    box_area = float(bbox[2]) * float(bbox[3])
    area = float(area) if _finite(area) and area > 0 else box_area
    return PersonRecord(
        ann_id=aid,
        image_id=iid,
        file=image["file"],
        width=W,
        height=H,
        bbox=np.asarray(bbox, np.float64),
        keypoints=xy,
        visibility=vis,
        area=area,
        iscrowd=bool(ann.get("iscrowd", 0)),
    )


def load_coco_keypoints(
    path: str | Path,
    images: str | Path | None = None,
    *,
    num_keypoints: int | None = 17,
    category_id: int | None = 1,
    skip_crowd: bool = True,
    min_keypoints: int = 1,
    strict: bool = False,
    warn: bool = True,
    image_root: str | Path | None = None,
) -> CocoKeypoints:
    """Read a COCO person-keypoint annotation file.

    Args:
        path: the JSON file.
        images: folder of the images; default: see :func:`image_folder` (``<json
            folder>/images``, COCO's ``val2017/`` beside ``annotations/``, else the JSON's
            folder).
        num_keypoints: expected ``K`` (the category's keypoint count must match); ``None``
            takes it from the category.
        category_id: the person category; ``None`` takes the first category with keypoints.
        skip_crowd: skip ``iscrowd=1`` annotations.
        min_keypoints: skip people with fewer labelled keypoints (0 keeps everyone, e.g. for
            CenterNet centres).
        strict: raise :class:`CocoError` on the first bad record instead of reporting it.
        warn: emit one warning that summarises the bad records.
        image_root: the former name of ``images`` (still accepted).

    Returns:
        :class:`CocoKeypoints`.

    Raises:
        FileNotFoundError: no such file, or ``images`` is not a folder.
        CocoError: a folder, not JSON, no ``images``/``annotations`` lists, ``categories`` or
            the keypoint category malformed or missing, a ``K`` that differs from
            ``num_keypoints``; with ``strict``, any bad record.
    """
    if not isinstance(min_keypoints, int) or min_keypoints < 0:
        raise InputError(f"min_keypoints must be an integer >= 0, got {min_keypoints!r}")
    if image_root is not None:
        if images is not None and Path(images) != Path(image_root):
            raise TypeError("pass the image folder as images= or image_root=, not both")
        images = image_root
    path = Path(path)
    data = read_coco_json(path)
    root = image_folder(path, images)
    cat, names, links = _keypoint_category(path, data, category_id, num_keypoints)
    report = _Reporter(path, strict)
    valid_images = _valid_images(data["images"], root, report)
    ctx = _Context(
        images=valid_images,
        repeated_images=_repeated(data["images"], "id"),
        repeated=_repeated(data["annotations"], "id"),
        category_id=_as_id(cat.get("id")),
        names=names,
        skip_crowd=skip_crowd,
        min_keypoints=min_keypoints,
    )
    records = []
    for ann in data["annotations"]:  # one check per record
        checked = _checked_annotation(ann, ctx, report)
        record = None if checked is None else _person_record(ann, checked, ctx, report)
        if record is not None:
            records.append(record)
    problems = report.problems
    if problems and warn:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        warnings.warn(
            f"{path}: {len(problems)} bad record(s) skipped or repaired: {problems[0]}{more}; "
            "see CocoKeypoints.problems",
            stacklevel=2,
        )
    return CocoKeypoints(path, records, valid_images, names, links, problems, ctx.skipped, root)


def missing_images(coco: CocoKeypoints, people_only: bool = False) -> list[Path]:
    """The image files of ``coco`` that are not there (not a regular file), in image-id order.

    Args:
        coco: a loaded file.
        people_only: check only the images of the kept people (what training reads).
    """
    ids = sorted({r.image_id for r in coco.records} if people_only else coco.images)
    return [coco.images[i]["file"] for i in ids if not coco.images[i]["file"].is_file()]


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


def _num(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def load_detections(
    path: str | Path, category_id: int = 1
) -> tuple[dict[int, np.ndarray], dict[str, int]]:
    """Person boxes from a COCO detections JSON.

    Accepts the detection results list (``[{"image_id", "bbox": [x, y, w, h], "score",
    "category_id"}, ...]``; ``score`` defaults to 1, ``category_id`` to the person) or a COCO
    annotation file (``annotations`` with ``bbox``; crowds skipped; scores 1), whose ``images``
    list also maps file names to ids.

    Args:
        path: the JSON file.
        category_id: the person category; other categories are ignored.

    Returns:
        ``image_id -> (n, 5)`` float64 ``x, y, w, h, score``, and ``file name -> image_id``
        (empty for a results list).

    Raises:
        FileNotFoundError: no such file.
        ValueError: not JSON, not one of the two layouts, or an entry without a valid
            ``image_id``/``bbox``/``score`` (the message names the file and the entry).
    """
    path = Path(path)
    text = read_text(path, MAX_JSON_BYTES, "boxes file")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    except RecursionError:
        raise InputError(f"{path}: not valid JSON (nested too deeply)") from None
    names: dict[str, int] = {}
    if isinstance(data, dict):
        if not isinstance(data.get("annotations"), list):
            raise InputError(
                f"{path}: expected a list of detections or a COCO file with 'annotations'"
            )
        for im in data.get("images", []) or []:
            if isinstance(im, dict) and isinstance(im.get("file_name"), str) and "id" in im:
                names[Path(im["file_name"]).name] = int(im["id"])
        entries = [a for a in data["annotations"] if not (isinstance(a, dict) and a.get("iscrowd"))]
    elif isinstance(data, list):
        entries = data
    else:
        raise InputError(f"{path}: expected a list of detections or a COCO file with 'annotations'")
    dets: dict[int, list] = {}
    for i, d in enumerate(entries):
        if not isinstance(d, dict):
            raise InputError(f"{path}: entry {i} is not an object")
        if d.get("category_id", category_id) != category_id:
            continue
        iid, box, score = d.get("image_id"), d.get("bbox"), d.get("score", 1.0)
        if not isinstance(iid, int) or isinstance(iid, bool):
            raise InputError(f"{path}: entry {i} has no integer 'image_id' (got {iid!r})")
        if not (isinstance(box, list) and len(box) == 4 and all(_num(v) for v in box)):
            raise InputError(f"{path}: entry {i} 'bbox' must be 4 numbers x, y, w, h, got {box!r}")
        if not _num(score):
            raise InputError(f"{path}: entry {i} 'score' must be a number, got {score!r}")
        if box[2] > 0 and box[3] > 0:
            dets.setdefault(iid, []).append([*box, score])
    return {k: np.asarray(v, np.float64).reshape(-1, 5) for k, v in dets.items()}, names
