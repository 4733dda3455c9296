"""Loading pickled data without running code from it.

``np.load(..., allow_pickle=True)`` and ``torch.load(..., weights_only=False)`` unpickle with
the full pickle machinery: a crafted file names any importable callable (``posix.system``,
``builtins.eval``, ``subprocess.Popen``) and unpickling calls it. Here unpickling goes through
:class:`RestrictedUnpickler`, which admits only:

- plain Python data: ``dict``, ``list``, ``tuple``, ``set``, ``frozenset``, ``str``, ``bytes``,
  ``int``, ``float``, ``complex``, ``bool``, ``None``;
- numpy arrays, dtypes and scalars. numpy's reconstruction globals
  (``numpy._core.multiarray._reconstruct`` / ``scalar``, ``numpy.ndarray``, ``numpy.dtype``,
  also under their ``numpy.core`` names) are replaced by checked stand-ins that accept exactly
  the calls and states numpy's own pickles contain. Beyond refusing names, they refuse states
  that numpy would accept but that forge memory: an object array over raw bytes
  (``numpy.ndarray(shape, object, buffer)``), a dtype whose fields lie outside its items or
  whose flags hide object fields, a dtype changed after an array or another dtype used it;
- per call, the ``extra_globals`` a format needs: :data:`RANDOM_STATE_GLOBALS` (a pickled
  ``numpy.random.RandomState``) and, in :func:`torch_load`, the tensor rebuild functions of
  ``torch.save``.

Anything else raises :class:`UnsafePickleError` (a ``ValueError``) naming the file and the
refused global, before anything is called. :func:`load_npz` reads ``.npz`` files this way
(VideoPose3D's ``data_2d_*.npz`` / ``data_3d_*.npz`` keep dicts in object arrays) and returns what
``np.load(path, allow_pickle=True)`` returns for benign files.

The unpickler is the standard library's pure-Python one (``pickle._Unpickler``) with its
risky opcodes (``REDUCE``, ``BUILD``, ``NEWOBJ``, ``INST``/``OBJ``, item and append opcodes)
overridden: the C unpickler cannot check ``BUILD``.
"""

from __future__ import annotations

import _compat_pickle
import ast
import collections
import io
import math
import pickle
import struct
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

import numpy as np

from ..errors import InputError, MissingFileError

__all__ = [
    "RANDOM_STATE_GLOBALS",
    "RestrictedUnpickler",
    "UnsafePickleError",
    "load_npz",
    "safe_loads",
]

_MAX_HEADER = 1 << 20  # .npy header bytes accepted (numpy's own limit is 10000 without pickles)


class UnsafePickleError(InputError):
    """A pickle asked for something outside the allowlist; the message names the file and the
    refused global (or state)."""


