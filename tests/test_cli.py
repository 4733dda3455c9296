import subprocess
import sys

from tensorpose.cli import main


def test_bvh_info_on_bundled_files(capsys):
    assert main(["bvh-info"]) == 0
    out = capsys.readouterr().out
    assert "131_01.bvh: 994 frames at 120.0 fps, 31 joints, 7 end sites" in out
    assert out.count("h36m17 median height") == 3


def test_bad_file_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.bvh"
    bad.write_text("HIERARCHY\nROOT x\n{\n OFFSET 0 0\n")
    assert main(["bvh-info", str(bad)]) == 2
    assert f"{bad}:4: OFFSET of 'x' needs 3 numbers" in capsys.readouterr().err


def test_module_entry_point_help():
    r = subprocess.run(
        [sys.executable, "-m", "tensorpose", "--help"], capture_output=True, text=True
    )
    assert r.returncode == 0 and "bvh-info" in r.stdout
