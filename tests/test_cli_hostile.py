"""The command line on hostile or careless input: every failure caused by the input is one line
on stderr naming the file (exit 2), never a traceback; ``--debug`` shows the traceback. Runs
``tensorpose.cli.main`` in-process on generated bad files (seconds)."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from tensorpose.cli import SMOOTH_LAYOUTS, main
from tensorpose.config import ConfigError, config_to_dict, load_config
from tensorpose.io.coco import bundled_coco
from tensorpose.io.openpose import bundled_tracks
from tensorpose.layouts import LAYOUTS
from tensorpose.tasks import build_model
from tensorpose.train.checkpoint import save_checkpoint

TINY_LIFT = ["model.channels=8", "model.receptive_field=3", "data.train_cameras=1",
             "data.val_cameras=1", "data.fps=10", "train.device=cpu",
             "train.tensorboard=false"]  # fmt: skip


def run(capsys, *argv: str) -> tuple[int, str]:
    """Exit code and stderr of ``tensorpose argv``."""
    code = main(list(argv))
    return code, capsys.readouterr().err


def one_line(err: str, *names: str) -> str:
    """The single stderr line; it names every one of ``names`` and is no traceback."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for n in names:
        assert str(n) in lines[0], (n, lines[0])
    return lines[0]


# ---------------------------------------------------------------------- the bad inputs
def bad_bvh(tmp_path: Path) -> dict[str, Path]:
    deep = "HIERARCHY\nROOT a\n{\nOFFSET 0 0 0\nCHANNELS 3 Xposition Yposition Zposition\n"
    deep += "JOINT j\n{\nOFFSET 0 1 0\nCHANNELS 3 Zrotation Xrotation Yrotation\n" * 20_000
    good_tail = "End Site\n{\nOFFSET 0 1 0\n}\n" + "}\n" * 20_001
    folder = tmp_path / "folder.bvh"
    folder.mkdir()
    files = {"directory": folder, "missing": tmp_path / "missing.bvh"}
    files["deep"] = tmp_path / "deep.bvh"
    files["deep"].write_text(deep + good_tail + "MOTION\nFrames: 1\nFrame Time: 0.01\n0 0 0\n")
    files["frame_time"] = tmp_path / "frametime.bvh"
    files["frame_time"].write_text(
        "HIERARCHY\nROOT a\n{\nOFFSET 0 0 0\nCHANNELS 3 Xposition Yposition Zposition\n"
        "End Site\n{\nOFFSET 0 1 0\n}\n}\nMOTION\nFrames: 1\nFrame Time: 1e300\n0 0 0\n"
    )
    files["binary"] = tmp_path / "binary.bvh"
    files["binary"].write_bytes(b"\xff\xfe\x00HIERARCHY\x80\x81")
    return files


def bad_coco(tmp_path: Path) -> dict[str, Path]:
    good = json.loads(bundled_coco().read_text())
    out = {}

    def write(name: str, data) -> None:
        out[name] = tmp_path / f"{name}.json"
        out[name].write_text(data if isinstance(data, str) else json.dumps(data))

    write("categories_null", {**good, "categories": None})
    cats = [dict(c, skeleton="1-2") for c in good["categories"]]
    write("skeleton_not_list", {**good, "categories": cats})
    anns = [dict(a, id=[a["id"]]) for a in good["annotations"]]
    write("list_ids", {**good, "annotations": anns})
    write("not_json", "{images: [")
    write("not_object", "[1, 2, 3]")
    return out


def bad_openpose(tmp_path: Path) -> dict[str, Path]:
    cam = tmp_path / "cam"
    shutil.copytree(bundled_tracks()[0], cam)
    frames = sorted(cam.glob("*.json"))
    (cam / frames[0].name).unlink()
    (cam / frames[0].name).mkdir()  # a folder named like a frame
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "x_000000000000_keypoints.json").write_text('{"people": [{"pose_keypoints_2d": 5}]}')
    return {"frame_named_folder": cam, "garbage": garbage, "missing": tmp_path / "nope"}


