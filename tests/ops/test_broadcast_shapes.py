import pytest
import torch

from tensorpose.ops._checks import broadcast_shapes


@pytest.mark.parametrize(
    "a, b", [((), (3,)), ((2, 1), (1, 4)), ((0,), (1,)), ((5, 1, 3), (3,)), ((2,), (3,))]
)
def test_broadcast_shapes_as_torch(a, b):
    try:
        expected = torch.broadcast_shapes(a, b)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            broadcast_shapes(a, b)
        return
    assert broadcast_shapes(a, b) == expected
