"""Convert MediaPipe's BlazePose networks (.tflite) into the PyTorch files tensorpose ships.

The two networks come from the MediaPipe 0.10.14 wheel (Apache-2.0), fetched with the ordinary
package client, offline afterwards::

    python -m pip download mediapipe==0.10.14 --no-deps -d /tmp/mp
    python scripts/convert_blazepose.py /tmp/mp/mediapipe-0.10.14-*.whl
    # or a folder holding pose_detection.tflite and pose_landmark_full.tflite:
    python scripts/convert_blazepose.py path/to/folder

writes ``tensorpose/assets/models/blazepose_detector.pt`` and ``blazepose_landmark_full.pt``
(graph description + float16 weights, see :mod:`tensorpose.blazepose.tflite`) and, from a wheel, the
wheel's licence as ``tensorpose/assets/models/LICENSE.mediapipe-Apache-2.0``. Needs the
``tflite`` package (``pip install tflite``); running the converted networks does not.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tensorpose.blazepose.tflite import read_tflite, save_converted  # noqa: E402

NETWORKS = {
    "blazepose_detector.pt": "mediapipe/modules/pose_detection/pose_detection.tflite",
    "blazepose_landmark_full.pt": "mediapipe/modules/pose_landmark/pose_landmark_full.tflite",
}
LICENSE_MEMBER = "mediapipe-0.10.14.dist-info/LICENSE"
MAX_MEMBER_BYTES = 64 << 20


def _extract(wheel: Path, folder: Path) -> Path:
    """The wheel's two networks and its licence, copied into ``folder`` (sizes checked)."""
    with zipfile.ZipFile(wheel) as z:
        for member in [*NETWORKS.values(), LICENSE_MEMBER]:
            info = z.getinfo(member)
            if info.file_size > MAX_MEMBER_BYTES:
                raise SystemExit(f"{wheel}: {member} is {info.file_size} bytes, over the limit")
            (folder / Path(member).name).write_bytes(z.read(info))
    return folder


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("source", type=Path, help="the mediapipe 0.10.14 wheel, or a folder of .tflite")
    p.add_argument("--out", type=Path, default=ROOT / "tensorpose/assets/models")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = _extract(a.source, Path(tmp)) if a.source.is_file() else a.source
        for out_name, member in NETWORKS.items():
            desc, state = read_tflite(folder / Path(member).name)
            save_converted(desc, state, a.out / out_name)
            size = (a.out / out_name).stat().st_size
            kinds = sorted({op["op"] for op in desc["ops"]})
            print(f"{out_name}: {len(desc['ops'])} operators ({', '.join(kinds)}), {size} bytes")
        licence = Path(tmp) / "LICENSE"
        if licence.exists():
            (a.out / "LICENSE.mediapipe-Apache-2.0").write_bytes(licence.read_bytes())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
