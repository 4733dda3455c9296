"""tensorpose.io.files: only regular files are opened (a FIFO, /dev/zero or a folder is refused
first, so nothing hangs), and the size limit is stated in the error."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tensorpose.io.files import check_regular_file, read_bytes, read_text


def refused_fast(call) -> ValueError:
    """``call()`` must raise ValueError within 5 s (a FIFO read would block forever)."""
    box: list = []

    def run():
        try:
            call()
        except BaseException as e:
            box.append(e)
        else:
            box.append(None)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(5)
    assert box, "hung: the file was opened"
    assert isinstance(box[0], ValueError), box[0]
    return box[0]


@pytest.mark.parametrize("reader", [check_regular_file, read_bytes, read_text])
def test_a_fifo_is_refused_before_it_is_opened(tmp_path, reader):
    fifo = tmp_path / "in.json"
    os.mkfifo(fifo)
    e = refused_fast(lambda: reader(fifo, what="tracks file"))
    assert str(fifo) in str(e) and "not a regular file" in str(e) and "tracks file" in str(e)
    link = tmp_path / "link.json"  # a symlink to a FIFO too
    link.symlink_to(fifo)
    assert "not a regular file" in str(refused_fast(lambda: reader(link)))


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_dev_zero_is_refused():
    e = refused_fast(lambda: read_bytes("/dev/zero"))
    assert "/dev/zero" in str(e) and "not a regular file" in str(e)


def test_a_folder_is_refused(tmp_path):
    e = refused_fast(lambda: read_text(tmp_path, what="video"))
    assert "is a folder, expected a video" in str(e)


def test_a_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such calibration"):
        read_bytes(tmp_path / "nope", what="calibration")


@pytest.mark.parametrize(
    "limit, shown", [(100, "100 bytes"), (4096, "4 KiB"), (3 << 20, "3 MiB"), (2 << 30, "2 GiB")]
)
def test_a_file_over_the_limit_is_refused_with_the_limit_named(tmp_path, limit, shown):
    f = tmp_path / "big.bin"
    with open(f, "wb") as fh:  # sparse: no disk used
        fh.truncate(limit + 1)
    with pytest.raises(ValueError, match=rf"over the {shown} limit for a file") as e:
        read_bytes(f, max_bytes=limit)
    assert str(f) in str(e.value)
    f.write_bytes(b"x" * 100)
    assert read_bytes(f, max_bytes=100) == b"x" * 100  # exactly at the limit is fine


def test_text_and_bytes_round_trip_and_bad_utf8(tmp_path):
    f = tmp_path / "t.txt"
    f.write_bytes("héllo\n".encode())
    assert read_text(f) == "héllo\n" and read_bytes(f) == "héllo\n".encode()
    assert check_regular_file(f) == f
    f.write_bytes(b"ok\xff")
    with pytest.raises(ValueError, match=r"not UTF-8 text \(byte 2\)"):
        read_text(f)
