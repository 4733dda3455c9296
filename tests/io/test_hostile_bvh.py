"""Hostile BVH input: seeded corruptions of small real and hand-made files. Every case must
either load (and give finite positions of the right shape) or raise BVHError naming the file;
never another exception, a hang or a write."""

import re

import numpy as np
import pytest
import torch

from tensorpose.io.bvh import BVHError, bundled_bvh, load_bvh

SEED = 20240611
SMALL = """HIERARCHY
ROOT root
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
  JOINT a
  {
    OFFSET 1 0 0
    CHANNELS 3 Xrotation Yrotation Zrotation
    End Site
    {
      OFFSET 0 0 3
    }
  }
}
MOTION
Frames: 2
Frame Time: 0.04
1 2 3 10 20 30 40 50 60
0 0 0 0 0 0 0 0 0
"""


def real_excerpt(frames: int = 2) -> str:
    """The first ``frames`` frames of a bundled CMU file (31 joints)."""
    lines = bundled_bvh()[0].read_text().splitlines()
    cut = lines.index("MOTION")
    head = [*lines[: cut + 1], f"Frames: {frames}", lines[cut + 2]]
    return "\n".join(head + lines[cut + 3 : cut + 3 + frames]) + "\n"


def deep(depth: int, close: bool = True) -> str:
    """A chain of ``depth`` joints below the root (one rotation channel triple each)."""
    parts = ["HIERARCHY", "ROOT r", "{", "OFFSET 0 0 0", "CHANNELS 3 Zrotation Xrotation Yrotation"]
    for i in range(depth):
        parts += [f"JOINT j{i}", "{", "OFFSET 0 1 0", "CHANNELS 3 Zrotation Xrotation Yrotation"]
    parts += ["}"] * ((depth + 1) if close else depth // 2)
    row = " ".join(["5"] * (3 * (depth + 1)))
    parts += ["MOTION", "Frames: 1", "Frame Time: 0.01", row]
    return "\n".join(parts) + "\n"


def structural_cases() -> list[tuple[str, bytes | None, str]]:
    """Targeted cases: ``(label, content, expected outcome)``; ``None`` content = the path is
    a folder."""
    s = SMALL

    def edit(old: str, new: str) -> bytes:
        assert old in s
        return s.replace(old, new).encode()

    rot = "Xrotation Yrotation Zrotation"
    error = [
        ("folder instead of a file", None),
        ("empty file", b""),
        ("only blank lines", b"\n\n  \n"),
        ("not UTF-8", s.encode().replace(b"ROOT root", b"ROOT r\xffot")),
        ("NUL bytes", edit("OFFSET 1 0 0", "OFFSET 1\x000 0")),
        ("repeated rotation channel", edit(rot, "Xrotation Xrotation Zrotation")),
        ("repeated position channel", edit("Xposition Yposition", "Xposition Xposition")),
        ("joint name twice", edit("JOINT a", "JOINT root")),
        (
            "joint named like an end site",
            edit(
                "  }\n}\nMOTION",
                "  }\n  JOINT a_End\n  {\n    OFFSET 0 0 0\n    CHANNELS 0\n  }\n}\nMOTION",
            ),
        ),
        ("CHANNELS count not a number", edit("CHANNELS 3", "CHANNELS three")),
        ("CHANNELS count unicode digit", edit("CHANNELS 3", "CHANNELS \u00b3")),
        ("Frames unicode digit", edit("Frames: 2", "Frames: \u00b2")),
        ("Frames huge", edit("Frames: 2", "Frames: 99999999999999999999")),
        ("Frames negative", edit("Frames: 2", "Frames: -2")),
        ("two roots", edit("MOTION", "ROOT b\n{\nOFFSET 0 0 0\nCHANNELS 0\n}\nMOTION")),
        ("End Site without brace", edit("End Site\n    {", "End Site\n")),
        ("deep hierarchy, unclosed", deep(1200, close=False).encode()),
    ]
    for ft in ("0", "-0.04", "nan", "inf", "-inf", "1e308", "1e-300", "3601", "1e999"):
        error.append((f"Frame Time {ft}", edit("Frame Time: 0.04", f"Frame Time: {ft}")))
    for value in ("1e308", "-1e8", "1e7000", "nan", "inf"):  # a root position, frame 1
        error.append((f"root at {value}", edit("0 0 0 0 0 0 0 0 0", f"{value} 0 0 0 0 0 0 0 0")))
    error.append(("offset 1e300", edit("OFFSET 1 0 0", "OFFSET 1e300 0 0")))
    accepted = [
        ("long joint name", edit("JOINT a", "JOINT " + "a" * 100_000)),
        ("deep hierarchy (1200 levels)", deep(1200).encode()),
        ("real excerpt", real_excerpt().encode()),
        ("CRLF line ends", s.replace("\n", "\r\n").encode()),
        ("trailing blank lines", (s + "\n\n\n").encode()),
    ]
    return [(*c, "error") for c in error] + [(*c, "accepted") for c in accepted]


def check_motion(m) -> None:
    J = len(m.joint_names)
    C = sum(len(c) for c in m.channels)
    assert m.motion.shape == (m.num_frames, C) and np.isfinite(m.motion).all()
    assert 1e-6 <= m.frame_time <= 60 and np.isfinite(m.offsets).all()
    if J <= 200 and m.num_frames <= 10:  # deep chains: FK over every depth level is slow
        pos = m.positions(end_sites=True)
        assert pos.shape == (m.num_frames, J + len(m.end_sites), 3)
        assert not torch.isnan(pos).any()


def test_hostile_bvh(tmp_path, hostile):
    run = hostile.runner("BVH", BVHError)
    rng = np.random.default_rng(SEED)
    bases = {"small": SMALL.encode(), "cmu": real_excerpt().encode()}
    cases = structural_cases()
    for i in range(300):  # seeded generic corruptions of both bases
        base = "small" if i % 2 else "cmu"
        label, data = hostile.mutate(rng, bases[base])
        cases.append((f"{base}: {label}", data, None))
    for i, (label, data, expect) in enumerate(cases):
        path = tmp_path / f"case{i:03d}.bvh"
        if data is None:
            path.mkdir()
        else:
            path.write_bytes(data)
        call = lambda p=path: load_bvh(p)  # noqa: E731
        run(f"case {i} ({label})", path, call, path.name, check_motion, expect)
    run.finish(min_errors=100, min_accepted=30)
    assert run.counts["error"] + run.counts["accepted"] == len(cases) >= 300


def test_huge_or_non_finite_frame_values_name_the_file_line_and_frame(tmp_path):
    path = tmp_path / "huge.bvh"
    for value, why in (("1e308", r"value beyond \+-1e7"), ("-2e7", r"value beyond \+-1e7"),
                       ("inf", "non-finite"), ("nan", "non-finite")):  # fmt: skip
        path.write_text(SMALL.replace("0 0 0 0 0 0 0 0 0", f"{value} 0 0 0 0 0 0 0 0"))
        with pytest.raises(BVHError, match=rf"^{re.escape(str(path))}:20: frame 1 has a "
                                           rf"{why}"):  # fmt: skip
            load_bvh(path)
    path.write_text(SMALL.replace("0 0 0 0 0 0 0 0 0", "1e7 0 0 0 0 0 0 0 0"))
    assert load_bvh(path).motion[1, 0] == 1e7  # the limit itself loads
