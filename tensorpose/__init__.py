"""tensorpose: human pose estimation whose hot path is tensor code on the device."""

from .skeleton import Skeleton, get_skeleton, skeleton_names
from .tasks import registry as _registry  # noqa: F401  (hands tensorpose.config the task lookup)

__version__ = "0.1.0"
__all__ = ["Skeleton", "__version__", "get_skeleton", "skeleton_names"]
