"""io.safe_pickle: .npz and pickles load like numpy's own loader for benign files and refuse
anything that could run code (checked with payloads that do run under np.load)."""

from __future__ import annotations

import io
import os
import pickle
import random
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tensorpose.io.safe_pickle import (
    RANDOM_STATE_GLOBALS,
    UnsafePickleError,
    load_npz,
    safe_loads,
)

# ------------------------------------------------------------------ helpers
# Process-wide audit hook: records code-running events while a load is being watched.
_WATCHED = ("os.system", "subprocess.Popen", "exec", "os.exec", "os.posix_spawn", "os.spawn")
_EVENTS: list[str] = []
_WATCHING = [False]


def _hook(event: str, args: tuple) -> None:
    # pickle.find_class is audited by the standard unpickler only: a sign of a real import.
    # "exec" also fires when a module is imported (its code object comes from a file): ignored.
    if not _WATCHING[0] or (event == "exec" and os.path.exists(args[0].co_filename)):
        return
    if event in _WATCHED or event == "pickle.find_class":
        _EVENTS.append(event)


if not getattr(sys, "_tensorpose_safe_pickle_hook", False):
    sys.addaudithook(_hook)
    sys._tensorpose_safe_pickle_hook = True


def watched_load(path: Path):
    """``load_npz(path)`` while recording code-running audit events."""
    _WATCHING[0] = True
    try:
        return load_npz(path)
    finally:
        _WATCHING[0] = False


def assert_same(a, b, where="value"):
    """Deep equality of what np.load returns: types, dtypes, shapes, bytes, nested containers."""
    assert type(a) is type(b), f"{where}: {type(a)} != {type(b)}"
    if isinstance(a, np.ndarray):
        assert (a.dtype, a.shape) == (b.dtype, b.shape), where
        assert a.flags.f_contiguous == b.flags.f_contiguous, where
        if a.dtype.names:  # field by field: padding bytes between fields are not data
            for name in a.dtype.names:
                assert_same(a[name], b[name], f"{where}.{name}")
        elif a.dtype.hasobject:
            assert_same(a.tolist(), b.tolist(), where)
        else:
            assert a.tobytes() == b.tobytes(), where  # bitwise: NaN-safe
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.generic):
        assert (a.dtype, a.tobytes()) == (b.dtype, b.tobytes()), where
    else:
        assert a == b, where


def assert_matches_np_load(path: Path, allow_pickle: bool = True):
    ours = watched_load(path)
    with np.load(path, allow_pickle=allow_pickle) as ref:
        assert list(ours) == list(ref.keys())
        for k in ref.keys():
            assert_same(ours[k], ref[k], k)
    assert _EVENTS == []
    return ours


def vp3d_2d(rng: np.random.Generator) -> dict:
    """A dataset in the layout of VideoPose3D's data_2d_h36m_cpn_ft_h36m_dbb.npz."""
    positions = {
        s: {a: [rng.random((40 + c, 17, 2), dtype=np.float32) for c in range(4)] for a in acts}
        for s, acts in (("S1", ["Walking", "Eating 2"]), ("S9", ["SittingDown 1"]))
    }
    metadata = {
        "layout_name": "h36m",
        "num_joints": 17,
        "keypoints_symmetry": [[4, 5, 6, 11, 12, 13], [1, 2, 3, 14, 15, 16]],
    }
    return {"positions_2d": positions, "metadata": metadata}


def vp3d_3d(rng: np.random.Generator) -> dict:
    """A dataset in the layout of VideoPose3D's data_3d_h36m.npz (32 joints, metres)."""
    return {
        "positions_3d": {
            s: {
                a: rng.standard_normal((30, 32, 3)).astype(np.float32)
                for a in ("Walking", "Sitting")
            }
            for s in ("S1", "S11")
        }
    }


