"""The shipped BlazePose networks equal MediaPipe's TFLite networks.

Everywhere: against ``tests/data/blazepose_reference.npz`` (the TFLite interpreter's outputs,
written by ``scripts/blazepose_reference.py``). Where ``ai-edge-litert`` installs and the
original files are at hand (``TENSORPOSE_MEDIAPIPE``: the mediapipe 0.10.14 wheel or a folder of
its two .tflite files): live, on every output, for random and real inputs. The TFLite reader's
refusals use a tiny model written here with the ``tflite`` package's flatbuffer builders.
"""

from __future__ import annotations

import os
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from tensorpose.blazepose.networks import DETECTOR_FILE, LANDMARK_FILE, load_blazepose_networks
from tensorpose.blazepose.tflite import load_converted, load_tflite, read_tflite, save_converted

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from blazepose_reference import SUBSAMPLE, interpret, network_inputs  # noqa: E402

REFERENCE = ROOT / "tests/data/blazepose_reference.npz"
MEMBERS = {
    "detector": "mediapipe/modules/pose_detection/pose_detection.tflite",
    "landmark": "mediapipe/modules/pose_landmark/pose_landmark_full.tflite",
}


def tolerance(floor: float) -> float:
    """1e-4 absolute, or twice ``floor`` where that is more: the largest difference between the
    interpreter's own two float32 kernel sets (XNNPACK and its reference kernels) on that
    output. On outputs of a few hundred (box offsets in pixels, the segmentation logits of up
    to 1600) float32 rounding alone exceeds 1e-4, in the interpreter as here."""
    return max(1e-4, 2 * float(floor))


def as_tflite(y: torch.Tensor) -> np.ndarray:
    """An output of the module in TFLite's layout (4-D: NCHW -> NHWC)."""
    return (y.permute(0, 2, 3, 1) if y.dim() == 4 else y).numpy()


@pytest.fixture(scope="module")
def networks():
    torch.set_num_threads(1)
    detector, landmark = load_blazepose_networks("cpu")
    return {"detector": detector, "landmark": landmark}


def run(net, x: np.ndarray) -> list[np.ndarray]:
    with torch.no_grad():
        return [as_tflite(y) for y in net(torch.from_numpy(x).permute(0, 3, 1, 2))]


@pytest.mark.parametrize("image", ["noise", "frame"])
def test_shipped_networks_equal_reference_outputs(networks, image):
    ref = np.load(REFERENCE)
    inputs = network_inputs(ref[image])
    for i, key in enumerate(("detector", "landmark")):
        net = networks[key]
        outs = run(net, np.ascontiguousarray(inputs[i]))
        for name, y in zip(net.output_names, outs, strict=True):
            expected = ref[f"{image}/{key}/{name}"]
            got = y[0][SUBSAMPLE.get(f"{key}/{name}", ())]
            assert got.shape == expected.shape, (key, name)
            err = np.abs(got - expected).max()
            assert err <= tolerance(ref[f"{image}/{key}/{name}/floor"]), (image, key, name, err)


