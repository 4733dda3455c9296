"""The BLAZEPOSE_33 layout: names, converters, and its OpenPose-style folders read back."""

import numpy as np
import pytest
import torch

from tensorpose.io.openpose import write_openpose
from tensorpose.io.tracks import read_tracks
from tensorpose.layouts import LAYOUTS, detect_layout, to_body25, to_coco17, to_h36m17


def _people(T=4, P=1, seed=0):
    rng = np.random.default_rng(seed)
    kp = np.zeros((T, P, 33, 3))
    kp[..., :2] = rng.uniform(100, 900, (T, P, 33, 2))
    kp[..., 2] = rng.uniform(0.5, 1.0, (T, P, 33))
    return kp


def test_names_and_count():
    names = LAYOUTS["BLAZEPOSE_33"]
    assert len(names) == len(set(names)) == 33
    assert names[0] == "nose" and names[29:31] == ["l_heel", "r_heel"]
    assert detect_layout(torch.zeros(2, 33, 3))[0] == "BLAZEPOSE_33"


def test_converters_equal_the_name_loop():
    kp = _people()
    names = LAYOUTS["BLAZEPOSE_33"]
    coco = to_coco17(kp, "BLAZEPOSE_33")
    for j, n in enumerate(LAYOUTS["COCO_17"]):
        np.testing.assert_array_equal(coco[..., j, :], kp[..., names.index(n), :])
    b25 = to_body25(kp)
    for j, n in enumerate(LAYOUTS["BODY_25"]):
        if n in names:
            np.testing.assert_array_equal(b25[..., j, :], kp[..., names.index(n), :])
        elif n == "neck":
            ls, rs = kp[..., 11, :], kp[..., 12, :]
            np.testing.assert_allclose(b25[..., j, :2], (ls[..., :2] + rs[..., :2]) / 2)
            np.testing.assert_allclose(b25[..., j, 2], np.minimum(ls[..., 2], rs[..., 2]))
        elif n.endswith("big_toe"):
            src = names.index(n[0] + "_foot_index")
            np.testing.assert_array_equal(b25[..., j, :], kp[..., src, :])
        elif n.endswith("small_toe"):
            assert (b25[..., j, :] == 0).all()
    h36 = to_h36m17(torch.from_numpy(kp), "BLAZEPOSE_33")
    pelvis = (kp[..., 23, :2] + kp[..., 24, :2]) / 2
    np.testing.assert_allclose(h36[..., 0, :2].numpy(), pelvis)
    with pytest.raises(ValueError, match="33"):
        to_body25(np.zeros((2, 25, 3)))


def test_read_tracks_reads_a_blazepose_folder(tmp_path):
    kp = _people(T=5, P=1)
    names = [f"cam_{t:012d}_keypoints.json" for t in range(5)]
    write_openpose(torch.from_numpy(kp), tmp_path, names)
    tracks = read_tracks(tmp_path)
    assert tracks.layout == "BLAZEPOSE_33" and tracks.num_frames == 5
    np.testing.assert_allclose(tracks.keypoints[:, 0, :, :2].numpy(), kp[:, 0, :, :2], atol=1e-2)
    assert tracks.to_coco17().shape[-2] == 17 and tracks.to_h36m17().shape[-2] == 17