class Payload:
    """Pickles as a call of ``func(*args)``: what a crafted file does."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def payloads(marker: Path) -> dict[str, tuple[str, Payload]]:
    """name -> (the global a refusal must name, a payload that creates ``marker``)."""
    return {
        "os.system": (os.system.__module__ + ".system", Payload(os.system, f"touch '{marker}'")),
        "eval": (
            "builtins.eval",
            Payload(eval, f"open({str(marker)!r}, 'w').close()"),
        ),
        "subprocess": (
            "subprocess.check_call",
            Payload(subprocess.check_call, ["touch", str(marker)]),
        ),
    }


# ------------------------------------------------------------------ benign files
def test_videopose3d_layout_npz_equals_np_load(tmp_path):
    rng = np.random.default_rng(0)
    d2, d3 = tmp_path / "data_2d_h36m_test.npz", tmp_path / "data_3d_h36m_test.npz"
    np.savez_compressed(d2, **vp3d_2d(rng))
    np.savez(d3, **vp3d_3d(rng))
    out = assert_matches_np_load(d2)
    assert out["positions_2d"].shape == () and out["positions_2d"].dtype == object
    pos = out["positions_2d"].item()
    assert pos["S1"]["Eating 2"][3].shape == (43, 17, 2)
    assert out["metadata"].item()["keypoints_symmetry"][0] == [4, 5, 6, 11, 12, 13]
    assert assert_matches_np_load(d3)["positions_3d"].item()["S11"]["Sitting"].dtype == np.float32


def test_custom_dataset_metadata_with_numpy_scalars(tmp_path):
    # VideoPose3D's prepare_data_2d_custom.py: per-video width/height in the metadata.
    meta = {
        "layout_name": "coco",
        "num_joints": 17,
        "keypoints_symmetry": [[1, 3, 5, 7, 9, 11, 13, 15], [2, 4, 6, 8, 10, 12, 14, 16]],
        "video_metadata": {"clip.mp4": {"w": np.int64(1920), "h": np.int32(1080)}},
        "misc": (1 + 2j, {3, 4}, frozenset({5}), b"", b"raw", None, True, 2.5, np.float16(1.5)),
    }
    p = tmp_path / "data_2d_custom_test.npz"
    pos = {"clip.mp4": {"custom": [np.full((5, 17, 2), np.nan, np.float32)]}}
    np.savez_compressed(p, positions_2d=pos, metadata=meta)
    out = assert_matches_np_load(p)
    assert out["metadata"].item()["video_metadata"]["clip.mp4"]["w"] == 1920


@pytest.mark.parametrize(
    "dtype",
    [
        "f4", ">f8", "i8", "u1", "?", "c16", "U7", "S3", "V5", "M8[ms]", "m8[3s]",
        [("x", "<f4"), ("y", ">i2", (2,))],
        [("a", [("b", "f8"), ("c", "O")])],
        np.dtype([("a", "i1"), ("b", "f8")], align=True),
        {"names": ["x", "y"], "formats": ["f4", "O"], "titles": ["tx", None], "offsets": [0, 8],
         "itemsize": 24},
        np.dtype("f8", metadata={"unit": "m"}),
        ("f4", (3, 2)),
        "O",
    ],
)  # fmt: skip
@pytest.mark.filterwarnings("ignore:metadata on a dtype is not saved")
def test_dtypes_inside_object_arrays_and_plain_members(tmp_path, dtype):
    """Every dtype both as a plain member and pickled inside an object member."""
    dt = np.dtype(dtype)
    arr = np.zeros((2, 3), dt)
    if not dt.hasobject:  # random bytes in every item
        flat = arr.reshape(-1).view(np.uint8)
        flat[:] = np.random.default_rng(1).integers(0, 256, flat.size)
    p = tmp_path / "x.npz"
    np.savez(p, plain=arr, fortran=np.asfortranarray(arr), wrapped={"a": arr, "s": arr[0, 0]})
    assert_matches_np_load(p)


def test_plain_numeric_npz_and_other_members(tmp_path):
    p = tmp_path / "plain.npz"
    rng = np.random.default_rng(2)
    np.savez_compressed(
        p, a=rng.standard_normal((4, 17, 3)), b=np.arange(5), c=np.float32(3), e=np.zeros((0, 3))
    )
    assert_matches_np_load(p, allow_pickle=False)
    with zipfile.ZipFile(p, "a") as zf:  # a member that is not .npy comes back as its bytes
        zf.writestr("notes.txt", b"hello")
    assert assert_matches_np_load(p)["notes.txt"] == b"hello"


def test_npy_format_version_3_header(tmp_path):
    arr = np.zeros(3, dtype=[("\u00e9t\u00e9", "f4")])  # non-latin1 field name: format 3.0
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, version=(3, 0))
    p = tmp_path / "v3.npz"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("a.npy", buf.getvalue())
    assert assert_matches_np_load(p)["a"].dtype.names == ("\u00e9t\u00e9",)


def test_safe_loads_random_state_only_when_admitted():
    rs = np.random.RandomState(3)
    rs.standard_normal(7)  # has_gauss set
    data = pickle.dumps(rs, protocol=2)
    with pytest.raises(UnsafePickleError, match=r"rng\.pkl.*__randomstate_ctor"):
        safe_loads(data, "rng.pkl")
    got = safe_loads(data, "rng.pkl", extra_globals=RANDOM_STATE_GLOBALS)
    assert isinstance(got, np.random.RandomState)
    assert np.array_equal(got.standard_normal(5), rs.standard_normal(5))


# ------------------------------------------------------------------ malicious files
@pytest.mark.parametrize("kind", ["os.system", "eval", "subprocess"])
@pytest.mark.parametrize("nesting", ["top", "nested"])
def test_code_executing_npz_is_refused(tmp_path, kind, nesting):
    marker = tmp_path / "PWNED"
    refused, payload = payloads(marker)[kind]
    data = vp3d_2d(np.random.default_rng(0))
    if nesting == "top":
        data["metadata"] = payload
    else:  # deep inside the dict of dicts of lists
        data["positions_2d"]["S9"]["SittingDown 1"].insert(2, {"cam": [payload]})
    p = tmp_path / "data_2d_evil.npz"
    np.savez(p, **data)
    # Control: numpy's own loader runs the payload, so this file is a real attack.
    with np.load(p, allow_pickle=True) as z:
        [z[k] for k in z.keys()]
    assert marker.exists()
    marker.unlink()
    member = "metadata" if nesting == "top" else "positions_2d"
    with pytest.raises(UnsafePickleError) as e:
        watched_load(p)
    assert str(p) in str(e.value) and repr(member) in str(e.value) and repr(refused) in str(e.value)
    assert isinstance(e.value, ValueError)
    assert not marker.exists() and _EVENTS == []


def op_global(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def op_str(s: str) -> bytes:
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def op_bytes(b: bytes) -> bytes:
    return b"B" + struct.pack("<I", len(b)) + b


def op_int(i: int) -> bytes:
    return b"K" + bytes([i])


NEW_DTYPE = op_global("numpy", "dtype")
ARRAY_STATE_HEAD = op_global("numpy._core.multiarray", "_reconstruct") + op_global(
    "numpy", "ndarray"
)
ARRAY_STATE_HEAD += op_int(0) + b"\x85" + op_bytes(b"b") + b"\x87R"


def dtype_op(typestr: str) -> bytes:
    return NEW_DTYPE + op_str(typestr) + b"\x89\x88\x87R"  # numpy.dtype(typestr, False, True)


OBJECT_FIELD_STATE = (  # the honest state of dtype([("a", "O")]) (object field at offset 0)
    b"(" + op_int(3) + op_str("|") + b"N" + op_str("a") + b"\x85}" + op_str("a")
    + dtype_op("O8") + op_int(0) + b"\x86s" + op_int(8) + op_int(1) + op_int(27) + b"t"
)  # fmt: skip


RECONSTRUCT = np.zeros(0).__reduce__()[0]  # numpy's _reconstruct, without numpy.core warnings


class Reduce:
    def __init__(self, *r):
        self.r = r

    def __reduce__(self):
        return self.r


@pytest.mark.parametrize(
    "name, data, message",
    [
        (  # numpy.ndarray(shape, object, buffer): an object array whose pointers are raw bytes
            "object array over bytes",
            pickle.dumps(Reduce(np.ndarray, ((2,), np.dtype("O"), b"A" * 16)), protocol=2),
            "ndarray",
        ),
        (  # dtype state with an object field but flags saying "no objects"
            "hidden object field",
            pickle.dumps(
                Reduce(np.dtype, ("V8", False, True),
                       (3, "|", None, ("a",), {"a": (np.dtype("O"), 0)}, 8, 1, 0)),
                protocol=2,
            ),
            "dtype state",
        ),
        (  # a field 1000 bytes past an 8-byte item: reads outside the array
            "field out of bounds",
            pickle.dumps(
                Reduce(np.dtype, ("V8", False, True),
                       (3, "|", None, ("a",), {"a": (np.dtype("f8"), 1000)}, 8, 1, 0)),
                protocol=2,
            ),
            "dtype state",
        ),
        (  # an object dtype with its object flags cleared: its data would be read as bytes
            "object dtype without flags",
            pickle.dumps(
                Reduce(np.dtype, ("O8", False, True), (3, "|", None, None, None, -1, -1, 0))
            ),
            "dtype state",
        ),
        (  # an array of V8 raw bytes whose dtype is rebuilt afterwards with an object field
            "dtype changed after use",
            b"\x80\x03" + dtype_op("V8") + b"q\x000" + ARRAY_STATE_HEAD
            + b"(" + op_int(1) + op_int(1) + b"\x85h\x00\x89" + op_bytes(b"A" * 8) + b"tbq\x010"
            + b"h\x00" + OBJECT_FIELD_STATE + b"b0h\x01.",
            "after the dtype was used",
        ),
        (  # the same dtype state set twice
            "dtype state set twice",
            b"\x80\x03" + dtype_op("V8") + b"(" + op_int(3) + op_str("|") + b"NNN" + op_int(8)
            + op_int(1) + op_int(0) + b"tb" + OBJECT_FIELD_STATE + b"b.",
            "set twice",
        ),
        (  # STACK_GLOBAL with a dotted name reaching an attribute of an allowed global
            "dotted name",
            b"\x80\x04" + op_str("numpy") + op_str("dtype.__init__") + b"\x93.",
            "numpy.dtype.__init__",
        ),
        ("getattr", pickle.dumps(Reduce(getattr, ("abc", "upper"))), "builtins.getattr"),
        ("reconstruct bomb", pickle.dumps(
            Reduce(RECONSTRUCT, (np.ndarray, (10**12,), b"b"))), "_reconstruct"),
    ],
)  # fmt: skip
def test_forged_numpy_states_are_refused(name, data, message):
    """Globals numpy's own loader admits, used to forge memory: refused, naming the source."""
    with pytest.raises(UnsafePickleError, match=message) as e:
        safe_loads(data, f"{name}.pkl")
    assert str(e.value).startswith(f"{name}.pkl: ")