def test_batch_of_two_equals_two_batches_of_one(networks):
    """An image's outputs do not depend on the batch, up to float rounding: on a CPU one image
    and a batch may run some convolutions with different kernels (tensorpose.models.
    tflite_onednn), which round differently, as the interpreter's two kernel sets do (the
    tolerance of the reference test: its floor on each output, at least 1e-4)."""
    ref = np.load(REFERENCE)
    net = networks["landmark"]
    x = torch.rand(2, 3, 256, 256, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        both = net(x)
        one = net(x[1:])
    for a, b, name in zip(both, one, net.output_names, strict=True):
        floor = ref[f"noise/landmark/{name}/floor"]
        torch.testing.assert_close(a[1:], b, atol=tolerance(floor), rtol=1e-4)


def op_by_op(net, x: torch.Tensor, **kw) -> tuple:
    """The module's own operators one by one (conv2d; the path of a GPU and of autograd): the
    reference of the CPU's oneDNN programs."""
    with torch.enable_grad():
        return tuple(None if y is None else y.detach() for y in net(x.requires_grad_(), **kw))


@pytest.mark.parametrize("key", ["detector", "landmark"])
@pytest.mark.parametrize("batch", [1, 3])
def test_cpu_program_equals_the_ops_one_by_one(networks, key, batch):
    """The oneDNN program (prepacked weights, fused activations and residual adds, small
    1 x 1 convolutions as matrix products, uneven SAME padding padded first) gives the
    outputs of the graph's ops run one by one, for NCHW and channels-last inputs; the
    borders' PAD ops are folded into the convolutions that read them."""
    net, ref = networks[key], np.load(REFERENCE)
    side = 224 if key == "detector" else 256
    x = torch.rand(batch, 3, side, side, generator=torch.Generator().manual_seed(2))
    x = x * 2 - 1 if key == "detector" else x  # the networks' input ranges
    want = op_by_op(net, x.clone())
    with torch.no_grad():
        for got in (net(x.contiguous()), net(x.contiguous(memory_format=torch.channels_last))):
            for u, v, name in zip(got, want, net.output_names, strict=True):
                floor = ref[f"noise/{key}/{name}/floor"]  # TFLite's two kernel sets apart
                torch.testing.assert_close(u, v, atol=tolerance(floor), rtol=0)
    steps = net._program(tuple(range(len(want))), {0: x})
    assert len(steps) < len(net._plan(tuple(range(len(want)))))  # the adds went into convs
    pads = sum(op["op"] == "PAD" for op in net.desc["ops"])
    assert sum(op["op"] == "PAD" for op, _ in net._plan(tuple(range(len(want))))) < pads


def test_cpu_program_follows_changed_weights(networks):
    """A program is rebuilt when a constant is written in place or replaced."""
    net = networks["landmark"]
    x = torch.rand(1, 3, 256, 256, generator=torch.Generator().manual_seed(3))
    name = next(op["weight"] for op in net.desc["ops"] if op.get("weight"))
    w = getattr(net, name)
    with torch.no_grad():
        before = net(x, outputs=(0,))[0]
        w.mul_(0.5)
        try:
            halved = net(x, outputs=(0,))[0]
            torch.testing.assert_close(halved, op_by_op(net, x.clone(), outputs=(0,))[0],
                                       atol=1e-2, rtol=1e-3)  # fmt: skip
            assert not torch.allclose(halved, before, atol=1e-2)
        finally:
            w.mul_(2.0)
        torch.testing.assert_close(net(x, outputs=(0,))[0], before, atol=1e-5, rtol=0)


def test_outputs_subset_computes_only_those(networks):
    """``outputs=`` runs the ops those outputs need: the same values, None for the rest."""
    net = networks["landmark"]
    x = torch.rand(1, 3, 256, 256, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = net(x)
        part = net(x, outputs=(0, 1, 3))
    assert part[2] is None and part[4] is None
    for i in (0, 1, 3):
        assert torch.equal(full[i], part[i])
    assert len(net._plan((0, 1, 3))) < len(net._plan((0, 1, 2, 3, 4)))
    with pytest.raises(ValueError, match=r"outputs must be indices in \[0, 5\)"):
        net(x, outputs=(5,))


def test_wrong_input_shape_is_one_line(networks):
    with pytest.raises(ValueError, match=r"must be \(B, 3, 224, 224\), got \(1, 3, 256, 256\)"):
        networks["detector"](torch.zeros(1, 3, 256, 256))


def test_shipped_files_are_plain_data_and_small():
    for path, limit in ((DETECTOR_FILE, 3 << 20), (LANDMARK_FILE, 7 << 20)):
        blob = torch.load(path, weights_only=True)
        assert set(blob) == {"graph", "state_dict"}
        assert path.stat().st_size < limit


def test_doctored_file_names_the_unsupported_op(tmp_path):
    blob = torch.load(DETECTOR_FILE, weights_only=True)
    blob["graph"]["ops"][3]["op"] = "TANH"
    torch.save(blob, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match=r"bad\.pt: operator TANH is not supported") as e:
        load_converted(tmp_path / "bad.pt")
    assert "\n" not in str(e.value)


# --- the reader of .tflite files: a tiny model written here ---


def tiny_model(path: Path, op: str, shape=(1, 4, 4, 2)) -> Path:
    """A .tflite file of one operator ``op`` (no options) from input tensor 0 to output 1."""
    tflite = pytest.importorskip("tflite")
    import flatbuffers

    b = flatbuffers.Builder(1024)

    def vector(start, values, prepend):
        start(b, len(values))
        for v in reversed(values):
            prepend(v)
        return b.EndVector()

    def tensor(i):
        name = b.CreateString(f"t{i}")
        dims = vector(tflite.TensorStartShapeVector, list(shape), b.PrependInt32)
        tflite.TensorStart(b)
        tflite.TensorAddShape(b, dims)
        tflite.TensorAddType(b, tflite.TensorType.FLOAT32)
        tflite.TensorAddBuffer(b, 0)
        tflite.TensorAddName(b, name)
        return tflite.TensorEnd(b)

    tensors = [tensor(0), tensor(1)]
    ins = vector(tflite.OperatorStartInputsVector, [0], b.PrependInt32)
    outs = vector(tflite.OperatorStartOutputsVector, [1], b.PrependInt32)
    tflite.OperatorStart(b)
    tflite.OperatorAddOpcodeIndex(b, 0)
    tflite.OperatorAddInputs(b, ins)
    tflite.OperatorAddOutputs(b, outs)
    operator = tflite.OperatorEnd(b)
    tvec = vector(tflite.SubGraphStartTensorsVector, tensors, b.PrependUOffsetTRelative)
    gin = vector(tflite.SubGraphStartInputsVector, [0], b.PrependInt32)
    gout = vector(tflite.SubGraphStartOutputsVector, [1], b.PrependInt32)
    ovec = vector(tflite.SubGraphStartOperatorsVector, [operator], b.PrependUOffsetTRelative)
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, tvec)
    tflite.SubGraphAddInputs(b, gin)
    tflite.SubGraphAddOutputs(b, gout)
    tflite.SubGraphAddOperators(b, ovec)
    graph = tflite.SubGraphEnd(b)
    code = getattr(tflite.BuiltinOperator, op)
    tflite.OperatorCodeStart(b)
    tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
    tflite.OperatorCodeAddBuiltinCode(b, code)
    tflite.OperatorCodeAddVersion(b, 1)
    opcode = tflite.OperatorCodeEnd(b)
    tflite.BufferStart(b)
    empty = tflite.BufferEnd(b)
    codes = vector(tflite.ModelStartOperatorCodesVector, [opcode], b.PrependUOffsetTRelative)
    graphs = vector(tflite.ModelStartSubgraphsVector, [graph], b.PrependUOffsetTRelative)
    buffers = vector(tflite.ModelStartBuffersVector, [empty], b.PrependUOffsetTRelative)
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddOperatorCodes(b, codes)
    tflite.ModelAddSubgraphs(b, graphs)
    tflite.ModelAddBuffers(b, buffers)
    b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
    path.write_bytes(bytes(b.Output()))
    return path


def test_unsupported_operator_is_one_line_naming_file_and_op(tmp_path):
    path = tiny_model(tmp_path / "tanh.tflite", "TANH")
    with pytest.raises(ValueError) as e:
        read_tflite(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: operator TANH is not supported") and "\n" not in msg


def test_tiny_model_equals_interpreter(tmp_path):
    path = tiny_model(tmp_path / "logistic.tflite", "LOGISTIC")
    net = load_tflite(path)
    x = np.random.default_rng(0).normal(size=(1, 4, 4, 2)).astype(np.float32) * 4
    got = run(net, x)[0]
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-x.astype(np.float64))), atol=1e-6)
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    it = litert.Interpreter(model_path=str(path))
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    np.testing.assert_allclose(got, it.get_tensor(it.get_output_details()[0]["index"]), atol=1e-6)


