"""The package's import graph has no cycle: every ``import``/``from ... import`` of a package
module (module level, in functions, under ``TYPE_CHECKING``; relative and absolute) read with
``ast``, package ``__init__`` modules included."""

from __future__ import annotations

import ast
from pathlib import Path

import tensorpose

ROOT = Path(tensorpose.__file__).resolve().parent
PACKAGE = "tensorpose"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    """Every module of the package (package ``__init__`` files as the package's name)."""
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest prefix of the dotted ``name`` that is a package module."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate in known:
            return candidate
    return None


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package modules that module ``name`` imports anywhere in its source."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                full = ".".join(base + ([node.module] if node.module else []))
            else:
                full = node.module or ""
            # ``from pkg import sub``: the submodule when there is one, else ``pkg`` itself
            targets = [f"{full}.{a.name}" for a in node.names]
        for t in targets:
            if t == PACKAGE or t.startswith(PACKAGE + "."):
                target = _resolve(t, known)
                if target is not None and target != name:
                    out.add(target)
    return out


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle ``[a, b, ..., a]`` of ``graph`` (depth-first search), or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_graph_sees_relative_absolute_and_function_level_imports():
    g = import_graph()
    assert "tensorpose" in g and "tensorpose.tasks" in g  # package __init__ modules count
    assert "tensorpose.skeleton" in g["tensorpose"]  # relative, module level
    assert "tensorpose.config" in g["tensorpose.tasks.registry"]  # parent package, by name
    assert "tensorpose.tasks" in g["tensorpose.train.checkpoint"]  # ``from ..tasks import``
    assert "tensorpose.tasks.registry" in g["tensorpose"]  # inside a function


def test_find_cycle_reports_the_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _private_imports(unit) -> list[str]:
    """``from X import _name`` where ``unit(X) != unit(importer)``, as ``importer <- X._name``."""
    known = modules()
    out = []
    for name, path in known.items():
        is_package = path.name == "__init__.py"
        package = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                full = ".".join(base + ([node.module] if node.module else []))
            else:
                full = node.module or ""
            if not (full == PACKAGE or full.startswith(PACKAGE + ".")):
                continue
            for a in node.names:
                if a.name.startswith("_") and unit(full) != unit(name):
                    out.append(f"{name} <- {full}.{a.name}")
    return out


def _package_of(module: str) -> str:
    """The package a module belongs to: ``tensorpose.multiview`` for
    ``tensorpose.multiview.dlt``; a loose top-level module is its own unit."""
    return ".".join(module.split(".")[:2])


def test_no_private_name_crosses_a_package():
    """Private names stay inside their package: a name another package needs is public."""
    crossing = _private_imports(_package_of)
    assert not crossing, crossing


def test_private_count_sees_a_crossing():
    # the counter itself: across modules it finds the package-internal helpers (poseaug's
    # vector algebra), so a crossing between packages would be found the same way
    assert any("tensorpose.ops._vec3" in c for c in _private_imports(lambda m: m))
    assert _package_of("tensorpose.multiview.dlt") == "tensorpose.multiview"
    assert _package_of("tensorpose.cli") == "tensorpose.cli"


LOOSE_LIMIT = 12


def test_few_loose_top_level_modules():
    """A concept the user meets is a package; at most about a dozen modules sit loose at the
    top (``__init__`` and ``__main__`` not counted)."""
    loose = sorted(
        p.name for p in ROOT.glob("*.py") if p.name not in ("__init__.py", "__main__.py")
    )
    assert len(loose) <= LOOSE_LIMIT, loose


def _edges(graph, source: tuple[str, ...], target: tuple[str, ...]) -> list[str]:
    def inside(name: str, prefixes: tuple[str, ...]) -> bool:
        return any(name == p or name.startswith(p + ".") for p in prefixes)

    return [
        f"{name} -> {t}"
        for name, targets in graph.items()
        if inside(name, source)
        for t in targets
        if inside(t, target)
    ]