def tiny_checkpoint(path: Path, config: dict | None = None, **state) -> Path:
    cfg = load_config(None, TINY_LIFT)
    d = config_to_dict(cfg) if config is None else config
    save_checkpoint(path, build_model(cfg), d, **state)
    return path


# ---------------------------------------------------------------------- the commands
def test_bvh_info(tmp_path, capsys):
    for name, path in bad_bvh(tmp_path).items():
        code, err = run(capsys, "bvh-info", str(path))
        assert code == 2, (name, err)
        one_line(err, path)


def test_coco_info(tmp_path, capsys):
    files = bad_coco(tmp_path)
    assert main(["coco-info", str(files.pop("list_ids"))]) == 0  # bad records are reported
    out = capsys.readouterr().out
    assert "0 people kept" in out and "id=[497615]: id must be an integer" in out
    for name, path in files.items():
        code, err = run(capsys, "coco-info", str(path))
        assert code == 2, (name, err)
        one_line(err, path)
    code, err = run(capsys, "coco-info", str(bundled_coco()), "--images", str(tmp_path / "no"))
    assert code == 2 and one_line(err, tmp_path / "no")


def test_coco_info_lists_missing_images(tmp_path, capsys):
    shutil.copytree(bundled_coco().parent, tmp_path / "coco")
    images = sorted((tmp_path / "coco" / "images").iterdir())
    images[0].unlink()
    assert main(["coco-info", str(tmp_path / "coco" / bundled_coco().name)]) == 0
    out = capsys.readouterr().out
    assert f"{len(images) - 1} found, 1 missing" in out
    assert f"missing image: {images[0]}" in out


def test_smooth(tmp_path, capsys):
    for name, path in bad_openpose(tmp_path).items():
        if name == "frame_named_folder":  # skipped as not a frame: smoothing works
            out = tmp_path / "out"
            assert main(["smooth", str(path), "--out", str(out), "--no-plot"]) == 0, name
            assert "layout BODY_25B (" in capsys.readouterr().out
            continue
        code, err = run(capsys, "smooth", str(path), "--out", str(tmp_path / f"out_{name}"))
        assert code == 2, (name, err)
        one_line(err, path)
        assert not (tmp_path / f"out_{name}").exists()  # nothing written
    src = bad_openpose(tmp_path / "again")["frame_named_folder"]
    code, err = run(capsys, "smooth", str(src), "--out", str(src / "sub"))
    assert code == 2 and "the input would be overwritten" in one_line(err, src)
    code, err = run(capsys, "smooth", str(src), "--layout", "BODY_99")
    assert code == 2 and "BODY_25B" in one_line(err)


def test_smooth_layouts_are_the_layouts_module():
    assert set(SMOOTH_LAYOUTS) == set(LAYOUTS)


def test_viz_unknown_extension(tmp_path, capsys):
    out = tmp_path / "picture.xyz"
    code, err = run(capsys, "viz", "--out", str(out), "--rows", "1", "--augmentations", "1",
                    "--size", "64", "64", "--backend", "cpu")  # fmt: skip
    assert code == 2
    one_line(err, out)
    assert not out.exists()