class _StandIn:
    """A non-callable placeholder for a class that pickles may name but never call."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<stand-in for {self.name}>"


_NDARRAY = _StandIn("numpy.ndarray")
_NP_RECONSTRUCT = np.ndarray.__reduce__(np.zeros(0))[0]  # numpy's own _reconstruct
_NP_SCALAR = np.float64(0).__reduce__()[0]  # numpy's own scalar
_NP_FROMBUFFER = np.zeros(0).__reduce_ex__(5)[0]  # numpy's own _frombuffer (pickle protocol 5)
_ALIGNED_STRUCT = 0x80  # NPY_ALIGNED_STRUCT in dtype flags


# ---------------------------------------------------------------- module-level stand-ins
def _encode(obj: Any, encoding: Any = "utf-8") -> bytes:
    """``_codecs.encode`` as protocol-2 pickles use it for bytes: ``(str, "latin1")``."""
    if type(obj) is not str or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError("_codecs.encode is only allowed as (str, 'latin1')")
    return obj.encode("latin1")


def _empty_bytes(*args: Any) -> bytes:
    """``builtins.bytes`` as protocol-2 pickles use it: ``bytes()`` for ``b''``."""
    if args:
        raise pickle.UnpicklingError("builtins.bytes is only allowed without arguments")
    return b""


def _bit_generator_ctor(bit_generator: Any = "MT19937") -> np.random.MT19937:
    """``numpy.random._pickle.__bit_generator_ctor`` restricted to MT19937."""
    if bit_generator not in ("MT19937", np.random.MT19937):
        raise pickle.UnpicklingError(
            f"only the MT19937 bit generator is allowed, got {bit_generator!r}"
        )
    return np.random.MT19937()


def _randomstate_ctor(
    bit_generator_name: Any = "MT19937", bit_generator_ctor: Any = _bit_generator_ctor
) -> np.random.RandomState:
    """``numpy.random._pickle.__randomstate_ctor`` (numpy >= 1.17) restricted to MT19937."""
    if bit_generator_ctor is not _bit_generator_ctor:
        raise pickle.UnpicklingError("__randomstate_ctor: unexpected bit generator constructor")
    if isinstance(bit_generator_name, np.random.MT19937):
        return np.random.RandomState(bit_generator_name)
    return np.random.RandomState(_bit_generator_ctor(bit_generator_name))


def _legacy_randomstate_ctor() -> np.random.RandomState:
    """``numpy.random.__RandomState_ctor`` (numpy < 1.17): a RandomState whose state BUILD sets."""
    return np.random.RandomState(0)


RANDOM_STATE_GLOBALS: dict[str, Any] = {
    "numpy.random._pickle.__randomstate_ctor": _randomstate_ctor,
    "numpy.random._pickle.__bit_generator_ctor": _bit_generator_ctor,
    "numpy.random._mt19937.MT19937": np.random.MT19937,
    "numpy.random.__RandomState_ctor": _legacy_randomstate_ctor,
    "numpy.random.mtrand.__RandomState_ctor": _legacy_randomstate_ctor,
}
"""Extra globals for a pickled ``numpy.random.RandomState`` (MT19937), as VideoPose3D saves it in
its checkpoints' ``random_state``; its state is checked by numpy's own ``__setstate__``."""

_BASE_GLOBALS: dict[str, Any] = {
    "builtins.set": set,
    "builtins.frozenset": frozenset,
    "builtins.complex": complex,
    "builtins.bytes": _empty_bytes,
    "_codecs.encode": _encode,
    "numpy.ndarray": _NDARRAY,
    # numpy.dtype / _reconstruct / scalar are bound per unpickler (they track dtypes and arrays).
}
_NUMPY_BOUND = {
    "numpy.dtype": "_make_dtype",
    "numpy.core.multiarray._reconstruct": "_reconstruct",
    "numpy._core.multiarray._reconstruct": "_reconstruct",
    "numpy.core.multiarray.scalar": "_scalar",
    "numpy._core.multiarray.scalar": "_scalar",
    "numpy.core.numeric._frombuffer": "_frombuffer",
    "numpy._core.numeric._frombuffer": "_frombuffer",
}
# Classes a NEWOBJ may instantiate, and types whose state BUILD may set (beyond ndarray/dtype).
_NEWOBJ_TYPES = (set, frozenset, complex, collections.OrderedDict)
_BUILD_TYPES = (np.random.RandomState, np.random.MT19937, collections.OrderedDict)


def _safe_equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False


def _is_shape(shape: Any) -> bool:
    return type(shape) is tuple and all(type(n) is int and n >= 0 for n in shape)


def _reference_dtype(inst: np.dtype, state: Any) -> np.dtype:
    """The dtype numpy's constructor builds from what ``state`` describes (raises if none)."""
    if type(state) is not tuple or len(state) not in (8, 9) or state[0] not in (3, 4):
        raise pickle.UnpicklingError(f"unsupported dtype state {state!r}")
    _, endian, subarray, names, fields, elsize, _alignment, flags = state[:8]
    extra = state[8] if len(state) == 9 else None
    if type(endian) is not str or type(elsize) is not int or type(flags) is not int:
        raise pickle.UnpicklingError(f"malformed dtype state {state!r}")
    metadata = extra
    if subarray is not None:
        if type(subarray) is not tuple or len(subarray) != 2:
            raise pickle.UnpicklingError(f"malformed dtype subarray {subarray!r}")
        base, shape = subarray
        if not isinstance(base, np.dtype) or not _is_shape(shape):
            raise pickle.UnpicklingError(f"malformed dtype subarray {subarray!r}")
        ref = np.dtype((base, shape))
    elif names is not None:
        if type(names) is not tuple or type(fields) is not dict:
            raise pickle.UnpicklingError("malformed structured dtype state")
        formats, offsets, titles = [], [], []
        for n in names:
            f = fields.get(n) if type(n) is str else None
            if type(f) is not tuple or len(f) not in (2, 3) or not isinstance(f[0], np.dtype):
                raise pickle.UnpicklingError(f"malformed dtype field {n!r}: {f!r}")
            if type(f[1]) is not int:
                raise pickle.UnpicklingError(f"malformed dtype field offset {n!r}: {f!r}")
            formats.append(f[0])
            offsets.append(f[1])
            titles.append(f[2] if len(f) == 3 else None)
        spec = {"names": list(names), "formats": formats, "offsets": offsets, "itemsize": elsize}
        if any(t is not None for t in titles):
            spec["titles"] = titles
        ref = np.dtype(spec, align=bool(flags & _ALIGNED_STRUCT))
    else:
        kind = inst.kind
        if kind in "SUV":
            size = elsize // 4 if kind == "U" else elsize
            ref = np.dtype(f"{kind}{size}")
        elif kind in "mM":
            if type(extra) is not tuple or len(extra) != 2 or type(extra[1]) is not tuple:
                raise pickle.UnpicklingError(f"malformed datetime dtype state {state!r}")
            metadata, (unit, num, _den, _events) = extra[0], extra[1]
            if type(unit) is not bytes or type(num) is not int:
                raise pickle.UnpicklingError(f"malformed datetime dtype state {state!r}")
            ref = np.dtype(f"{kind}8" if unit == b"generic" else f"{kind}8[{num}{unit.decode()}]")
        else:
            ref = np.dtype(inst.char)
        if endian in "<>" and ref.byteorder != "|":
            ref = ref.newbyteorder(endian)
    if metadata is not None:
        if type(metadata) is not dict:
            raise pickle.UnpicklingError(f"malformed dtype metadata {metadata!r}")
        ref = np.dtype(ref, metadata=metadata)
    return ref


