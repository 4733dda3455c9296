"""Pure tensor functions: no nn.Module, no file I/O, no hidden RNG, no host syncs."""

from .kinematics import bone_lengths, bone_vectors, compose, decompose, flip, forward_kinematics
from .rotations import axis_angle_to_matrix, euler_to_matrix, matrix_to_axis_angle

__all__ = [
    "axis_angle_to_matrix",
    "bone_lengths",
    "bone_vectors",
    "compose",
    "decompose",
    "euler_to_matrix",
    "flip",
    "forward_kinematics",
    "matrix_to_axis_angle",
]
