"""Per-track storage (:class:`tensorpose.multiview.people.TrackStore`): the rows a track was
seen in, not frames x tracks; the second pass over budget gives the same people; the crowd
and dense-size refusals name their limits. On synthetic_two_people (tests/data, 40 frames)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tensorpose.errors import InputError
from tensorpose.multiview import people as P
from tensorpose.multiview.association import triangulate_everyone
from tensorpose.multiview.recording import pack_keypoints, read_cameras

TWO = Path(__file__).resolve().parents[1] / "data" / "synthetic_two_people"


@pytest.fixture(scope="module")
def cams():
    return read_cameras(TWO, TWO / "Calib.qca.txt")


def _naive(cams) -> list[dict[str, np.ndarray]]:
    """Every track's arrays over all frames: all frames at once, linked, copied slot by slot."""
    cal = cams.calibration
    r = triangulate_everyone(pack_keypoints(cams), cal.K, cal.dist, cal.R, cal.t,
                             min_confidence=0.3, max_error_px=15.0, association_px=20.0,
                             drop="leave_one_out").numpy().arrays()  # fmt: skip
    r["points"] = np.where(r["valid"][..., None], r["points"], np.nan)
    track = P.link_people(P.centres(r["points"], r["valid"]))
    out = []
    for k in range(track.max() + 1):  # every track
        arrays = {}
        for key in P.KEYS:  # every result array
            a = r[key]
            fill = {"b": False, "i": -1}.get(a.dtype.kind, np.nan)
            d = np.full(a.shape[1:], fill, a.dtype)
            for m, t in zip(*np.nonzero(track == k), strict=True):  # slot by slot
                d[t] = a[m, t]
            arrays[key] = d
        out.append(arrays)
    return out


def _same(a: dict, b) -> None:
    for key in P.KEYS:
        np.testing.assert_array_equal(a[key], getattr(b, key) if not isinstance(b, dict)
                                      else b[key], err_msg=key)  # fmt: skip


@pytest.mark.parametrize("budget", [P.ROWS_BUDGET, 1])  # one pass; rows dropped, second pass
def test_people_equal_the_naive_dense_tracks(cams, budget, monkeypatch):
    monkeypatch.setattr(P, "ROWS_BUDGET", budget)
    naive = _naive(cams)
    order = sorted(range(len(naive)), key=lambda k: -int(naive[k]["valid"].sum()))
    tris = P.triangulate_cameras_people(cams)
    assert len(tris) >= 2
    for tri, k in zip(tris, order, strict=False):
        _same(naive[k], tri)
    tri, found, taken = P.triangulate_cameras_one(cams)
    seen = [P.seen_by(naive[k]["person"], naive[k]["used"], naive[k]["valid"]) for k in order]
    best = P.choose_person(seen)
    _same(naive[order[best]], tri)
    assert {k: found[taken][k] for k in seen[best]} == seen[best]
    centre = np.nanmedian(P.centres(naive[order[best]]["points"], naive[order[best]]["valid"]), 0)
    np.testing.assert_array_equal(found[taken]["centre_m"], centre)


def test_second_pass_over_budget_equals_one_pass_across_chunks(cams, monkeypatch):
    one = P.triangulate_cameras_people(cams, chunk_frames=7)
    tri, found, taken = P.triangulate_cameras_one(cams, chunk_frames=7)
    monkeypatch.setattr(P, "ROWS_BUDGET", 1)  # every row dropped: the second pass holds them
    passes = []
    real = P._link_recording
    monkeypatch.setattr(P, "_link_recording", lambda *a, **k: passes.append(k) or real(*a, **k))
    for a, b in zip(one, P.triangulate_cameras_people(cams, chunk_frames=7), strict=True):
        _same(a.__dict__, b)
    tri2, found2, taken2 = P.triangulate_cameras_one(cams, chunk_frames=7)
    _same(tri.__dict__, tri2)
    assert (found2, taken2) == (found, taken)
    assert [k.get("only") is not None for k in passes] == [False, True, False, True]


def test_rows_grow_with_the_frames_seen_not_the_tracks():
    """100,000 frames, a new track every 100 frames (1,000 tracks): the rows held are those of
    the 100,000 frames seen, not 1,000 tracks x 100,000 frames."""
    T, J, C, every = 100_000, 25, 4, 100
    store = P.TrackStore(T, budget=np.inf)
    for start in range(0, T, 1000):  # chunks as triangulate reads them
        t = np.arange(start, start + 1000)
        slots = {"points": np.ones((1, 1000, J, 3)), "errors": np.ones((1, 1000, J, C)),
                 "mean_error": np.ones((1, 1000, J)), "used": np.ones((1, 1000, J, C), bool),
                 "valid": np.ones((1, 1000, J), bool),
                 "person": np.zeros((1, 1000, C), np.int64),
                 "swapped": np.zeros((1, 1000, C), bool)}  # fmt: skip
        store.add(start, (t // every)[None], slots)
    assert len(store.valid) == T // every
    assert store.nbytes == T * P.TrackStore.dense_bytes(J, C)  # every frame once
    assert (store.frames == every).all() and (store.per_camera == every).all()
    a = store.track(5, J, C)
    assert a["valid"][500:600].all() and not a["valid"][:500].any() and not a["valid"][600:].any()
    assert store.seen(5) == P.seen_by(a["person"], a["used"], a["valid"])


def test_too_many_people_at_once_names_the_limit(cams, monkeypatch):
    monkeypatch.setattr(P, "MAX_PEOPLE", 1)
    with pytest.raises(InputError, match=r"--people auto: \d+ people at once in frame 0 .*"
                                         r"more than the 1 it tracks"):  # fmt: skip
        P.triangulate_cameras_people(cams)
    assert len(P.triangulate_cameras_people(cams, 1)) == 1  # --people N: the N best seen


def test_results_over_the_dense_budget_name_the_limit(cams, monkeypatch):
    monkeypatch.setattr(P, "DENSE_BUDGET", 1000)
    with pytest.raises(InputError, match=r"--people: \d people over 40 frames need .* GiB"):
        P.triangulate_cameras_people(cams)


def test_a_crowd_is_associated_a_few_frames_at_a_time():
    frames = [[np.zeros((60, 25, 3))] * 1000 for _ in range(4)]
    step = P._batch_frames(frames, 1000)
    assert step * P._PAIR_BYTES * 60**2 * 6 <= P.ASSOCIATION_BUDGET and step >= 1
    assert P._batch_frames([[np.zeros((2, 25, 3))] * 1000] * 4, 1000) == 1000


def test_people_auto_with_only_short_tracks_says_so(cams):
    with pytest.raises(InputError, match=r"no person is present in \d+% of the frames .* "
                                         r"\(the longest track has \d+ of 40 frames"):  # fmt: skip
        P.triangulate_cameras_people(cams, min_frames=1.01)