class RestrictedUnpickler(pickle._Unpickler):
    """An unpickler that admits only plain data and numpy arrays (see the module docstring).

    Args:
        file: binary stream positioned at the pickle.
        source: what is being read, for error messages (a path, ``"path (member 'x')"``).
        extra_globals: further admitted globals, ``"module.name" -> object`` (e.g.
            :data:`RANDOM_STATE_GLOBALS`). Each must be safe to call with any arguments that
            are themselves admitted objects.
        encoding, errors, fix_imports: as for :class:`pickle.Unpickler` (numpy's ``np.load``
            uses ``encoding="ASCII"``).

    Raises:
        UnsafePickleError: a refused global or a forged numpy state (message names ``source``).
        pickle.UnpicklingError: malformed data.
    """

    dispatch: ClassVar[dict[int, Callable[..., None]]] = dict(pickle._Unpickler.dispatch)

    def __init__(
        self,
        file: BinaryIO,
        *,
        source: str,
        extra_globals: Mapping[str, Any] | None = None,
        encoding: str = "ASCII",
        errors: str = "strict",
        fix_imports: bool = True,
    ) -> None:
        super().__init__(file, fix_imports=fix_imports, encoding=encoding, errors=errors)
        self.source = source
        self._globals: dict[str, Any] = dict(_BASE_GLOBALS)
        for name, attr in _NUMPY_BOUND.items():
            self._globals[name] = getattr(self, attr)
        self._globals.update(extra_globals or {})
        # Identity of every admitted callable: REDUCE/INST/OBJ may call only these.
        self._callables = {id(v): v for v in self._globals.values() if callable(v)}
        self._fresh_dtypes: dict[int, np.dtype] = {}  # made by numpy.dtype, state not yet set
        self._fresh_arrays: dict[int, np.ndarray] = {}  # made by _reconstruct, state not yet set

    # ------------------------------------------------------------------ globals
    def find_class(self, module: str, name: str) -> Any:
        if self.proto < 3 and self.fix_imports:  # Python 2 names (__builtin__, copy_reg, ...)
            if (module, name) in _compat_pickle.NAME_MAPPING:
                module, name = _compat_pickle.NAME_MAPPING[(module, name)]
            elif module in _compat_pickle.IMPORT_MAPPING:
                module = _compat_pickle.IMPORT_MAPPING[module]
        full = f"{module}.{name}"
        if full not in self._globals:
            raise UnsafePickleError(
                f"{self.source}: refused pickled global {full!r}: only numpy arrays and plain "
                "Python data may be unpickled (the file may be trying to run code)"
            )
        return self._globals[full]

    def _refuse(self, what: str) -> UnsafePickleError:
        return UnsafePickleError(f"{self.source}: refused {what}")

    def _call(self, func: Any, args: Any) -> Any:
        if self._callables.get(id(func)) is not func:
            raise self._refuse(f"call of {func!r}: not an admitted global")
        if type(args) is not tuple:
            raise pickle.UnpicklingError(f"arguments of {func!r} must be a tuple")
        return func(*args)

    # ------------------------------------------------------------------ risky opcodes
    def load_reduce(self) -> None:
        args = self.stack.pop()
        self.stack[-1] = self._call(self.stack[-1], args)

    dispatch[pickle.REDUCE[0]] = load_reduce

    def _instantiate(self, klass: Any, args: Any) -> None:  # INST and OBJ
        self.append(self._call(klass, tuple(args)))

    def load_newobj(self) -> None:
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(self._newobj(cls, args, {}))

    def load_newobj_ex(self) -> None:
        kwargs = self.stack.pop()
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(self._newobj(cls, args, kwargs))

    def _newobj(self, cls: Any, args: Any, kwargs: Any) -> Any:
        if cls not in _NEWOBJ_TYPES or self._callables.get(id(cls)) is not cls:
            raise self._refuse(f"creating an instance of {cls!r}")
        if type(args) is not tuple or type(kwargs) is not dict:
            raise pickle.UnpicklingError("malformed NEWOBJ arguments")
        return cls.__new__(cls, *args, **kwargs)

    dispatch[pickle.NEWOBJ[0]] = load_newobj
    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex

    def load_build(self) -> None:
        state = self.stack.pop()
        inst = self.stack[-1]
        if isinstance(inst, np.dtype):
            self._build_dtype(inst, state)
        elif type(inst) is np.ndarray:
            self._build_array(inst, state)
        elif type(inst) in _BUILD_TYPES:  # only admitted globals can have made one
            if isinstance(inst, collections.OrderedDict):  # attributes, e.g. torch's _metadata
                if type(state) is not dict or any(
                    type(k) is not str or k.startswith("__") for k in state
                ):
                    raise self._refuse(f"state {state!r} for an OrderedDict")
                inst.__dict__.update(state)
            else:  # numpy's RandomState / MT19937 validate their own states
                inst.__setstate__(state)
        else:
            raise self._refuse(f"setting the state of a {type(inst).__name__}")

    dispatch[pickle.BUILD[0]] = load_build

    def _container(self, kinds: tuple[type, ...]) -> Any:
        obj = self.stack[-1]
        if type(obj) not in kinds:
            raise pickle.UnpicklingError(f"cannot add items to a {type(obj).__name__}")
        return obj

    def load_append(self) -> None:
        value = self.stack.pop()
        self._container((list,)).append(value)

    def load_appends(self) -> None:
        items = self.pop_mark()
        self._container((list,)).extend(items)

    def load_setitem(self) -> None:
        value = self.stack.pop()
        key = self.stack.pop()
        self._container((dict, collections.OrderedDict))[key] = value

    def load_setitems(self) -> None:
        items = self.pop_mark()
        d = self._container((dict, collections.OrderedDict))
        for i in range(0, len(items), 2):  # pairs of one pickle opcode's items, not data
            d[items[i]] = items[i + 1]

    def load_additems(self) -> None:
        items = self.pop_mark()
        self._container((set,)).update(items)

    dispatch[pickle.APPEND[0]] = load_append
    dispatch[pickle.APPENDS[0]] = load_appends
    dispatch[pickle.SETITEM[0]] = load_setitem
    dispatch[pickle.SETITEMS[0]] = load_setitems
    dispatch[pickle.ADDITEMS[0]] = load_additems

    # ------------------------------------------------------------------ numpy stand-ins
    def _seal(self, dtype: np.dtype) -> None:
        """Once a dtype is used (by an array, a scalar or another dtype) its state is final."""
        self._fresh_dtypes.pop(id(dtype), None)

    def _make_dtype(self, obj: Any, align: Any = False, copy: Any = False) -> np.dtype:
        """``numpy.dtype(typestr, align, copy)`` as numpy pickles it; always a fresh object (a
        later BUILD must never touch numpy's shared built-in dtypes)."""
        if type(obj) is bytes:
            obj = obj.decode("ascii")
        if type(obj) is not str or align not in (0, 1) or copy not in (0, 1):
            raise self._refuse(f"numpy.dtype{(obj, align, copy)!r}: numpy pickles a type string")
        dt = np.dtype(obj, align=bool(align), copy=True)
        self._fresh_dtypes[id(dt)] = dt
        return dt

    def _build_dtype(self, inst: np.dtype, state: Any) -> None:
        if self._fresh_dtypes.pop(id(inst), None) is not inst:
            raise self._refuse("a dtype state set twice or after the dtype was used")
        try:
            ref = _reference_dtype(inst, state)
        except (TypeError, ValueError, KeyError, OverflowError) as e:
            raise self._refuse(f"dtype state {state!r}: {e}") from None
        if type(ref) is not type(inst) or not _safe_equal(ref.__reduce__()[2], state):
            raise self._refuse(
                f"dtype state {state!r}: not a dtype numpy builds (forged fields, offsets, "
                "size or flags)"
            )
        for sub in [*(f[0] for f in (ref.fields or {}).values()), *(ref.subdtype or ())[:1]]:
            self._seal(sub)
        inst.__setstate__(state)
        if not _safe_equal(inst.__reduce__(), ref.__reduce__()):
            raise self._refuse(f"dtype state {state!r}: numpy built something else")

    def _reconstruct(self, subtype: Any, shape: Any, typecode: Any) -> np.ndarray:
        """``numpy._core.multiarray._reconstruct(ndarray, (0,), b"b")``: the only call numpy's
        array pickles make; BUILD then sets the real shape, dtype and data."""
        if subtype is not _NDARRAY or shape != (0,) or typecode not in (b"b", "b"):
            raise self._refuse(f"_reconstruct{(subtype, shape, typecode)!r}")
        arr = _NP_RECONSTRUCT(np.ndarray, (0,), b"b")
        self._fresh_arrays[id(arr)] = arr
        return arr

    def _build_array(self, inst: np.ndarray, state: Any) -> None:
        if self._fresh_arrays.pop(id(inst), None) is not inst:
            raise self._refuse("an array state set twice")
        if type(state) is not tuple or len(state) not in (4, 5):
            raise pickle.UnpicklingError(f"malformed array state of length {len(state)}")
        if len(state) == 5 and state[0] != 1:
            raise pickle.UnpicklingError(f"unsupported array state version {state[0]!r}")
        shape, dtype, _fortran, data = state[-4:]
        if not _is_shape(shape) or not isinstance(dtype, np.dtype):
            raise pickle.UnpicklingError(f"malformed array state (shape {shape!r})")
        self._seal(dtype)
        count = math.prod(shape)
        if dtype.hasobject:  # numpy stores the objects as a list
            if type(data) is not list or len(data) != count:
                raise self._refuse(f"object array data of type {type(data).__name__}")
        else:
            if type(data) is str:  # Python 2 pickles read with encoding="latin1"
                data = data.encode("latin1")
            if type(data) not in (bytes, bytearray) or len(data) != count * dtype.itemsize:
                raise pickle.UnpicklingError(
                    f"array data of {len(data) if hasattr(data, '__len__') else '?'} bytes for "
                    f"shape {shape} of {dtype}"
                )
        inst.__setstate__(state)

    def _frombuffer(self, buf: Any, dtype: Any, shape: Any, order: Any) -> np.ndarray:
        """``numpy._core.numeric._frombuffer(buffer, dtype, shape, order)`` (protocol 5 pickles
        of arrays without objects, buffers in band)."""
        if not isinstance(dtype, np.dtype) or dtype.hasobject or not _is_shape(shape):
            raise self._refuse(f"_frombuffer of {dtype!r} with shape {shape!r}")
        self._seal(dtype)
        if type(buf) not in (bytes, bytearray) or order not in ("C", "F"):
            raise pickle.UnpicklingError("_frombuffer needs in-band bytes and order 'C' or 'F'")
        if len(buf) != math.prod(shape) * dtype.itemsize:
            raise pickle.UnpicklingError(f"{len(buf)} bytes for shape {shape} of {dtype}")
        return _NP_FROMBUFFER(buf, dtype, shape, order)

    def _scalar(self, dtype: Any, obj: Any = None) -> Any:
        """``numpy._core.multiarray.scalar(dtype, obj)``: raw bytes of one item, or for a
        structured dtype with object fields a 0-d array of it (already checked by BUILD)."""
        if not isinstance(dtype, np.dtype) or (dtype.hasobject and dtype.names is None):
            raise self._refuse(f"numpy scalar of {dtype!r}")
        self._seal(dtype)
        if dtype.hasobject:
            if type(obj) is not np.ndarray or obj.dtype != dtype or obj.shape != ():
                raise self._refuse(f"numpy scalar of {dtype!r} from {type(obj).__name__}")
            return _NP_SCALAR(dtype, obj)
        if type(obj) is str:
            obj = obj.encode("latin1")
        if type(obj) is not bytes or len(obj) != dtype.itemsize:
            raise pickle.UnpicklingError(f"numpy scalar of {dtype} from {type(obj).__name__}")
        return _NP_SCALAR(dtype, obj)


