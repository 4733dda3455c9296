"""Start-up and threads (issue 23): the package and the CLI's parsing import no torch, the
commands' pictures need no matplotlib, and the thread policy (tensorpose.threads)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from tensorpose.cli import build_parser
from tensorpose.threads import default_threads, set_threads
from tensorpose.viz.charts import reprojection_errors_picture, skeletons_3d_picture

ROOT = Path(__file__).resolve().parents[1]
TRIAL = ROOT / "tensorpose" / "assets" / "tracks" / "openpose_body25b"
MODULES = "print(*(m in sys.modules for m in ('torch', 'matplotlib', 'scipy.optimize', 'sympy')))"


def _python(code: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def _cli(*argv: str) -> tuple[int, str]:
    """Exit status of ``tensorpose argv`` in a fresh process, and which heavy modules it had."""
    code = ("import sys\nfrom tensorpose.cli import main\ntry:\n    rc = main(sys.argv[1:])\n"
            f"except SystemExit as e:\n    rc = e.code\n{MODULES}\nsys.exit(rc)")  # fmt: skip
    p = _python(code, *argv)
    return p.returncode, p.stdout.strip().splitlines()[-1]


def test_package_import_is_light_and_lazy_names_work():
    p = _python(
        f"import sys, tensorpose, tensorpose.cli, tensorpose.config, tensorpose.io\n{MODULES}"
    )
    assert p.stdout.split() == ["False"] * 4, p.stderr
    import tensorpose

    assert tensorpose.get_skeleton("coco17").num_joints == 17
    assert tensorpose.Skeleton is tensorpose.skeleton.Skeleton
    assert {"Skeleton", "get_skeleton", "skeleton_names"} <= set(dir(tensorpose))
    with pytest.raises(AttributeError):
        tensorpose.no_such_name  # noqa: B018


def test_help_and_argument_errors_import_no_torch():
    assert _cli("--help") == (0, "False False False False")
    assert _cli("triangulate", "--no-such-flag") == (2, "False False False False")
    assert _cli("lift", "x", "--threads", "0") == (2, "False False False False")


def test_triangulate_draws_its_picture_without_matplotlib(tmp_path):
    rc, modules = _cli("triangulate", str(TRIAL), "--calib", str(TRIAL / "Calib.qca.txt"),
                       "--out", str(tmp_path / "t"), "--threads", "1")  # fmt: skip
    assert rc == 0
    assert modules == "True False False False"
    img = cv2.imread(str(tmp_path / "t" / "openpose_body25b_3d_errors.png"))
    assert img is not None and img.shape == (900, 1320, 3)


def test_lift_imports_neither_matplotlib_nor_scipy_nor_sympy(tmp_path):
    rc, modules = _cli("lift", str(TRIAL / "cam01_json"), "--size", "1088x1920", "--fps", "60",
                       "--out", str(tmp_path / "l"), "--quiet")  # fmt: skip
    assert rc == 0
    assert modules == "True False False False"
    assert cv2.imread(str(tmp_path / "l" / "cam01_json_skeletons.png")) is not None


def test_wait_policy_set_by_the_command_before_torch_unless_given():
    """Importing tensorpose sets nothing; the command sets the policy before it loads torch."""
    code = ("import os, sys, tensorpose.cli\nbefore = os.environ.get('OMP_WAIT_POLICY')\n"
            "main = tensorpose.cli.main\nmain(['smooth', 'no-such-folder', '--threads', '1'])\n"
            "print(before, os.environ['OMP_WAIT_POLICY'])")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       env={**env, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert p.stdout.strip() == "None PASSIVE", p.stderr
    given = _python(code, env={"OMP_WAIT_POLICY": "ACTIVE"})
    assert given.stdout.strip() == "ACTIVE ACTIVE"


def test_set_threads_and_the_flag():
    before = torch.get_num_threads()
    try:
        assert set_threads(None) == default_threads() == torch.get_num_threads()
        assert default_threads() == max(1, len(os.sched_getaffinity(0)) // 2)
        assert set_threads(1) == 1 == torch.get_num_threads()
        with pytest.raises(ValueError, match="train.threads"):
            set_threads(-1, "train.threads")
        cap = max(8, 4 * len(os.sched_getaffinity(0)))
        assert set_threads(cap) == cap  # the cap itself is allowed ...
        with pytest.raises(ValueError, match=rf"--threads must be at most {cap} .*got 100000"):
            set_threads(100000)  # ... tens of thousands of threads are not (no thread storm)
    finally:
        torch.set_num_threads(before)
    parser = build_parser()
    for cmd in (["lift", "x"], ["triangulate", "x", "--calib", "c"], ["predict", "x"],
                ["smooth", "x"], ["eval-wild", "x", "--calib", "c"]):  # fmt: skip
        assert parser.parse_args([*cmd, "--threads", "3"]).threads == 3
        assert parser.parse_args(cmd).threads is None


def test_charts_write_pictures(tmp_path):
    rng = np.random.default_rng(0)
    err = rng.random((50, 5)) * 20
    valid = rng.random((50, 5)) > 0.1
    valid[:, 4] = False  # a joint never valid
    names = ["nose", "l_eye", "r_eye", "l_ear", "r_ear"]
    reprojection_errors_picture(tmp_path / "e.png", err, valid, names, 15.0, "title")
    assert cv2.imread(str(tmp_path / "e.png")).shape == (900, 1320, 3)
    joints = rng.normal(size=(3, 4, 3))
    joints[1, 2] = np.nan
    skeletons_3d_picture(tmp_path / "s.png", joints, [(0, 1), (1, 2), (2, 3)],
                         [(0, 0, 255)] * 3, ["a", "b", "c"], "title")  # fmt: skip
    assert cv2.imread(str(tmp_path / "s.png")).shape == (34 + 2 * 260, 3 * 260, 3)
