from pathlib import Path

import pytest
import torch

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
DEVICES = ["cpu", pytest.param("cuda", marks=CUDA)]


@pytest.fixture(params=DEVICES)
def device(request):
    return torch.device(request.param)


# CMU "3dsMax-friendly" joint names (the bundled files) -> "MotionBuilder-friendly" names.
RENAME_TO_MOTIONBUILDER = {
    "LeftHip": "LeftUpLeg", "LeftKnee": "LeftLeg", "LeftAnkle": "LeftFoot",
    "LeftToe": "LeftToeBase", "RightHip": "RightUpLeg", "RightKnee": "RightLeg",
    "RightAnkle": "RightFoot", "RightToe": "RightToeBase", "lowerback": "LowerBack",
    "Chest": "Spine", "Chest2": "Spine1", "lowerneck": "Neck", "Neck": "Neck1",
    "LeftCollar": "LeftShoulder", "LeftShoulder": "LeftArm", "LeftElbow": "LeftForeArm",
    "LeftWrist": "LeftHand", "RightCollar": "RightShoulder", "RightShoulder": "RightArm",
    "RightElbow": "RightForeArm", "RightWrist": "RightHand",
}  # fmt: skip


@pytest.fixture
def motionbuilder_copy(tmp_path):
    """``copy(src, frames=None) -> Path``: ``src`` with its joints renamed to the
    MotionBuilder-friendly CMU convention (optionally only the first ``frames`` frames)."""

    def copy(src: Path, frames: int | None = None) -> Path:
        lines = Path(src).read_text().splitlines()
        cut = lines.index("MOTION")
        out = []
        for line in lines[:cut]:
            tok = line.split()
            if len(tok) == 2 and tok[0] in ("ROOT", "JOINT") and tok[1] in RENAME_TO_MOTIONBUILDER:
                line = line.replace(tok[1], RENAME_TO_MOTIONBUILDER[tok[1]])
            out.append(line)
        motion = lines[cut:] if frames is None else [
            "MOTION", f"Frames: {frames}", lines[cut + 2], *lines[cut + 3 : cut + 3 + frames]
        ]  # fmt: skip
        dst = tmp_path / f"{Path(src).stem}_motionbuilder.bvh"
        dst.write_text("\n".join(out + motion) + "\n")
        return dst

    return copy