def safe_loads(
    data: bytes,
    source: str,
    *,
    extra_globals: Mapping[str, Any] | None = None,
    encoding: str = "ASCII",
) -> Any:
    """Unpickle ``data`` with :class:`RestrictedUnpickler`.

    Args:
        data: the pickle.
        source: what it came from, for error messages.
        extra_globals: further admitted globals (e.g. :data:`RANDOM_STATE_GLOBALS`).
        encoding: for Python 2 ``str`` objects.

    Raises:
        UnsafePickleError: a refused global (the message names ``source`` and the global).
        ValueError: malformed data (naming ``source``).

    Example:
        >>> import pickle
        >>> safe_loads(pickle.dumps({"a": np.arange(3)}), "example")["a"]
        array([0, 1, 2])
        >>> safe_loads(pickle.dumps(eval), "x")
        Traceback (most recent call last):
        ...
        tensorpose.io.safe_pickle.UnsafePickleError: x: refused pickled global 'builtins.eval'...
    """
    f = io.BytesIO(data)
    return _load(
        lambda: RestrictedUnpickler(
            f, source=source, extra_globals=extra_globals, encoding=encoding
        ).load(),
        source,
    )


def _load(fn: Callable[[], Any], source: str) -> Any:
    try:
        return fn()
    except (UnsafePickleError, FileNotFoundError):
        raise
    except Exception as e:  # malformed input raises anything from EOFError to RecursionError
        raise InputError(
            f"{source}: damaged, or not a file of this kind (its data stream does not decode: "
            f"{type(e).__name__} {e})"
        ) from None