def test_io_reads_formats_and_builds_no_models():
    models = ("tensorpose.models", "tensorpose.lifting", "tensorpose.blazepose",
              "tensorpose.centernet", "tensorpose.tasks", "tensorpose.train",
              "tensorpose.inference", "tensorpose.viz", "tensorpose.apps")  # fmt: skip
    assert not _edges(import_graph(), ("tensorpose.io",), models)


def test_tasks_draw_nothing():
    assert not _edges(import_graph(), ("tensorpose.tasks",), ("tensorpose.viz",))


def test_inference_never_imports_a_training_task():
    """Running a model (2D, BlazePose, CenterNet, lifting, several cameras) needs no training
    task module: checkpoints are read through :mod:`tensorpose.inference`."""
    inference = ("tensorpose.pose2d", "tensorpose.blazepose", "tensorpose.centernet",
                 "tensorpose.lifting", "tensorpose.multiview", "tensorpose.smoothing")  # fmt: skip
    tasks = ("tensorpose.tasks.lifting", "tensorpose.tasks.topdown", "tensorpose.tasks.deeppose",
             "tensorpose.tasks.heatmap", "tensorpose.tasks.centernet")  # fmt: skip
    assert not _edges(import_graph(), inference, tasks)


COMPOSING_COMMANDS = ("tensorpose.apps.batch",)
"""The commands that run other commands' recipes (``batch``: its table of steps)."""


def test_one_command_never_imports_another():
    graph = import_graph()
    wrong = [
        f"{name} -> {t}"
        for name, targets in graph.items()
        if name.startswith("tensorpose.apps.") and name not in COMPOSING_COMMANDS
        for t in targets
        if t.startswith("tensorpose.apps.") and t != name
    ]
    assert not wrong, wrong


def test_config_is_below_training():
    assert not _edges(
        import_graph(), ("tensorpose.config",), ("tensorpose.train", "tensorpose.tasks")
    )


def test_imports_point_one_way():
    """Nothing below the commands imports a command: ``apps`` and ``cli`` are imported by
    ``cli`` alone; ``ops`` imports only ``ops`` and ``skeleton``; ``io`` and ``viz`` never
    import ``apps``, ``tasks``, ``train`` or ``inference``."""
    graph = import_graph()
    top = ("tensorpose.apps", "tensorpose.cli", "tensorpose.__main__")
    wrong = []
    for name, targets in graph.items():
        for t in targets:
            if t.startswith(top) and not name.startswith(top):
                wrong.append(f"{name} -> {t}")
            if name.startswith("tensorpose.ops") and not (
                t.startswith("tensorpose.ops") or t == "tensorpose.skeleton"
            ):
                wrong.append(f"{name} -> {t}")
            below = name.startswith(("tensorpose.io", "tensorpose.viz"))
            if below and t.startswith(
                ("tensorpose.apps", "tensorpose.tasks", "tensorpose.train", "tensorpose.inference")
            ):
                wrong.append(f"{name} -> {t}")
    assert not wrong, wrong


def test_commands_ask_capabilities_never_a_models_kind():
    """No command compares a model's ``kind``: it asks what the model can do."""
    wrong = []
    for path in sorted((ROOT / "apps").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(isinstance(s, ast.Attribute) and s.attr == "kind" for s in sides):
                    wrong.append(f"{path.name}:{node.lineno}")
    assert not wrong, wrong


def test_the_cli_drop_rule_choices_are_the_librarys():
    from tensorpose.cli import DROP_RULE_CHOICES
    from tensorpose.multiview.recording import DROP_FLAGS

    assert tuple(DROP_FLAGS) == DROP_RULE_CHOICES


def test_every_package_states_its_public_api():
    """Each package's ``__init__`` lists its public names (``__all__``), and each resolves."""
    import importlib

    packages = sorted(n for n, p in modules().items() if p.name == "__init__.py")
    missing = []
    for name in packages:
        if name in ("tensorpose.apps", "tensorpose.data", "tensorpose.train"):  # modules only
            continue
        module = importlib.import_module(name)
        public = getattr(module, "__all__", None)
        if not public:
            missing.append(name)
            continue
        missing += [f"{name}.{n}" for n in public if getattr(module, n, None) is None]
    assert not missing, missing
