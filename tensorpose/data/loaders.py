"""DataLoader plumbing shared by the image tasks: samples whose failures name themselves,
worker seeding, and loaders whose randomness depends only on ``(seed, epoch)``."""

from __future__ import annotations

import random

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

__all__ = ["DataError", "EpochLoader", "IdentifiedSamples", "seed_worker"]


class DataError(RuntimeError):
    """A sample could not be loaded; the message names the sample, annotation and image."""


class IdentifiedSamples(Dataset):
    """A :class:`~tensorpose.data.images.TopDownDataset` whose failures name the sample: any
    exception while loading item ``i`` becomes :class:`DataError` with the sample index, the
    annotation id and the image file (DataLoader workers re-raise it in the main process)."""

    def __init__(self, dataset) -> None:
        self.dataset = dataset
        self.records = dataset.records

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> dict:
        try:
            return self.dataset[index]
        except Exception as e:
            r = self.records[index]
            raise DataError(
                f"sample {index} (annotation {r.ann_id}, image {r.file}): {type(e).__name__}: {e}"
            ) from e


def seed_worker(worker_id: int) -> None:
    """DataLoader ``worker_init_fn``: seed python and numpy from the worker's torch seed
    (which the DataLoader derives from its generator and the worker id)."""
    seed = torch.initial_seed() % 2**32
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - the global stream user code may draw from


class EpochLoader:
    """A DataLoader whose shuffle, worker seeds and CPU augmentation depend only on
    ``(seed, epoch)``: resuming at an epoch boundary replays the same batches."""

    def __init__(self, loader: DataLoader, seed: int) -> None:
        self.loader, self.seed = loader, seed

    def __len__(self) -> int:
        return len(self.loader)

    def set_epoch(self, epoch: int) -> None:
        self.loader.sampler.set_epoch(epoch)
        self.loader.generator.manual_seed(self.seed * 1_000_003 + epoch)
        if hasattr(self.loader.collate_fn, "set_epoch"):
            self.loader.collate_fn.set_epoch(epoch)

    def __iter__(self):
        return iter(self.loader)
