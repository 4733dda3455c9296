"""The multi-view check of BlazePose's video mode on the real two-person recording.

Runs ``tensorpose predict RECORDING --model blazepose --max-people 2`` and ``tensorpose
triangulate OUT/openpose --calib CALIB --people auto``, then prints per camera the people found
per frame (from the 2D tracks), per person the person-camera-frames associated (a camera's
detection joined that person), the frames triangulated (seen by two cameras or more) and each
camera's median reprojection error in the frames it sees the person, and writes pictures of
frames 0, 50 and 99 of cam01 and cam03 with the tracked skeletons (one colour per track id)::

    python scripts/two_people_check.py --out /tmp/two_people_check

reads ``/work/shared/data/videos/two_people`` by default (``--recording``; the same videos are
bundled as ``examples/two_people``), writes ``OUT/check.json`` and ``OUT/pictures/*.jpg``. The
balancing trial (one participant, a bystander in two cameras)::

    python scripts/two_people_check.py --out /tmp/trial_check \
        --recording /work/shared/data/tracks/openpose_body25b/videos \
        --calib /work/shared/data/tracks/openpose_body25b/Calib.qca.txt --cameras cam01 cam02

``--skip-predict`` reuses ``OUT/pred``. Must hold (issue 31): two people, each triangulated in
at least 95 of the 100 frames, at least 720 of the 800 person-camera-frames associated, every
camera's median reprojection error under 10 px for each person.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RECORDING = Path("/work/shared/data/videos/two_people")
COLOURS = [(0, 200, 255), (255, 80, 80), (80, 255, 80), (255, 0, 255)]  # BGR per track id


def _tensorpose(*args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", "tensorpose", *args], check=True, env=env)


def _tracks(folder: Path) -> list[list[tuple[int, np.ndarray]]]:
    """Per frame of one camera's OpenPose folder: ``(person_id, keypoints (33, 3))``."""
    out = []
    for f in sorted(folder.glob("*_keypoints.json")):
        people = json.loads(f.read_text())["people"]
        ids = [int(np.ravel(p.get("person_id", [-1]))[0]) for p in people]
        kps = [np.asarray(p["pose_keypoints_2d"], float).reshape(-1, 3) for p in people]
        out.append(list(zip(ids, kps, strict=True)))
    return out


def _links() -> list[tuple[int, int]]:
    sys.path.insert(0, str(ROOT))
    from tensorpose.layouts import COCO17_INDEX, COCO_LINKS

    idx = COCO17_INDEX["BLAZEPOSE_33"]
    return [(idx[a], idx[b]) for a, b in COCO_LINKS]


def pictures(recording: Path, pred: Path, out: Path, cams=("cam01", "cam03"),
             frames=(0, 50, 99)) -> list[Path]:  # fmt: skip
    """The tracked skeletons drawn on the chosen frames (track id written at the hips)."""
    out.mkdir(parents=True, exist_ok=True)
    links, written = _links(), []
    for cam in cams:
        tracks = _tracks(pred / "openpose" / cam)
        cap = cv2.VideoCapture(str(recording / f"{cam}.mp4"))
        for i in range(max(frames) + 1):
            ok, img = cap.read()
            if not ok or i not in frames:
                continue
            for pid, kp in tracks[i]:
                c = COLOURS[pid % len(COLOURS)]
                for a, b in links:
                    if kp[a, 2] > 0 and kp[b, 2] > 0:
                        cv2.line(img, tuple(map(int, kp[a, :2])), tuple(map(int, kp[b, :2])), c, 3)
                hip = kp[[23, 24], :2].mean(0)
                cv2.putText(img, f"track {pid}", tuple(map(int, hip)), cv2.FONT_HERSHEY_SIMPLEX,
                            1.2, c, 3)  # fmt: skip
            cv2.putText(img, f"{cam} frame {i}", (20, 50), cv2.FONT_HERSHEY_SIMPLEX, 1.5,
                        (255, 255, 255), 3)  # fmt: skip
            path = out / f"{cam}_{i:03d}.jpg"
            cv2.imwrite(str(path), cv2.resize(img, None, fx=0.5, fy=0.5))
            written.append(path)
    return written


