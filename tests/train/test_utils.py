import numpy as np
import pytest
import torch

from tensorpose.train.utils import RunningMean, seed_everything


def test_running_mean_on_device_until_compute():
    m = RunningMean()
    assert np.isnan(m.compute())
    m.update(torch.tensor(1.0), 2)
    m.update(torch.tensor(4.0), 1)
    assert isinstance(m.total, torch.Tensor)
    assert m.compute() == pytest.approx(2.0)


def test_seed_everything_repeats_every_stream():
    import random

    def draw():
        return random.random(), np.random.rand(), float(torch.rand(()))  # noqa: NPY002

    seed_everything(3)
    a = draw()
    seed_everything(3)
    assert draw() == a
