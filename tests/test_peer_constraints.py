"""The peer environments' pip constraints (``benchmarks/peers/constraints/``): every package
pinned, torch as its CPU build, and the check that reads an environment against them."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted((ROOT / "benchmarks/peers/constraints").glob("*.txt"))


def peer_env():
    spec = importlib.util.spec_from_file_location("peer_env", ROOT / "benchmarks/peers/peer_env.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_peer_environment_has_its_constraints():
    """Each name that a peer script passes to peer_python has a file (peer_python refuses one
    without), and so does compare_mediapipe.py's environment."""
    names = set()
    for script in (ROOT / "benchmarks/peers").glob("*.py"):
        names |= set(re.findall(r'peer_python\(\s*"([a-z0-9_]+)"', script.read_text()))
    assert names and names <= {f.stem for f in FILES}, names
    assert "mediapipe" in {f.stem for f in FILES}
    with pytest.raises(SystemExit, match="no pip constraints"):
        peer_env().constraints_file("nothing")


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_each_line_pins_one_version_and_torch_is_the_cpu_build(path):
    lines = [ln for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+==[0-9][^\s]*", ln) for ln in lines), path
    pins = peer_env().pins(path)
    assert len(pins) == len(lines)  # one line per package
    assert pins["torch"] == "2.13.0+cpu"
    if path.stem == "mmpose":
        assert pins["torchvision"] == "0.28.0+cpu" and pins["mmcv-lite"] == "2.1.0"
        assert pins["mmpose"] == "1.3.2"
    assert not any(name.startswith("nvidia") for name in pins)


def test_pin_mismatches_reads_the_running_environment(tmp_path):
    """Against this interpreter's own packages: a pin at the installed version passes, one at
    another version is named, an absent package is not a mismatch."""
    from importlib.metadata import version

    env = peer_env()
    pins = tmp_path / "c.txt"
    pins.write_text(f"# comment\nnumpy=={version('numpy')}\nPyYAML==0.0.1\nnot-installed-x==1.0\n")
    wrong = env.pin_mismatches(Path(sys.executable), pins)
    assert wrong == [f"pyyaml installed {version('pyyaml')}, pinned 0.0.1"]