def check(pred: Path, tri: Path) -> dict:
    """The figures of the check from the predict and triangulate outputs."""
    cams = sorted(p.name for p in (pred / "openpose").iterdir() if p.is_dir())
    found = {}
    for cam in cams:
        counts = np.array([len(f) for f in _tracks(pred / "openpose" / cam)])
        per = {f"{k} people": int((counts == k).sum()) for k in range(counts.max(initial=0) + 1)}
        found[cam] = {"frames": len(counts), **per}
    people = []
    for npz in sorted(tri.glob("*_p*_3d.npz")):
        d = np.load(npz)
        person, err, names = d["person"], d["errors"], [str(c) for c in d["folders"]]
        seen = person >= 0  # (T, C) a camera's detection joined this person
        row = {"person": npz.stem.split("_")[-2], "frames_triangulated":
               int((seen.sum(1) >= 2).sum()), "person_camera_frames": int(seen.sum()),
               "per_camera": {}}  # fmt: skip
        for c, cam in enumerate(names):
            e = err[..., c][seen[:, c]]
            med = float(np.nanmedian(e)) if np.isfinite(e).any() else None
            row["per_camera"][cam] = {"frames": int(seen[:, c].sum()), "median_reprojection_px":
                                      None if med is None else round(med, 2)}  # fmt: skip
        people.append(row)
    total = sum(p["person_camera_frames"] for p in people)
    worst = max((v["median_reprojection_px"] or 0 for p in people
                 for v in p["per_camera"].values()), default=None)  # fmt: skip
    must = {
        "two people": len(people) == 2,
        "each triangulated in >= 95 frames": all(p["frames_triangulated"] >= 95 for p in people),
        f"person-camera-frames >= 720 (got {total})": total >= 720,
        f"every camera's median reprojection < 10 px (worst {worst})": worst is not None
        and worst < 10,
    }
    return {"found_per_camera": found, "people": people, "person_camera_frames": total,
            "must_hold": must}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--recording", type=Path, default=RECORDING)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--calib", type=Path, default=None, help="default RECORDING/Calib.qca.txt")
    p.add_argument("--cameras", nargs="+", default=["cam01", "cam03"], help="pictured cameras")
    p.add_argument("--max-people", default="2")
    p.add_argument("--skip-predict", action="store_true")
    a = p.parse_args(argv)
    pred, tri = a.out / "pred", a.out / "tri"
    if not a.skip_predict:
        _tensorpose("predict", str(a.recording), "--model", "blazepose", "--max-people",
                    a.max_people, "--out", str(pred), "--overwrite")  # fmt: skip
    calib = a.calib or a.recording / "Calib.qca.txt"
    _tensorpose("triangulate", str(pred / "openpose"), "--calib", str(calib), "--people", "auto",
                "--out", str(tri), "--overwrite")  # fmt: skip
    report = {**check(pred, tri), "load_average": os.getloadavg()}
    drawn = pictures(a.recording, pred, a.out / "pictures", a.cameras)
    report["pictures"] = [str(x) for x in drawn]
    (a.out / "check.json").write_text(json.dumps(report, indent=1) + "\n")
    for cam, f in report["found_per_camera"].items():
        print(f"{cam}: people found per frame: {f}")
    for r in report["people"]:
        print(f"{r['person']}: triangulated in {r['frames_triangulated']} frames, "
              f"{r['person_camera_frames']} person-camera-frames; per camera "
              + ", ".join(f"{c} {v['frames']} frames {v['median_reprojection_px']} px"
                          for c, v in r["per_camera"].items()))  # fmt: skip
    for k, ok in report["must_hold"].items():
        print(f"{'MET ' if ok else 'NOT MET'} {k}")
    print(f"-> {a.out / 'check.json'}, {len(report['pictures'])} pictures")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