# ---------------------------------------------------------------- .npz
def _read_exact(f: BinaryIO, n: int) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise ValueError(f"truncated .npy header: wanted {n} bytes, got {len(data)}")
    return data


def _read_header(f: BinaryIO) -> tuple[tuple[int, ...], bool, np.dtype]:
    """``(shape, fortran_order, dtype)`` of the .npy stream ``f`` (left at the data)."""
    fmt = np.lib.format
    version = fmt.read_magic(f)
    if version == (1, 0):
        return fmt.read_array_header_1_0(f, max_header_size=_MAX_HEADER)
    if version == (2, 0):
        return fmt.read_array_header_2_0(f, max_header_size=_MAX_HEADER)
    if version != (3, 0):
        raise ValueError(f"unsupported .npy format version {version}")
    # Version 3.0 is 2.0 with a UTF-8 header (numpy has no public reader for it).
    (size,) = struct.unpack("<I", _read_exact(f, 4))
    if size > _MAX_HEADER:
        raise ValueError(f".npy header of {size} bytes exceeds {_MAX_HEADER}")
    d = ast.literal_eval(_read_exact(f, size).decode("utf8"))
    if type(d) is not dict or set(d) != {"descr", "fortran_order", "shape"}:
        raise ValueError(f"malformed .npy header {d!r}")
    if not _is_shape(d["shape"]) or type(d["fortran_order"]) is not bool:
        raise ValueError(f"malformed .npy header {d!r}")
    return d["shape"], d["fortran_order"], fmt.descr_to_dtype(d["descr"])


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, source: str) -> Any:
    with zf.open(info) as f:
        magic = f.read(len(np.lib.format.MAGIC_PREFIX))
    if magic != np.lib.format.MAGIC_PREFIX:
        return zf.read(info)  # as np.load: a member that is not .npy comes back as bytes
    with zf.open(info) as f:
        shape, _, dtype = _read_header(f)
        if dtype.hasobject:  # the rest is a pickle of the array: restricted
            return RestrictedUnpickler(f, source=source, encoding="ASCII").load()
        need = math.prod(shape) * dtype.itemsize
        if need > info.file_size:  # refuse before numpy allocates a forged size
            raise ValueError(
                f"array of shape {shape} and {dtype} needs {need} bytes, the member "
                f"holds {info.file_size}"
            )
    with zf.open(info) as f:
        return np.lib.format.read_array(f, allow_pickle=False, max_header_size=_MAX_HEADER)


