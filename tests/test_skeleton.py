import pytest
import torch

from tensorpose import Skeleton
from tensorpose.io.bvh import bundled_bvh, load_bvh
from tensorpose.skeleton import get_skeleton

EXPECTED_J = {"h36m17": 17, "coco17": 17, "mpii16": 16, "lsp14": 14, "seed15": 15, "cmu31": 31}


@pytest.mark.parametrize("name", sorted(EXPECTED_J))
def test_builtins_are_trees_with_symmetric_flips(name):
    sk = get_skeleton(name)
    assert sk.num_joints == EXPECTED_J[name]
    assert len(sk.bones) == sk.num_joints - 1
    assert sk.flip_pairs, "every built-in has flip pairs"
    perm = sk.flip_index
    assert [perm[p] for p in perm] == list(range(sk.num_joints))
    for a, b in sk.flip_pairs:
        na, nb = sk.names[a].lower(), sk.names[b].lower()
        assert na.startswith("l") and nb.startswith("r"), (na, nb)
        # mirrored joints hang off mirrored (or shared) parents
        pa, pb = sk.parents[a], sk.parents[b]
        assert pa == pb or perm[pa] == pb or -1 in (pa, pb)
    assert get_skeleton(name) is sk  # one shared instance, one tensor cache


def test_unknown_builtin_lists_known_names():
    with pytest.raises(ValueError, match="h36m17"):
        get_skeleton("nope")


def test_seed15_is_the_article_tree():
    sk = get_skeleton("seed15")
    assert list(sk.parents[1:]) == [0, 1, 2, 3, 1, 5, 6, 0, 8, 9, 0, 11, 12, 1]
    assert [p for p, _ in sk.bones] == [0, 1, 2, 3, 1, 5, 6, 0, 8, 9, 0, 11, 12, 1]
    assert [c for _, c in sk.bones] == list(range(1, 15))


def test_cmu31_matches_bundled_bvh_hierarchy():
    m = load_bvh(bundled_bvh()[0])
    sk = get_skeleton("cmu31")
    assert list(sk.names) == m.joint_names
    assert list(sk.parents) == m.parents


def test_any_joint_order_and_derived_data():
    # mpii16: the root is joint 6 and several parents have larger indices than their children
    sk = get_skeleton("mpii16")
    assert sk.root == 6
    assert any(p > j for j, p in enumerate(sk.parents))
    children = [c for _, c in sk.bones]
    assert children == sorted(children)
    for p, c in sk.bones:
        assert sk.parents[c] == p
    # ancestor matrix vs walking up the tree
    A = sk.tensor("ancestors")
    for j in range(sk.num_joints):
        walk, k = set(), j
        while k != -1:
            walk.add(k)
            k = sk.parents[k]
        assert {k for k in range(sk.num_joints) if A[j, k]} == walk
    # levels: root first, every joint's parent one level up
    assert sk.levels[0] == (sk.root,)
    for d, level in enumerate(sk.levels[1:], 1):
        assert all(sk.depth[sk.parents[j]] == d - 1 for j in level)
    assert sorted(j for lv in sk.levels for j in lv) == list(range(sk.num_joints))


def test_tensor_cache_is_per_device_and_reused():
    sk = get_skeleton("h36m17")
    a = sk.tensor("flip_index")
    assert a is sk.tensor("flip_index")
    assert a.dtype == torch.long and a.tolist() == list(sk.flip_index)


@pytest.mark.parametrize(
    "names, parents, pairs, match",
    [
        (["a", "b"], [-1, -1], (), "exactly one root.*'a'.*'b'"),
        (["a", "b", "c"], [1, 2, 1], (), "exactly one root.*none"),
        (["a", "b", "c", "d"], [-1, 2, 3, 1], (), "cycle"),
        (["a", "b"], [-1, 5], (), r"joint 1 \('b'\) has parent index 5"),
        (["a", "b"], [-1, 1], (), r"joint 1 \('b'\) is its own parent"),
        (["a", "a"], [-1, 0], (), "'a' is used twice"),
        (["a", "b", "c"], [-1, 0, 0], [(1, 1)], "pairs a joint with itself"),
        (["a", "b", "c"], [-1, 0, 0], [(1, 2), (2, 0)], r"joint 2 \('c'\).*more than one"),
        (["a", "b", "c"], [-1, 0, 0], [("b", "x")], "unknown joint name 'x'"),
        (["a", "b"], [-1], (), "2 entries but parents has 1"),
    ],
)
def test_validation_names_the_joint(names, parents, pairs, match):
    with pytest.raises(ValueError, match=match):
        Skeleton(names, parents, pairs)


def test_subset_reparents_to_nearest_kept_ancestor():
    sk = get_skeleton("h36m17")
    sub = sk.subset(["pelvis", "r_ankle", "l_ankle", "head"])
    assert sub.parents == (-1, 0, 0, 0)
    assert sub.flip_pairs == ((2, 1),)