def test_not_a_tflite_file_is_one_line(tmp_path):
    pytest.importorskip("tflite")
    bad = tmp_path / "x.tflite"
    bad.write_bytes(b"\x00" * 64)
    with pytest.raises(ValueError, match=r"x\.tflite: not a TensorFlow Lite model"):
        read_tflite(bad)
    truncated = tmp_path / "t.tflite"
    truncated.write_bytes(tiny_model(tmp_path / "ok.tflite", "LOGISTIC").read_bytes()[:40])
    with pytest.raises(ValueError, match=r"t\.tflite: (truncated|not a readable)"):
        read_tflite(truncated)


# --- live, against the original files and the interpreter ---


@pytest.fixture(scope="module")
def originals(tmp_path_factory):
    """The two .tflite files of ``TENSORPOSE_MEDIAPIPE`` (a wheel or a folder), else skip."""
    pytest.importorskip("tflite")
    source = os.environ.get("TENSORPOSE_MEDIAPIPE")
    if not source:
        pytest.skip("TENSORPOSE_MEDIAPIPE (the mediapipe 0.10.14 wheel or its .tflite) not set")
    source = Path(source)
    if source.is_dir():
        return {k: source / Path(m).name for k, m in MEMBERS.items()}
    folder = tmp_path_factory.mktemp("mediapipe")
    with zipfile.ZipFile(source) as z:
        for m in MEMBERS.values():
            (folder / Path(m).name).write_bytes(z.read(m))
    return {k: folder / Path(m).name for k, m in MEMBERS.items()}


