"""Processes and devices: the device of this process, joining a ``torchrun`` process group,
wrapping the model in DistributedDataParallel, and reducing host numbers over ranks.

Under ``torchrun`` (``WORLD_SIZE`` > 1) every process trains a shard of each global batch with
DDP (NCCL on CUDA, gloo on CPU); rank 0 logs and writes checkpoints.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch import nn

from ..errors import InputError

__all__ = ["barrier", "init_distributed", "reduce_max", "reduce_mean", "resolve_device", "wrap_ddp"]


def resolve_device(
    name: str | torch.device, local_rank: int = 0, what: str = "train.device"
) -> torch.device:
    """``auto`` (CUDA ``local_rank`` when available, else CPU) or a torch device name;
    ``what`` names the setting in messages (``train.device``, ``--device``).

    Raises:
        InputError: not a device name, or CUDA asked for but not available.
    """
    if name == "auto":
        name = f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(name)
    except RuntimeError:
        raise InputError(f"{what}: not a device name: {name!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"{what} is {name!r} but CUDA is not available on this machine")
    return dev


def init_distributed(device_name: str) -> tuple[int, int, torch.device]:
    """``(rank, world_size, device)``; joins the process group when launched by ``torchrun``
    (NCCL on CUDA, gloo on CPU)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = resolve_device(device_name, local)
    if world == 1:
        return 0, 1, device
    if device.type == "cuda":
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return dist.get_rank(), dist.get_world_size(), device


def wrap_ddp(model: nn.Module, device: torch.device, sync_bn: bool = False) -> nn.Module:
    """``model`` in DistributedDataParallel (BatchNorm made synchronous first with ``sync_bn``
    on CUDA)."""
    if sync_bn and device.type == "cuda":
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    ids = [device.index] if device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=ids)


def reduce_mean(values: list[float], world: int, device: torch.device) -> list[float]:
    """The mean of host numbers over ranks (the numbers themselves in one process)."""
    if world == 1:
        return values
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return (t / world).tolist()


def reduce_max(value: int, world: int, device: torch.device) -> int:
    """The largest of a host integer over ranks (the number itself in one process)."""
    if world == 1:
        return value
    t = torch.tensor([value], dtype=torch.int64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def barrier(world: int) -> None:
    """Wait for every rank (nothing in one process)."""
    if world > 1:
        dist.barrier()
