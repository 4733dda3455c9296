"""Row compaction for the triangulation ops: on CPU compute only the rows that need it
(``nonzero``, free there); on other devices every row at fixed shapes, without a host
synchronisation. Both give the same values (tested)."""

from __future__ import annotations

import torch

COMPACT_ON_CPU = True
"""On CPU, work only on the rows that need it (see :func:`_on_rows`); same values."""


def _compact(device: torch.device) -> bool:
    """Whether to compact rows with ``nonzero`` (CPU, eager): free there, a host
    synchronisation elsewhere. ``COMPACT_ON_CPU = False`` runs the fixed-shape path on CPU."""
    return device.type == "cpu" and COMPACT_ON_CPU and not torch.compiler.is_compiling()


def _on_rows(mask: torch.Tensor, fn, inputs: list[torch.Tensor], fills: list) -> tuple:
    """``fn(*rows) -> outputs`` for the rows where ``mask (...)`` holds; ``fills`` elsewhere.

    Every row is independent, so the values do not depend on the path: on CPU only the masked
    rows are computed (compacted with ``nonzero``, free there); on other devices every row is
    computed at fixed shapes and then masked, without a host synchronisation.
    """
    shape = mask.shape
    if not _compact(mask.device):
        outs = fn(*inputs)
        return tuple(
            torch.where(mask.view(*shape, *[1] * (o.dim() - len(shape))), o, fill)
            for o, fill in zip(outs, fills, strict=True)
        )
    idx = mask.reshape(-1).nonzero().squeeze(-1)
    outs = fn(*[x.reshape(-1, *x.shape[len(shape) :]).index_select(0, idx) for x in inputs])
    result = []
    for o, fill in zip(outs, fills, strict=True):  # the function's few outputs
        full = torch.full((mask.numel(), *o.shape[1:]), fill, dtype=o.dtype, device=o.device)
        result.append(full.index_copy_(0, idx, o).reshape(*shape, *o.shape[1:]))
    return tuple(result)