def test_reader_gives_the_shipped_weights(originals, networks):
    for key, path in originals.items():
        desc, state = read_tflite(path)
        shipped = networks[key].state_dict()
        assert set(state) == set(shipped) and desc["ops"] == networks[key].desc["ops"]
        for k, v in state.items():
            assert torch.equal(v, shipped[k]), (key, k)


def test_save_and_load_round_trip(originals, tmp_path):
    desc, state = read_tflite(originals["detector"])
    save_converted(desc, state, tmp_path / "d.pt")
    net = load_converted(tmp_path / "d.pt")
    for k, v in net.state_dict().items():
        assert torch.equal(v, state[k]), k


@pytest.mark.parametrize("image", ["noise", "frame"])
def test_networks_equal_the_interpreter(originals, networks, image):
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    if image == "noise":  # per-pixel noise here (the fixture's comes in 4 x 4 blocks)
        u8 = np.random.default_rng(1).integers(0, 256, (256, 256, 3), dtype=np.uint8)
    else:
        u8 = np.load(REFERENCE)["frame"]
    inputs = network_inputs(u8)
    kernels = litert.OpResolverType.BUILTIN_REF
    for i, key in enumerate(("detector", "landmark")):
        x = np.ascontiguousarray(inputs[i])
        path = str(originals[key])
        expected = interpret(litert.Interpreter(model_path=path), x)
        ref_kernels = interpret(litert.Interpreter(path, experimental_op_resolver_type=kernels), x)
        outs = run(networks[key], x)
        for (name, want), (_, other), got in zip(expected, ref_kernels, outs, strict=True):
            err = np.abs(got - want).max()
            floor = np.abs(other - want).max()
            print(
                f"{image} {key} {name}: max |ours - TFLite| {err:.2e}, TFLite's floor {floor:.2e}"
            )
            assert err <= tolerance(floor), (image, key, name, err, floor)
