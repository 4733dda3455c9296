"""``tensorpose convert-blazepose``: BlazePose's heavy landmark network, converted and installed.

Check the input (the npm package ``@mediapipe/pose`` as ``npm pack`` writes it, a ``.tgz``; its
``pose_landmark_heavy.tflite``; or a folder holding that file), read the network's bytes
(:func:`tensorpose.io.archives.read_member` for a package), convert it
(:func:`tensorpose.blazepose.networks.convert_heavy`: MediaPipe's "full" and "lite" landmark
networks and any graph that is not the landmark network are refused), load the converted file
back, then commit ``blazepose_landmark_heavy.pt`` (float16 weights, 27.7 MB) into the models
folder (default :func:`tensorpose.blazepose.networks.models_dir`), where ``tensorpose predict
--model blazepose-heavy`` finds it. Needs the ``tflite`` package (``pip install tflite``, or
the ``convert`` extra); running the converted network does not.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..blazepose.networks import HEAVY_FILE_NAME, HEAVY_SOURCE, convert_heavy, models_dir
from ..blazepose.tflite import MAX_TFLITE_BYTES, load_converted, save_converted
from ..errors import InputError, MissingFileError
from ..io.archives import is_archive, read_member
from ..io.atomic import OutputFolder
from ..io.files import read_bytes

__all__ = ["convert_blazepose", "summary"]


def _source_bytes(source: Path) -> tuple[bytes, str]:
    """The heavy network's bytes and a name for them, from a package, a file or a folder."""
    member = HEAVY_SOURCE["member"]
    if not source.exists():
        raise MissingFileError(f"{source}: no such file or folder")
    if source.is_dir():
        source = source / member
        if not source.is_file():
            raise InputError(f"{source.parent}: no {member} in the folder")
    elif is_archive(source):
        return read_member(source, member, MAX_TFLITE_BYTES), f"{source}:{member}"
    elif source.suffix.lower() != ".tflite":
        raise InputError(f"{source}: expected the npm package (.tgz), {member} or a folder "
                         "holding it")  # fmt: skip
    return read_bytes(source, MAX_TFLITE_BYTES, "TFLite model"), str(source)


def convert_blazepose(
    source: str | os.PathLike, out: str | os.PathLike | None = None, *, overwrite: bool = False
) -> dict:
    """Convert ``pose_landmark_heavy.tflite`` from ``source`` into ``out`` (``convert-blazepose``).

    Args:
        source: the ``@mediapipe/pose`` npm package (``.tgz``; a wheel or ``.zip`` holding
            the file also works), the ``.tflite`` itself, or a folder holding it.
        out: the models folder (default :func:`~tensorpose.blazepose.networks.models_dir`:
            ``$TENSORPOSE_MODELS`` or the user's cache); created.
        overwrite: replace an installed heavy network.

    Returns a report: source, sha256, known (the tested file), operators, output path, bytes.

    Raises:
        InputError: a missing or unreadable source, no heavy network in it, the wrong network,
            an installed one without ``overwrite``, or no ``tflite`` package (one line).
    """
    source = Path(source)
    out = Path(out) if out is not None else models_dir()
    outputs = OutputFolder(out, [HEAVY_FILE_NAME], inputs=[source], overwrite=overwrite)
    data, name = _source_bytes(source)
    try:
        desc, state, info = convert_heavy(data, name)
    except ModuleNotFoundError as e:
        if e.name != "tflite":
            raise
        raise InputError("convert-blazepose reads .tflite files with the `tflite` package: pip "
                         "install tflite (or tensorpose's `convert` extra)") from None  # fmt: skip
    with outputs:
        staged = outputs.path(HEAVY_FILE_NAME)
        save_converted(desc, state, staged)
        load_converted(staged)  # reads back as the loader will
        size = staged.stat().st_size
        written = outputs.commit()
    return {"source": name, **info, "output": str(written[0]), "bytes": size}


def summary(r: dict) -> list[str]:
    """The lines ``tensorpose convert-blazepose`` prints."""
    known = (f"the tested file of {HEAVY_SOURCE['package']}" if r["known"]
             else f"not the tested file of {HEAVY_SOURCE['package']}: untested")  # fmt: skip
    return [
        f"{r['source']}: BlazePose heavy landmark network, {r['operators']} operators "
        f"(sha256 {r['sha256'][:16]}..., {known})",
        f"  -> {r['output']} ({r['bytes'] / 1e6:.1f} MB): "
        "tensorpose predict ... --model blazepose-heavy",
    ]