def test_eval_bad_checkpoints(tmp_path, capsys):
    good = tiny_checkpoint(tmp_path / "good.pt")
    data = bytearray(good.read_bytes())
    corrupt = tmp_path / "corrupt.pt"
    i = data.find(b"data/0") + 200  # inside the first tensor's bytes
    data[i] ^= 0xFF
    corrupt.write_bytes(bytes(data))
    text = tmp_path / "text.pt"
    text.write_text("not a checkpoint\n")
    cases = {
        "corrupt": corrupt,
        "text": text,
        "missing": tmp_path / "missing.pt",
        "folder": tmp_path,
        "no_config": tmp_path / "noconfig.pt",
        "bad_rng": tmp_path / "badrng.pt",
        "bad_config_types": tmp_path / "badtypes.pt",
    }
    # the entries of a checkpoint removed or of the wrong type, checksums kept consistent
    payload = torch.load(good, weights_only=True)
    edits = {"no_config": ("config", None), "bad_rng": ("rng", "abc"),
             "bad_config_types": ("config", {"model": 5})}  # fmt: skip
    for name, (key, value) in edits.items():
        p = {k: v for k, v in payload.items() if k != key}
        if value is not None:
            p[key] = value
        torch.save(p, cases[name])
    for name, path in cases.items():
        code, err = run(capsys, "eval", str(path), "--device", "cpu")
        assert code == 2, (name, err)
        one_line(err, path)


def test_eval_never_runs_code_from_a_npz_named_by_the_checkpoint(tmp_path, capsys):
    marker = tmp_path / "PWNED"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch '{marker}'",))

    evil = tmp_path / "data.npz"
    arr = np.empty(1, dtype=object)
    arr[0] = Payload()
    np.savez(evil, positions_3d=arr)
    cfg = config_to_dict(load_config(None, [*TINY_LIFT, "data.source=npz", f"data.npz={evil}",
                                            "data.train=[S1]", "data.val=[S1]"]))  # fmt: skip
    ckpt = tiny_checkpoint(tmp_path / "clean.pt", cfg)
    code, err = run(capsys, "eval", str(ckpt), "--device", "cpu")
    assert code == 2
    one_line(err, evil)
    assert not marker.exists()


def test_train_bad_configs_and_run_folders(tmp_path, capsys):
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("train: {epochs: [1, 2\n")
    code, err = run(capsys, "train", str(bad_yaml))
    assert code == 2 and one_line(err, bad_yaml)
    for override in ("train.lr=inf", "train.lr_decay=-1", "train.best_metric=nope",
                     "train.name=../outside", f"train.name={tmp_path / 'abs'}"):  # fmt: skip
        code, err = run(capsys, "train", override, f"train.out_dir={tmp_path}")
        assert code == 2, override
        one_line(err, override.split("=")[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]  # nothing written
    # a fresh run never touches an existing run folder
    run_dir = tmp_path / "runs" / "mine"
    run_dir.mkdir(parents=True)
    (run_dir / "checkpoint.pt").write_bytes(b"mine")
    code, err = run(capsys, "train", *TINY_LIFT, f"train.out_dir={tmp_path / 'runs'}",
                    "train.name=mine", "--quiet")  # fmt: skip
    line = one_line(err, run_dir, "--resume")
    assert code == 2 and "train.name" in line
    assert [p.name for p in run_dir.iterdir()] == ["checkpoint.pt"]
    assert (run_dir / "checkpoint.pt").read_bytes() == b"mine"


def test_disk_full_is_one_line(tmp_path, capsys, monkeypatch):
    import tensorpose.train.atomic_save as ckpt

    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(ckpt.shutil, "disk_usage", lambda p: usage._replace(free=1000))
    code, err = run(capsys, "train", *TINY_LIFT, "train.epochs=1", "train.max_steps=1",
                    f"train.out_dir={tmp_path}", "train.name=full", "--quiet")  # fmt: skip
    assert code == 2
    line = one_line(err, tmp_path / "full")
    assert os.strerror(errno.ENOSPC).lower() in line.lower() or "space" in line.lower()
    assert not list((tmp_path / "full").glob(".*.tmp"))


def test_debug_shows_the_traceback(tmp_path, capsys):
    with pytest.raises(ValueError, match=re.escape(str(tmp_path))):
        main(["--debug", "coco-info", str(bad_coco(tmp_path)["not_json"])])
    with pytest.raises(ConfigError):
        main(["--debug", "train", "train.lr=nan"])
