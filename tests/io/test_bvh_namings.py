"""BVH namings (Daz-friendly CMU, Mixamo) and length units, against the independent per-joint
FK of test_bvh.py (plain Python loops over the hierarchy text)."""

from pathlib import Path

import numpy as np
import pytest

from tensorpose.cli import BVH_UNITS, main
from tensorpose.io.bvh import CMU_UNIT_M, UNITS, detect_mapping, load_bvh, parse_bvh

from .test_bvh import reference_positions

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = ROOT / "tensorpose" / "assets" / "mocap"
DAZ = ROOT / "tests" / "data" / "mocap_extra" / "cmu_daz" / "martial_04_excerpt_30fps.bvh"


def scaled(text: str, k: float) -> str:
    """The BVH text with every OFFSET and every position channel multiplied by ``k``."""
    lines, out, pos_cols, col = text.splitlines(), [], [], 0
    for ln in lines:  # header: scale offsets, note the position channel columns
        toks = ln.split()
        if toks[:1] == ["OFFSET"]:
            ln = "OFFSET " + " ".join(str(float(v) * k) for v in toks[1:])
        elif toks[:1] == ["CHANNELS"]:
            pos_cols += [col + i for i, c in enumerate(toks[2:]) if c.endswith("position")]
            col += int(toks[1])
        out.append(ln)
        if toks == ["MOTION"]:
            break
    i = len(out)
    out += lines[i : i + 2]
    for row in lines[i + 2 :]:
        v = np.array(row.split(), float)
        v[pos_cols] *= k
        out.append(" ".join(repr(float(x)) for x in v))
    return "\n".join(out) + "\n"


def test_cli_units_are_the_readers():
    assert tuple(UNITS) == BVH_UNITS


@pytest.mark.parametrize("unit", ["cm", "mm", "m", "inch"])
def test_cmu_names_in_other_units_give_the_same_metres(unit):
    text = (BUNDLED / "131_03.bvh").read_text()
    ref, _ = parse_bvh(text, "131_03.bvh").to_skeleton()
    other = parse_bvh(scaled(text, CMU_UNIT_M / UNITS[unit]), f"131_03_{unit}.bvh")
    got, _ = other.to_skeleton()
    np.testing.assert_allclose(got.numpy(), ref.numpy(), atol=1e-9)
    assert ref[:, :, 1].max() > 1.3  # metres: a standing person's head


