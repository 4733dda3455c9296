"""ONNX export: onnxruntime against PyTorch, with a batch size other than the export's."""

import numpy as np
import pytest
import torch

pytest.importorskip("onnx")
pytest.importorskip("onnxscript")
ort = pytest.importorskip("onnxruntime")

import onnx  # noqa: E402

from tensorpose.models import centernet_pose_net, deeppose, heatmap_pose_net  # noqa: E402
from tensorpose.models.deeppose import denormalize_coords  # noqa: E402
from tensorpose.models.onnx import check_onnx, export_onnx  # noqa: E402
from tensorpose.ops.heatmap import centernet_decode, decode_heatmaps  # noqa: E402

TOL = 1e-4


def _heatmap_net():
    torch.manual_seed(0)
    net = heatmap_pose_net(17, depth=10, width=8)
    # untrained heads start near zero; give the maps a realistic spread so that arg-max and
    # the quarter offsets are decided by clear margins
    torch.nn.init.normal_(net.head.final.weight, std=0.5)
    return net


def _run(path, x):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"images": x.numpy()})


def test_heatmap_net_with_decoding(tmp_path):
    net, shape = _heatmap_net().train(), (3, 64, 96)  # maps 16 x 24: stride 4
    path = export_onnx(net, tmp_path / "hm.onnx", shape, decoding="heatmap")
    assert net.training  # exported in eval mode, the caller's mode restored
    m = onnx.load(str(path))
    assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_param  # dynamic batch
    assert [o.name for o in m.graph.output] == ["keypoints", "scores"]
    assert check_onnx(path, net, shape, (1, 3), decoding="heatmap") <= TOL
    assert net.training
    # independent of the export wrapper: the decoder on the PyTorch maps, stride 4
    x = torch.rand(5, *shape, generator=torch.Generator().manual_seed(3)) * 2 - 1
    kp, sc = _run(path, x)
    with torch.no_grad():
        ref_kp, ref_sc = decode_heatmaps(net.eval()(x), "quarter", stride=4.0)
    assert kp.shape == (5, 17, 2) and sc.shape == (5, 17)
    np.testing.assert_allclose(kp, ref_kp.numpy(), atol=TOL)
    np.testing.assert_allclose(sc, ref_sc.numpy(), atol=TOL)


@pytest.mark.slow
def test_heatmap_subpixel_decoding(tmp_path):
    net, shape = _heatmap_net(), (3, 64, 64)
    path = export_onnx(net, tmp_path / "hm.onnx", shape, decoding="heatmap", method="subpixel")
    assert check_onnx(path, net, shape, (2, 4), "heatmap", method="subpixel") <= TOL


def test_deeppose_regression(tmp_path):
    torch.manual_seed(1)
    net, shape = deeppose(17, "resnet10", width=8), (3, 64, 64)
    torch.nn.init.normal_(net.head.weight, std=0.1)
    path = export_onnx(net, tmp_path / "dp.onnx", shape, decoding="regression")
    assert check_onnx(path, net, shape, (1, 3), decoding="regression") <= TOL
    x = torch.rand(3, *shape, generator=torch.Generator().manual_seed(4)) * 2 - 1
    (kp,) = _run(path, x)
    with torch.no_grad():
        ref = denormalize_coords(net.eval()(x), (64, 64))
    np.testing.assert_allclose(kp, ref.numpy(), atol=TOL)


def test_centernet_with_decoding(tmp_path):
    torch.manual_seed(2)
    net, shape = centernet_pose_net(17, depth=10, width=8), (3, 64, 64)
    for branch in net.head.branches.values():
        torch.nn.init.normal_(branch[-1].weight, std=0.3)
    torch.nn.init.constant_(net.head.branches["size"][-1].bias, 12.0)  # boxes of ~12 map px
    path = export_onnx(net, tmp_path / "cn.onnx", shape, decoding="centernet", k=6)
    assert check_onnx(path, net, shape, (1, 3), decoding="centernet", k=6) <= TOL
    x = torch.rand(3, *shape, generator=torch.Generator().manual_seed(5)) * 2 - 1
    scores, boxes, centers, kps, kp_scores = _run(path, x)
    with torch.no_grad():
        o = net.eval()(x)
        ref = centernet_decode(
            o["heatmap"].sigmoid(),
            o["size"],
            o["offset"],
            o["joint_offset"],
            o["joint_heatmaps"].sigmoid(),
            o["joint_sub_offset"],
            k=6,
        )
    assert kps.shape == (3, 6, 17, 2) and boxes.shape == (3, 6, 4)
    np.testing.assert_allclose(scores, ref["scores"].numpy(), atol=TOL)
    np.testing.assert_allclose(kps, 4 * ref["keypoints"].numpy(), atol=TOL)  # stride 4
    np.testing.assert_allclose(boxes, 4 * ref["boxes"].numpy(), atol=TOL)
    np.testing.assert_allclose(centers, 4 * ref["centers"].numpy(), atol=TOL)
    np.testing.assert_allclose(kp_scores, ref["keypoint_scores"].numpy(), atol=TOL)
    assert (kp_scores > 0).any()  # some joints snapped to joint-heatmap peaks


@pytest.mark.slow
def test_networks_alone(tmp_path):
    net = _heatmap_net()
    path = export_onnx(net, tmp_path / "hm_net.onnx", (3, 64, 48))
    assert check_onnx(path, net, (3, 64, 48), (1, 3)) <= TOL  # any input size alone
    cn = centernet_pose_net(17, depth=10, width=8)
    path = export_onnx(cn, tmp_path / "cn_net.onnx", (3, 64, 64))
    names = [o.name for o in onnx.load(str(path)).graph.output]
    heads = ["heatmap", "size", "offset", "joint_offset", "joint_heatmaps", "joint_sub_offset"]
    assert names == heads
    assert check_onnx(path, cn, (3, 64, 64), (1, 3)) <= TOL


def test_bad_input(tmp_path):
    net = _heatmap_net()
    with pytest.raises(ValueError, match="decoding must be one of"):
        export_onnx(net, tmp_path / "x.onnx", (3, 64, 64), decoding="argmax")
    with pytest.raises(ValueError, match=r"--opset must be an integer in 18\.\.\d+"):
        export_onnx(net, tmp_path / "x.onnx", (3, 64, 64), opset=17)
    with pytest.raises(ValueError, match=r"unknown decode_kwargs \['k'\]"):
        export_onnx(net, tmp_path / "x.onnx", (3, 64, 64), decoding="heatmap", k=3)
    with pytest.raises(ValueError, match=r"decoding='regression' needs \(B, K, 2\)"):
        export_onnx(net, tmp_path / "x.onnx", (3, 64, 64), decoding="regression")
    with pytest.raises(ValueError, match="decoding='centernet' needs a model returning a dict"):
        export_onnx(net, tmp_path / "x.onnx", (3, 64, 64), decoding="centernet")
    with pytest.raises(ValueError, match=r"strides 4 \(y\) and 3 \(x\) differ"):
        export_onnx(net, tmp_path / "x.onnx", (3, 64, 48), decoding="heatmap")
    with pytest.raises(ValueError, match=r"input_shape must be \(C, H, W\)"):
        export_onnx(net, tmp_path / "x.onnx", (64, 48))
    assert not (tmp_path / "x.onnx").exists()