def test_builtin_dtypes_are_never_mutated():
    # numpy.dtype("f8", copy=False) is numpy's shared float64; a BUILD on it would change it
    # for the whole process. The stand-in always makes a copy.
    data = pickle.dumps(
        Reduce(np.dtype, ("f8", False, False), (3, ">", None, None, None, -1, -1, 0))
    )
    got = safe_loads(data, "x")
    assert got == np.dtype(">f8")
    assert np.dtype("f8").byteorder == "=" and np.zeros(1).dtype.str == "<f8"


# ------------------------------------------------------------------ broken files
def test_truncated_and_corrupt_npz_raise_value_error_naming_the_file(tmp_path):
    good = tmp_path / "good.npz"
    np.savez(good, **vp3d_2d(np.random.default_rng(0)))
    raw = good.read_bytes()
    cases = {
        "empty.npz": b"",
        "garbage.npz": b"not a zip at all" * 10,
        "half.npz": raw[: len(raw) // 2],
        "short.npz": raw[:-30],
    }
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(ValueError, match=name):
            load_npz(p)
    # A valid zip whose .npy header or pickle is cut short: the message names the member too.
    with zipfile.ZipFile(good) as zf:
        member = zf.read("positions_2d.npy")
    for cut in (8, 20, len(member) // 2):
        p = tmp_path / f"member_cut_{cut}.npz"
        with zipfile.ZipFile(p, "w") as zf:
            zf.writestr("positions_2d.npy", member[:cut])
        with pytest.raises(ValueError, match=rf"member_cut_{cut}\.npz.*positions_2d"):
            load_npz(p)
    # A header that claims more data than the member holds is refused before allocating it.
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<f8", "fortran_order": False, "shape": (10**11,)}
    )
    p = tmp_path / "huge.npz"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("a.npy", buf.getvalue() + b"\0" * 64)
    with pytest.raises(ValueError, match=r"huge\.npz.*'a'.*needs 800000000000 bytes"):
        load_npz(p)
    with pytest.raises(FileNotFoundError):
        load_npz(tmp_path / "missing.npz")


# ------------------------------------------------------------------ fuzzing
class _Inert:
    """Stands in for every global while the names in a pickle are recorded: calling, building
    or filling one does nothing."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return _Inert()

    def __setstate__(self, state):
        pass

    def __setitem__(self, key, value):
        pass

    def append(self, item):
        pass

    def extend(self, items):
        pass


class _NameRecorder(pickle.Unpickler):
    """The standard unpickler, recording each global it is asked for and importing nothing."""

    def __init__(self, file):
        super().__init__(file, encoding="ASCII")
        self.names: list[str] = []

    def find_class(self, module, name):
        self.names.append(f"{module}.{name}")
        return _Inert


def _pickle_globals(member: bytes) -> list[str] | None:
    """Globals named by the pickle of an object .npy member ([] for numeric members, None when
    the header cannot be read), found by the standard unpickler with inert globals:
    independently of the loader under test."""
    f = io.BytesIO(member)
    try:
        np.lib.format.read_magic(f)
        _, _, dtype = np.lib.format.read_array_header_1_0(f)
    except Exception:
        return None
    if not dtype.hasobject:
        return []
    recorder = _NameRecorder(f)
    recorder.load()
    return recorder.names


ALLOWED = {
    "numpy._core.multiarray._reconstruct", "numpy.ndarray", "numpy.dtype",
    "numpy._core.multiarray.scalar", "builtins.set", "builtins.frozenset", "builtins.complex",
    "_codecs.encode", "builtins.bytes",
}  # fmt: skip


def test_fuzzed_npz_loads_the_same_as_numpy_or_raises_naming_the_file(tmp_path):
    """200 seeded mutations of a benign and of a malicious VideoPose3D-layout npz: byte flips and
    truncations of the file, and of a member re-zipped with a valid CRC (so the .npy header and
    the pickle see the damage). Each either loads exactly as np.load does, with only admitted
    globals in its pickles, or raises ValueError naming the file; nothing ever runs."""
    rng = random.Random(20240607)
    marker = tmp_path / "PWNED"
    benign, evil = tmp_path / "benign.npz", tmp_path / "evil.npz"
    data = vp3d_2d(np.random.default_rng(3))
    data["metadata"]["video_metadata"] = {"v": {"w": np.int64(640), "h": 480}}
    np.savez(benign, **data)
    data["metadata"]["hook"] = payloads(marker)["os.system"][1]
    np.savez(evil, **data)
    originals = {p: p.read_bytes() for p in (benign, evil)}
    loaded = refused = 0
    for i in range(200):
        src = benign if i % 2 == 0 else evil
        raw = originals[src]
        p = tmp_path / f"case{i:03d}.npz"
        if i % 4 < 2:  # the file: flips or a truncation
            b = bytearray(raw)
            if rng.random() < 0.3:
                b = b[: rng.randrange(len(b))]
            else:
                for _ in range(rng.randint(1, 4)):
                    b[rng.randrange(len(b))] = rng.randrange(256)
            p.write_bytes(bytes(b))
        else:  # one member: flips or a truncation, re-zipped
            with zipfile.ZipFile(io.BytesIO(raw)) as zf:
                members = {n: zf.read(n) for n in zf.namelist()}
            name = rng.choice(sorted(members))
            b = bytearray(members[name])
            if rng.random() < 0.3:
                b = b[: rng.randrange(len(b))]
            else:
                for _ in range(rng.randint(1, 3)):
                    b[rng.randrange(len(b))] = rng.randrange(256)
            members[name] = bytes(b)
            with zipfile.ZipFile(p, "w") as zf:
                for n, m in members.items():
                    zf.writestr(n, m)
        try:
            out = watched_load(p)
        except ValueError as e:
            assert str(p) in str(e), f"case {i}: {e}"
            refused += 1
        else:
            with zipfile.ZipFile(p) as zf:
                for n in zf.namelist():
                    names = _pickle_globals(zf.read(n))
                    assert names is None or set(names) <= ALLOWED, f"case {i}: {n} {names}"
            with np.load(p, allow_pickle=True) as ref:  # safe: only admitted globals
                assert list(out) == list(ref.keys())
                for k in ref.keys():
                    assert_same(out[k], ref[k], f"case {i} {k}")
            loaded += 1
        assert not marker.exists(), f"case {i} ran the payload"
        assert _EVENTS == [], f"case {i}: {_EVENTS}"
    assert loaded > 10 and refused > 50  # both outcomes exercised