def test_no_person_height_is_refused_naming_units(tmp_path, capsys):
    text = scaled((BUNDLED / "131_03.bvh").read_text(), 0.7)  # ~1.1 m tall in CMU units
    m = parse_bvh(text, "small.bvh")
    with pytest.raises(ValueError, match=r"small.bvh: cannot tell the length unit.*--units"):
        m.to_skeleton()  # no unit gives 1.4-2.1 m: the unit is not guessed
    got, _ = m.to_skeleton(units="cmu")  # the user says: read it as CMU units (a child)
    ref, _ = load_bvh(BUNDLED / "131_03.bvh").to_skeleton()
    np.testing.assert_allclose(got.numpy(), 0.7 * ref.numpy(), atol=1e-9)
    path = tmp_path / "small.bvh"
    path.write_text(text)
    assert main(["bvh-info", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--units" in err[0] and "small.bvh" in err[0]
    assert main(["bvh-info", str(path), "--units", "cmu"]) == 0
    tiny = parse_bvh(scaled((BUNDLED / "131_03.bvh").read_text(), 0.3), "tiny.bvh")
    with pytest.raises(ValueError, match=r"tiny.bvh: --units cmu makes the skeleton 0.48\d m"):
        tiny.to_skeleton(units="cmu")  # a unit that makes no person's height is refused


def test_daz_release_maps_to_h36m17_in_centimetres():
    text = DAZ.read_text()
    m = load_bvh(DAZ)
    assert len(m.joint_names) == 43 and detect_mapping(m.joint_names) == "cmu_daz"
    pos, sk = m.to_skeleton()
    for f in (0, 33, 59):
        r = reference_positions(text, f)
        r["head_top"] = r["head"] + 1.25 * (r["head"] - r["neck"])
        want = {
            "pelvis": (r["lThigh"] + r["rThigh"]) / 2, "r_hip": r["rThigh"], "r_knee": r["rShin"],
            "r_ankle": r["rFoot"], "l_elbow": r["lForeArm"], "l_wrist": r["lHand"],
            "spine": (r["abdomen"] + r["chest"]) / 2,
            "thorax": (r["neck"] + r["lShldr"] + r["rShldr"]) / 3,
            "neck": r["head"], "head": r["head_top"], "r_shoulder": r["rShldr"],
        }  # fmt: skip
        for name, p in want.items():
            np.testing.assert_allclose(pos[f, sk.index(name)].numpy(), p / 100, atol=1e-9)


def mixamo_text(prefix: str) -> str:
    """The bundled MotionBuilder-named CMU excerpt renamed as a Mixamo rig: every joint
    ``prefix + name``, the head's end site a ``HeadTop_End`` joint."""
    src = (BUNDLED / "cmu_motionbuilder" / "01_01_jump_30fps.bvh").read_text().splitlines()
    out, i, last = [], 0, ""
    while i < len(src):
        toks = src[i].split()
        if toks[:1] in (["ROOT"], ["JOINT"]):
            last = toks[1]
            out.append(f"{toks[0]} {prefix}{last}")
        elif toks == ["End", "Site"] and last == "Head":  # End Site { OFFSET } -> a joint
            out += [f"JOINT {prefix}HeadTop_End", "{", src[i + 2], "CHANNELS 0", "End Site",
                    "{", "OFFSET 0 0 0", "}", "}"]  # fmt: skip
            i += 4
            continue
        else:
            out.append(src[i])
        i += 1
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("prefix", ["mixamorig:", "mixamorig1:", ""])
def test_mixamo_rig_maps_to_h36m17(prefix):
    text = mixamo_text(prefix)
    m = parse_bvh(text, "mixamo.bvh")
    assert f"{prefix}HeadTop_End" in m.joint_names
    assert detect_mapping(m.joint_names + m.end_site_names) == "mixamo"
    pos, sk = m.to_skeleton()
    r = reference_positions(text, 20)
    r = {k[len(prefix) :]: v for k, v in r.items()}
    want = {
        "pelvis": (r["LeftUpLeg"] + r["RightUpLeg"]) / 2, "l_knee": r["LeftLeg"],
        "r_ankle": r["RightFoot"], "spine": r["Spine1"], "thorax": r["Neck"],
        "neck": r["Head"], "head": r["HeadTop_End"], "l_wrist": r["LeftHand"],
    }  # fmt: skip
    for name, p in want.items():
        np.testing.assert_allclose(pos[20, sk.index(name)].numpy(), p * CMU_UNIT_M, atol=1e-9)


def test_eval_of_a_centimetre_file_is_in_metres(tmp_path, capsys):
    """The reported case: CMU joint names in centimetres were read in CMU units (1766 mm)."""
    import json

    text = (BUNDLED / "131_03.bvh").read_text()
    path = tmp_path / "131_03_cm.bvh"
    path.write_text(scaled(text, CMU_UNIT_M / 0.01))
    lifter = str(ROOT / "tensorpose" / "assets" / "models" / "lifter_wild.pt")
    assert main(["eval", lifter, "--bvh", str(path), "--json", "--device", "cpu"]) == 0
    m = json.loads(capsys.readouterr().out)
    assert 20 < m["mpjpe_mm"] < 100
    assert main(["eval", lifter, "--bvh", str(path), "--units", "cm", "--device", "cpu"]) == 0
    assert "MPJPE" in capsys.readouterr().out
    for unit, height in (("mm", "0.161"), ("m", "161"), ("inch", "4.09")):  # the wrong unit
        argv = ["eval", lifter, "--bvh", str(path), "--units", unit, "--device", "cpu"]
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert f"--units {unit} makes the skeleton {height}" in err and "131_03_cm.bvh" in err
