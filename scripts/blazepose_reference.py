"""Write ``tests/data/blazepose_reference.npz``: the TFLite interpreter's outputs of MediaPipe's
two BlazePose networks on a few inputs, so the test suite checks the converted networks
(``tests/blazepose/test_networks.py``) where ``ai-edge-litert`` is not installed.

    python -m pip install ai-edge-litert
    python scripts/blazepose_reference.py FOLDER_OR_WHEEL VIDEO

``FOLDER_OR_WHEEL``: the mediapipe 0.10.14 wheel or a folder of its two .tflite files (see
``scripts/convert_blazepose.py``); ``VIDEO``: the balancing trial's ``cam01.mp4`` (1080 x 1920).

Inputs (stored as uint8, RGB): ``frame`` (256, 256, 3), a square crop of frame 50 of the video
(rows 250-1330, the person) resized with ``cv2.INTER_AREA``; ``noise`` (64, 64, 3), uniform
random bytes (seed 0) repeated to 4 x 4 blocks. The landmark network takes an image of 256 x 256
(``/ 255``), the detector its centre 224 x 224 (``/ 127.5 - 1``). Outputs are float32, in
TFLite's layout (NHWC), subsampled where large: the detector's anchors ``[::4]``, the
segmentation ``[::8, ::8]``, the heatmaps ``[::8, ::8]``. Beside each output, ``.../floor``: the
largest difference between the interpreter's two sets of float32 kernels (the default, XNNPACK,
whose outputs are stored, and its reference kernels) on the whole output, float32's rounding
there; the tests allow the converted networks twice that, and never less than 1e-4.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from convert_blazepose import NETWORKS, _extract  # noqa: E402

SUBSAMPLE = {  # output name -> slices of the (1, ...) TFLite output, batch dim dropped
    "detector/Identity": (slice(None, None, 4),),
    "detector/Identity_1": (slice(None, None, 4),),
    "landmark/Identity_2": (slice(None, None, 8), slice(None, None, 8)),
    "landmark/Identity_3": (slice(None, None, 8), slice(None, None, 8)),
}


def inputs(video: Path) -> dict[str, np.ndarray]:
    cap = cv2.VideoCapture(str(video))
    cap.set(cv2.CAP_PROP_POS_FRAMES, 50)
    ok, frame = cap.read()
    if not ok or frame.shape[:2] != (1920, 1080):
        raise SystemExit(f"{video}: expected the trial's 1080 x 1920 cam01.mp4")
    crop = cv2.resize(frame[250:1330], (256, 256), interpolation=cv2.INTER_AREA)
    noise = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    return {"frame": crop[..., ::-1].copy(), "noise": noise}


def network_inputs(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(detector input (1, 224, 224, 3), landmark input (1, 256, 256, 3)) of a uint8 image."""
    if image.shape[0] == 64:
        image = image.repeat(4, 0).repeat(4, 1)
    x = image[None].astype(np.float32)
    return x[:, 16:240, 16:240] / np.float32(127.5) - 1, x / np.float32(255)


def interpret(it, x: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """The interpreter's ``(name, output)`` pairs for input ``x``."""
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.ascontiguousarray(x))
    it.invoke()
    outs = [(o["name"], it.get_tensor(o["index"])) for o in it.get_output_details()]
    return outs


def main(argv: list[str] | None = None) -> int:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("source", type=Path)
    p.add_argument("video", type=Path)
    p.add_argument("--out", type=Path, default=ROOT / "tests/data/blazepose_reference.npz")
    a = p.parse_args(argv)
    arrays = inputs(a.video)
    out = dict(arrays)
    with tempfile.TemporaryDirectory() as tmp:
        folder = _extract(a.source, Path(tmp)) if a.source.is_file() else a.source
        for key, member in zip(("detector", "landmark"), NETWORKS.values(), strict=True):
            path = str(folder / Path(member).name)
            for name, image in arrays.items():
                x = network_inputs(image)[key == "landmark"]
                outputs = interpret(Interpreter(model_path=path), x)
                kernels = OpResolverType.BUILTIN_REF
                ref_kernels = interpret(Interpreter(path, experimental_op_resolver_type=kernels), x)
                for (o_name, y), r in zip(outputs, ref_kernels, strict=True):
                    floor = np.abs(y - r[1]).max()
                    y = y[0][SUBSAMPLE.get(f"{key}/{o_name}", ())]
                    out[f"{name}/{key}/{o_name}"] = np.ascontiguousarray(y, np.float32)
                    out[f"{name}/{key}/{o_name}/floor"] = np.float32(floor)
    np.savez_compressed(a.out, **out)
    print(f"{a.out}: {len(out)} arrays, {a.out.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