def load_npz(path: str | Path) -> dict[str, np.ndarray | Any]:
    """Read every member of an ``.npz`` without executing code from it.

    Numeric members are read by numpy with ``allow_pickle=False``; object arrays (VideoPose3D's
    ``positions_2d`` / ``positions_3d`` dicts, ``metadata``) have their ``.npy`` header parsed by
    ``numpy.lib.format`` and their pickle decoded by :class:`RestrictedUnpickler`. The values are
    what ``np.load(path, allow_pickle=True)[key]`` gives for benign files (0-d object arrays
    included: use ``.item()`` for the dict); members that are not ``.npy`` come back as bytes.

    Args:
        path: the ``.npz`` file.

    Returns:
        ``{member name without .npy: array}`` in file order.

    Raises:
        FileNotFoundError: no such file.
        UnsafePickleError: an object member refers to a global outside the allowlist (the message
            names the file, the member and the global).
        ValueError: not a readable .npz, or a member cannot be parsed (naming file and member).
    """
    path = Path(path)
    try:
        zf = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise MissingFileError(f"{path}: no such file") from None
    except Exception as e:
        raise InputError(f"{path}: not a readable .npz (zip) file: {e}") from None
    out: dict[str, Any] = {}
    with zf:
        for info in zf.infolist():
            key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            source = f"{path} (member {key!r})"
            out[key] = _load(
                lambda info=info, source=source: _read_member(zf, info, source), source
            )
    return out
