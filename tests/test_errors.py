"""Errors tell the truth (issue 29): bad input is one ``error:`` line and exit 2; an exception
in tensorpose's own code is an ``internal error`` with its type and exit 70, never dressed up
as bad input; ``--debug`` re-raises both. Importing tensorpose or loading BlazePose changes
nothing process-wide."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import tensorpose.io.info
from tensorpose.cli import EX_SOFTWARE, main
from tensorpose.errors import InputError, MissingFileError

ROOT = Path(__file__).resolve().parents[1]


def run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


def _raise(e: BaseException):
    def fail(*args, **kwargs):
        raise e

    return fail


def test_input_error_is_a_value_error():
    assert issubclass(InputError, ValueError)
    assert issubclass(MissingFileError, InputError) and issubclass(MissingFileError, OSError)
    from tensorpose.config import ConfigError
    from tensorpose.io.bvh import BVHError
    from tensorpose.io.safe_pickle import UnsafePickleError
    from tensorpose.train.checkpoint import CheckpointError

    for cls in (ConfigError, BVHError, UnsafePickleError, CheckpointError):
        assert issubclass(cls, InputError), cls


@pytest.mark.parametrize("exc", [KeyError("joints"), TypeError("bad operand"),
                                 IndexError("out of range"), ValueError("a library check"),
                                 OSError(errno.EBADF, "Bad file descriptor")])  # fmt: skip
def test_a_bug_in_a_command_is_an_internal_error(monkeypatch, capsys, exc):
    monkeypatch.setattr(tensorpose.io.info, "bvh_info", _raise(exc))
    code, err = run(capsys, "bvh-info")
    assert code == EX_SOFTWARE == 70
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("tensorpose bvh-info: internal error: ")
    assert f"{type(exc).__name__}: " in lines[0] and "--debug" in lines[0]
    assert " error: " not in lines[0].replace("internal error: ", "")


def test_internal_error_in_smooth_and_debug_reraises(monkeypatch, capsys, tmp_path):
    import tensorpose.apps.smooth

    monkeypatch.setattr(tensorpose.apps.smooth, "smooth_folder", _raise(KeyError("track")))
    trial = ROOT / "tensorpose" / "assets" / "tracks" / "openpose_body25b" / "cam01_json"
    code, err = run(capsys, "smooth", str(trial), "--out", str(tmp_path / "s"), "--threads", "1")
    assert code == 70
    assert "internal error: KeyError: 'track'" in err and "error: " not in err.split(":", 2)[1]
    with pytest.raises(KeyError, match="track"):
        main(["--debug", "smooth", str(trial), "--out", str(tmp_path / "s"), "--threads", "1"])


def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path):
    code, err = run(capsys, "bvh-info", str(tmp_path / "missing.bvh"))
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("tensorpose bvh-info: error: ") and "missing.bvh" in err
    bad = tmp_path / "bad.bvh"
    bad.write_text("HIERARCHY\nROOT\n")
    code, err = run(capsys, "bvh-info", str(bad))
    assert code == 2 and err.count("\n") == 1 and "bad.bvh" in err
    assert "internal error" not in err
    with pytest.raises(InputError, match="bad.bvh"):
        main(["--debug", "bvh-info", str(bad)])
    with pytest.raises(SystemExit) as info:  # argparse: --threads 0
        main(["smooth", str(tmp_path), "--threads", "0"])
    assert info.value.code == 2
    assert "--threads" in capsys.readouterr().err


def test_a_full_disk_is_the_users_error(monkeypatch, capsys):
    full = OSError(errno.ENOSPC, "No space left on device")
    full.filename = "out/result.json"
    monkeypatch.setattr(tensorpose.io.info, "bvh_info", _raise(full))
    code, err = run(capsys, "bvh-info")
    assert code == 2
    assert err == "tensorpose bvh-info: error: out/result.json: No space left on device\n"


def _python(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["PYTHONPATH"] = str(ROOT)
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300, check=True)  # fmt: skip
    return p.stdout.strip()


def test_import_leaves_the_environment_alone():
    code = "import os, tensorpose, tensorpose.cli; print(os.environ.get('OMP_WAIT_POLICY'))"
    assert _python(code) == "None"
    code = ("import os, tensorpose.threads as t; t.prepare_environment(); "
            "print(os.environ['OMP_WAIT_POLICY'])")  # fmt: skip
    assert _python(code) == "PASSIVE"


def test_blazepose_load_leaves_malloc_alone(monkeypatch):
    import tensorpose.blazepose.memory as memory
    from tensorpose.blazepose.pipeline import BlazePose

    calls = []
    monkeypatch.setattr(memory, "keep_freed_memory", lambda *a: calls.append(a) or 0)
    monkeypatch.setattr(memory, "_applied", [])  # any caller: mallopt is reached through ctypes
    monkeypatch.setattr(memory, "ctypes", SimpleNamespace(CDLL=lambda *a: calls.append(a)))
    BlazePose.load("cpu")
    assert calls == [] and memory._applied == []


def test_ctrl_c_while_the_command_starts_is_one_line_and_130(tmp_path):
    """SIGINT while the command's modules (torch) are still being imported: one line, 130."""
    import signal
    import subprocess
    import sys
    import time

    from tensorpose.io.openpose import bundled_tracks

    tracks = bundled_tracks()[0].parent
    for i, delay in enumerate((0.4, 0.8)):
        out = tmp_path / f"o{i}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "tensorpose", "smooth", str(tracks), "--out", str(out)],
            stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "interrupted (Ctrl-C)" in lines[0], err
        assert not out.exists() or not any(out.iterdir())


