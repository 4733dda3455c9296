"""The README's ```bash blocks run as written from a fresh clone.

Each block not marked long (a line ``# long: ...`` inside it) runs with ``bash`` under
``set -euo pipefail`` in a temporary folder holding a copy of the repository's files (tracked
and untracked-but-not-ignored, as ``git ls-files`` lists them), with the ``tensorpose`` of this
interpreter first on ``PATH``. A block passes when it exits 0 and every path it names after
``ls`` exists afterwards. The README itself stays short and free of paths outside the clone.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
LONG_MARKER = re.compile(r"^\s*#\s*long:", re.MULTILINE)
MAX_LINES = 200


def bash_blocks(text: str) -> list[str]:
    """The bodies of the fenced ```bash blocks of ``text``, in order."""
    return re.findall(r"^```bash[ \t]*\n(.*?)^```[ \t]*$", text, re.MULTILINE | re.DOTALL)


def quick_blocks() -> list[str]:
    return [b for b in bash_blocks(README.read_text()) if not LONG_MARKER.search(b)]


def repo_files() -> list[str]:
    """Tracked and untracked-but-not-ignored files of the checkout (what a clone would hold,
    plus what is not committed yet)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    r = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
    )
    if r.returncode != 0:
        pytest.skip("not a git checkout")
    return sorted({f for f in r.stdout.decode().split("\0") if f})


def fresh_clone(dest: Path) -> Path:
    for name in repo_files():
        src = ROOT / name
        if not src.is_file():  # deleted in the working tree, or a submodule
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    return dest


def listed_paths(block: str) -> list[str]:
    """The arguments of the block's ``ls`` lines (comments and options left out)."""
    paths = []
    for line in block.replace("\\\n", " ").splitlines():
        if line.split()[:1] == ["ls"]:
            paths += [w for w in shlex.split(line, comments=True)[1:] if not w.startswith("-")]
    return paths


def test_readme_is_short_and_stays_inside_the_clone():
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_LINES
    assert "../" not in text
    assert not re.search(r"(?<![\w.~-])/(work|home|root|tmp|Users|mnt|opt)/", text)


def test_readme_has_quick_and_long_blocks():
    blocks = bash_blocks(README.read_text())
    assert len(quick_blocks()) >= 3
    long_blocks = [b for b in blocks if LONG_MARKER.search(b)]
    assert any("scripts/run.sh demo" in b and "scripts/run.sh test" in b for b in long_blocks)


def test_readme_links_resolve():
    text = README.read_text()
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" not in target:
            assert (ROOT / target).exists(), target


def test_readme_lists_every_command():
    exe = Path(sys.executable).parent / "tensorpose"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "tensorpose"]
    r = subprocess.run([*cmd, "--help"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    names = re.search(r"\{([a-z0-9,-]+)\}", r.stdout).group(1).split(",")
    table = README.read_text().split("## Commands", 1)[1]
    for name in names:
        assert f"| `{name}` |" in table, name


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(quick_blocks())))
def test_readme_block_runs(index, tmp_path):
    block = quick_blocks()[index]
    clone = fresh_clone(tmp_path / "clone")
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("OMP_NUM_THREADS", "1")
    r = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + block],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, (
        f"block {index} failed:\n{block}\n{r.stdout[-3000:]}{r.stderr[-3000:]}"
    )
    for path in listed_paths(block):
        assert (clone / path).exists(), f"block {index} did not write {path}"
