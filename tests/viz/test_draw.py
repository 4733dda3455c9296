"""Pictures: skeleton drawing, the augmented-crop grid, and the viz / coco-info commands."""

import cv2
import numpy as np

from tensorpose.augment.crops import AugmentConfig
from tensorpose.cli import main
from tensorpose.data.images import TopDownDataset
from tensorpose.skeleton import get_skeleton
from tensorpose.viz.draw import LEFT, RIGHT, augment_grid, draw_skeleton

SK = get_skeleton("coco17")


def test_draw_skeleton_colours_sides():
    img = np.zeros((64, 64, 3), np.uint8)
    kp = np.zeros((17, 2))
    vis = np.zeros(17)
    kp[SK.index("l_shoulder")], kp[SK.index("l_elbow")] = (50, 10), (50, 40)
    kp[SK.index("r_shoulder")], kp[SK.index("r_elbow")] = (10, 10), (10, 40)
    vis[[SK.index(n) for n in ("l_shoulder", "l_elbow", "r_shoulder", "r_elbow")]] = 2
    out = draw_skeleton(img, kp, vis, SK)
    assert tuple(out[25, 50]) == LEFT and tuple(out[25, 10]) == RIGHT
    assert img.sum() == 0  # drawn on a copy


def test_augment_grid_shape_and_plain_column():
    ds = TopDownDataset(aspect_ratio=0.75, cache_images=True)
    cfg = AugmentConfig(output_size=(64, 48))
    grid = augment_grid(ds, SK, cfg, people=(0, 1), augmentations=2, backend="cpu")
    assert grid.shape == (128, 144, 3) and grid.dtype == np.uint8
    again = augment_grid(ds, SK, cfg, people=(0, 1), augmentations=2, backend="device")
    assert np.abs(grid.astype(int) - again.astype(int)).mean() < 3  # same params, both backends


def test_viz_and_coco_info_commands(tmp_path, capsys):
    out = tmp_path / "v" / "aug.png"
    assert (
        main(
            ["viz", "--out", str(out), "--rows", "2", "--augmentations", "2", "--size", "64", "48"]
        )
        == 0
    )
    img = cv2.imread(str(out))
    assert img.shape == (128, 144, 3)
    assert "green = person's left" in capsys.readouterr().out
    before = out.read_bytes()
    assert main(["viz", "--out", str(out), "--rows", "1"]) == 2  # never replaced silently
    assert "exists; pass --overwrite" in capsys.readouterr().err and out.read_bytes() == before
    assert main(["viz", "--out", str(out), "--people", "99", "--overwrite"]) == 2
    assert "dataset has 43 people" in capsys.readouterr().err
    assert main(["coco-info"]) == 0
    assert "16 images, 43 people kept" in capsys.readouterr().out


def test_skeletons_3d_picture_draws_the_reference_grey_behind(tmp_path):
    import numpy as np

    from tensorpose.viz.charts import skeletons_3d_picture

    joints = np.array([[[0.0, 0.0, 0.0], [0.0, 0.4, 0.0], [0.2, 0.8, 0.0]]])
    bones, colours = [(0, 1), (1, 2)], [(0, 0, 255), (0, 0, 255)]
    skeletons_3d_picture(tmp_path / "a.png", joints, bones, colours, ["f"], "t")
    skeletons_3d_picture(tmp_path / "b.png", joints, bones, colours, ["f"], "t",
                         reference=joints + np.array([0.3, 0.0, 0.0]))  # fmt: skip
    a, b = cv2.imread(str(tmp_path / "a.png")), cv2.imread(str(tmp_path / "b.png"))
    grey = lambda img: int((img == 200).all(-1).sum())  # noqa: E731
    assert grey(b) > grey(a) + 20  # the reference's bones, in light grey
    assert int((b == [0, 0, 255]).all(-1).sum()) > 20  # the skeleton itself, in its colour