def test_control_characters_from_a_file_never_reach_the_terminal(monkeypatch, capsys):
    """An error quoting a file's text (a raw ESC would drive the terminal) is escaped."""
    import tensorpose.io.info

    bad = InputError("clip.bvh: joint '\x1b[2J\x1b[31mHips' unknown")
    monkeypatch.setattr(tensorpose.io.info, "bvh_info", _raise(bad))
    assert main(["bvh-info", "x.bvh"]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\\x1b[2J\\x1b[31mHips" in err


HOOK = """
import os, signal, sys
class _At:
    def find_spec(self, name, path=None, target=None):
        if name == os.environ["SIGINT_AT"]:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, _At())
"""


def _default_sigint() -> None:
    """SIGINT as from a terminal (a shell's background job starts with it ignored)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("module", ["tensorpose.errors", "tensorpose.cli", "numpy", "torch",
                                    "tensorpose.multiview.recording"])  # fmt: skip
def test_ctrl_c_as_each_module_of_the_command_is_imported_is_one_line_and_130(tmp_path, module):
    """SIGINT at the instant a module starts importing, from the first the package imports
    (``tensorpose.errors``, by ``tensorpose/__init__``) through the command line's (before
    ``main`` is entered) to the command's own: one line, 130, nothing written."""
    import os
    import subprocess
    import sys

    from tensorpose.io.openpose import bundled_tracks

    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(HOOK)
    tracks = bundled_tracks()[0].parent
    env = {**os.environ, "SIGINT_AT": module,
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), *sys.path])}  # fmt: skip
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "tensorpose", "triangulate", str(tracks),
                           "--calib", str(tracks / "Calib.qca.txt"), "--fps", "60", "--out",
                           str(out)], capture_output=True, text=True, env=env, timeout=120,
                          preexec_fn=_default_sigint)  # fmt: skip
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 130 and len(lines) == 1, proc.stderr
    assert "interrupted (Ctrl-C)" in lines[0] and not out.exists()


def test_output_into_a_closed_pipe_is_silent_141(tmp_path):
    """`tensorpose ... | head -1`: the reader leaves; the rest is dropped without an error line,
    exit 141 (SIGPIPE's), like other command-line tools; a broken pipe elsewhere stays a bug."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "tensorpose", "bvh-info"], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    p.stdout.close()  # before the command prints anything (it imports torch first)
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141, err
    assert err == ""
