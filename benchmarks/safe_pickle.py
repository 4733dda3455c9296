"""What refusing code execution costs: restricted loading vs the loaders that would run it.

Contenders on the same files, side by side in one process:

* VideoPose3D-layout ``.npz`` (``positions_2d``: subjects x actions x 4 cameras of
  ``(T, 17, 2)`` float32; ``positions_3d``: ``(T, 32, 3)``), every member read:
  ``np.load(allow_pickle=True)`` (the baseline) vs ``tensorpose.io.safe_pickle.load_npz``
  (pure-Python restricted unpickler);
* a checkpoint in VideoPose3D's layout with the published 243-frame, 1024-channel model:
  ``torch.load(weights_only=False)`` (the baseline) vs ``torch_file.torch_load``.

Median of ``--repeats`` runs after warm-up (file cache warm); the contenders of a case take
turns run by run, so that load from other processes on a shared CPU hits both alike. Writes
``benchmarks/results/safe_pickle_cpu.json``.

    python benchmarks/safe_pickle.py [--frames 1000] [--repeats 9]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import base_parser, print_table, times, write_json
from tensorpose.io.safe_pickle import RANDOM_STATE_GLOBALS, load_npz
from tensorpose.io.torch_file import torch_load

SHAPES = (
    Path(__file__).resolve().parent.parent / "tests/data/videopose3d/pretrained_243_shapes.json"
)


def write_files(folder: Path, subjects: int, actions: int, frames: int) -> dict[str, Path]:
    rng = np.random.default_rng(0)
    names = [(f"S{s}", f"Action {a}") for s in range(subjects) for a in range(actions)]
    p2d: dict = {}
    p3d: dict = {}
    for s, a in names:
        p2d.setdefault(s, {})[a] = [rng.random((frames, 17, 2), dtype=np.float32) for _ in range(4)]
        p3d.setdefault(s, {})[a] = rng.random((frames, 32, 3), dtype=np.float32)
    meta = {"layout_name": "h36m", "num_joints": 17, "keypoints_symmetry": [[4, 5, 6], [1, 2, 3]]}
    files = {"data_2d.npz": folder / "data_2d.npz", "data_3d.npz": folder / "data_3d.npz"}
    np.savez(files["data_2d.npz"], positions_2d=p2d, metadata=meta)
    np.savez(files["data_3d.npz"], positions_3d=p3d)
    spec = json.loads(SHAPES.read_text())["state_dict_shapes"]
    sd = {k: torch.randn(s) if s else torch.tensor(1) for k, s in spec.items()}
    ckpt = {"epoch": 80, "lr": 1e-5, "random_state": np.random.RandomState(0), "model_pos": sd}
    files["checkpoint_243.bin"] = folder / "checkpoint_243.bin"
    torch.save(ckpt, files["checkpoint_243.bin"])
    return files


def np_load_all(path: Path) -> dict:
    with np.load(path, allow_pickle=True) as z:
        return {k: z[k] for k in z.keys()}


def main() -> None:
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--subjects", type=int, default=5)
    p.add_argument("--actions", type=int, default=15)
    p.add_argument("--frames", type=int, default=1000)
    p.set_defaults(repeats=9, warmup=1)
    args = p.parse_args()
    cpu = torch.device("cpu")
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        files = write_files(Path(tmp), args.subjects, args.actions, args.frames)
        sizes = {k: round(f.stat().st_size / 2**20, 1) for k, f in files.items()}
        ckpt = files["checkpoint_243.bin"]
        cases = {
            case: {
                "np.load(allow_pickle)": lambda f=files[case]: np_load_all(f),
                "safe_pickle.load_npz": lambda f=files[case]: load_npz(f),
            }
            for case in ("data_2d.npz", "data_3d.npz")
        }
        cases["checkpoint_243.bin"] = {
            "torch.load(weights_only=False)": lambda: torch.load(
                ckpt, map_location="cpu", weights_only=False
            ),
            "torch_file.torch_load": lambda: torch_load(ckpt, extra_globals=RANDOM_STATE_GLOBALS),
        }
        for case, contenders in cases.items():
            runs: dict[str, list[float]] = {name: [] for name in contenders}
            for fn in contenders.values():
                times(fn, cpu, args.warmup, 0)
            for _ in range(args.repeats):  # take turns
                for name, fn in contenders.items():
                    runs[name] += times(fn, cpu, 0, 1)
            for name, t in runs.items():
                rows.append({"case": case, "contender": name, "ms": 1e3 * statistics.median(t)})
    for case in ("data_2d.npz", "data_3d.npz", "checkpoint_243.bin"):
        case_rows = [r for r in rows if r["case"] == case]
        base = case_rows[0]["contender"]
        print_table(f"{case} ({sizes[case]} MiB)", case_rows, base)
        for r in case_rows:
            r["ratio_vs_baseline"] = case_rows[0]["ms"] / r["ms"]
            r.pop("speedup_vs_" + base, None)
    if not args.no_save:
        write_json(
            "safe_pickle",
            cpu,
            {
                "sizes_mib": sizes,
                "subjects": args.subjects,
                "actions": args.actions,
                "frames": args.frames,
                "repeats": args.repeats,
                "load_average_1_5_15min": os.getloadavg(),
                "rows": rows,
            },
        )


if __name__ == "__main__":
    main()
