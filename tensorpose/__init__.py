"""tensorpose: human pose estimation whose hot path is tensor code on the device."""

from . import skeletons
from .skeleton import Skeleton

__version__ = "0.1.0"
__all__ = ["Skeleton", "__version__", "skeletons"]
