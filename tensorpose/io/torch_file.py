"""``torch.save`` files read without running code from them: the restricted unpickler of
:mod:`tensorpose.io.safe_pickle` with torch's tensor rebuild functions, and TorchScript archives
refused before ``torch.load`` (which would hand them to ``torch.jit.load``)."""

from __future__ import annotations

import collections
import pickle
import types
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

import torch

from .files import check_regular_file
from .safe_pickle import RestrictedUnpickler, UnsafePickleError, _load

__all__ = ["MAX_TORCH_BYTES", "refuse_torchscript", "torch_load"]

MAX_TORCH_BYTES = 4 << 30
"""Largest torch file read (4 GiB)."""


def _tensor_globals() -> dict[str, Any]:
    from torch import _utils

    def no_hooks(hooks: Any) -> None:
        if hooks is not None and (type(hooks) not in (dict, collections.OrderedDict) or hooks):
            raise pickle.UnpicklingError("tensors with backward hooks are not loaded")

    def storage(s: Any) -> Any:
        if not isinstance(s, torch.storage.TypedStorage):
            raise pickle.UnpicklingError(f"a tensor needs a storage, got {type(s).__name__}")
        return s

    def rebuild_tensor_v2(s, offset, size, stride, requires_grad, hooks, metadata=None):
        no_hooks(hooks)
        if metadata:
            raise pickle.UnpicklingError("tensor metadata is not loaded")
        return _utils._rebuild_tensor_v2(
            storage(s), offset, size, stride, bool(requires_grad), collections.OrderedDict()
        )

    def rebuild_tensor(s, offset, size, stride):
        return _utils._rebuild_tensor(storage(s), offset, size, stride)

    def rebuild_parameter(data, requires_grad, hooks):
        no_hooks(hooks)
        if not isinstance(data, torch.Tensor):
            raise pickle.UnpicklingError("a parameter needs a tensor")
        return torch.nn.Parameter(data, bool(requires_grad))

    return {
        "torch._utils._rebuild_tensor_v2": rebuild_tensor_v2,
        "torch._utils._rebuild_tensor": rebuild_tensor,
        "torch._utils._rebuild_parameter": rebuild_parameter,
        "collections.OrderedDict": collections.OrderedDict,
    }


def refuse_torchscript(path: str | Path) -> None:
    """Refuse a TorchScript archive: ``torch.load`` hands one to ``torch.jit.load``, which runs
    the archive's compiled code (its ``__setstate__``) while loading.

    Raises:
        UnsafePickleError: naming the file.
    """
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return  # not a zip archive: the legacy format, read by the restricted unpickler
    if any(n == "constants.pkl" or n.endswith("/constants.pkl") for n in names):
        raise UnsafePickleError(
            f"{path}: a TorchScript archive (compiled code), not a checkpoint: refused, "
            "TorchScript is never loaded from a file"
        )


def torch_load(
    path: str | Path,
    *,
    map_location: str | torch.device = "cpu",
    extra_globals: Mapping[str, Any] | None = None,
) -> Any:
    """``torch.load`` of a file written by ``torch.save`` (zip or legacy format), unpickled by
    :class:`RestrictedUnpickler`: tensors, plain data, numpy arrays and ``extra_globals``.

    ``torch.load(weights_only=True)`` would refuse a pickled numpy ``RandomState``, and
    allowlisting numpy's raw ``ndarray``/``dtype`` there admits the forged object arrays and
    dtypes this module refuses.

    Raises:
        UnsafePickleError: a refused global or a TorchScript archive (naming the file).
        ValueError: not a regular file, over the size limit, or not a readable torch file
            (naming the file).
    """
    source = str(path)
    check_regular_file(path, MAX_TORCH_BYTES, "model file")
    refuse_torchscript(path)
    admitted = {**_tensor_globals(), **(extra_globals or {})}

    class Unpickler(RestrictedUnpickler):
        def __init__(self, file: BinaryIO, **kwargs: Any) -> None:
            super().__init__(file, source=source, extra_globals=admitted, **kwargs)

    module = types.SimpleNamespace(
        __name__=__name__,
        Unpickler=Unpickler,
        load=lambda f, **kwargs: Unpickler(f, **kwargs).load(),
    )
    return _load(
        lambda: torch.load(
            path, map_location=map_location, pickle_module=module, weights_only=False
        ),
        source,
    )
