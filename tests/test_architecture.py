"""The shape of bench/ itself: layers that only import downwards, no import cycle, small modules.

The import graph is read from the source (AST), so imports inside functions and under
``TYPE_CHECKING`` count like any other: a cycle cannot hide behind a lazy import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "bench"
MAX_LINES = 400

# Lowest first: a module may import its own layer or a lower one, never a higher one (README, Architecture).
LAYERS: list[tuple[str, ...]] = [
    ("bench._prices", "bench.testing"),  # standard library only: run by bench/__init__, or used by tests
    ("bench.core",),  # the contract: errors, records, the run store, paths, progress
    ("bench.models",),  # the one LLM seam
    ("bench.config",),  # what a researcher writes, validated
    ("bench.collect",),
    ("bench.judge",),
    ("bench.pipeline",),  # a run opened and its stages driven, for notebooks and the CLI
    ("bench.estimate",),
    ("bench.analysis",),
    ("bench.kernels",),  # papermill executions, for the report and the sweep
    ("bench.report",),
    ("bench.tracking",),
    ("bench.review",),
    ("bench.sweep",),
    ("bench.judgebench",),
    ("bench.cli", "bench.__main__", "bench"),  # the CLI, and the package's lazy public surface
]
# Third-party packages too slow to import with `import bench` (they stay inside the functions that use them).
HEAVY = {"litellm", "mlflow", "plotly", "polars", "pandas", "papermill", "nbconvert", "nbformat", "playwright",
         "llama_cpp", "jupyter_client", "ipywidgets", "IPython", "pyarrow", "numpy", "scipy", "opentelemetry",
         "aiohttp", "yaml", "pydantic", "tqdm", "dask", "distributed", "huggingface_hub", "nbclient", "sqlalchemy",
         "psycopg2", "tiktoken"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imported(node: ast.Import | ast.ImportFrom, here: str) -> list[str]:
    """The bench modules (or packages) an import statement loads, resolved against ``here``."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "bench"]
    if node.level:  # relative: from the package of ``here``
        package = here.split(".") if MODULES[here].name == "__init__.py" else here.split(".")[:-1]
        base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    if base.split(".")[0] != "bench":
        return []
    submodules = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
    names = [a for a in node.names if f"{base}.{a.name}" not in MODULES]
    return submodules + ([base] if names or not submodules else [])


def _nearest(name: str) -> str:
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def import_graph() -> dict[str, set[str]]:
    """Each bench module -> the bench modules it imports, anywhere in its source."""
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        edges = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges.update(_nearest(m) for m in _imported(node, name))
        edges.discard(name)
    return graph


def layer_of(module: str) -> int:
    best = (-1, -1)  # (prefix length, layer): the longest matching prefix wins
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                best = max(best, (len(prefix), i))
    if best[1] < 0:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS in {Path(__file__).name} and the README")
    return best[1]


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """Return one import cycle as a path [a, b, …, a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_the_import_graph_has_no_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_a_cycle_behind_a_function_level_import():
    graph = {"bench.a": {"bench.b"}, "bench.b": {"bench.c"}, "bench.c": {"bench.a"}, "bench.d": set()}
    assert find_cycle(graph) == ["bench.a", "bench.b", "bench.c", "bench.a"]
    assert find_cycle({"bench.a": {"bench.b"}, "bench.b": set()}) is None


def test_no_module_imports_a_higher_layer():
    upward = [f"{src} (layer {layer_of(src)}) imports {dst} (layer {layer_of(dst)})"
              for src, dsts in import_graph().items() for dst in sorted(dsts) if layer_of(dst) > layer_of(src)]
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_every_module_has_a_layer():
    for name in MODULES:
        layer_of(name)


def _function_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    found = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found += [n for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))]
    return found


@pytest.mark.parametrize("name", sorted(MODULES))
def test_function_level_imports_are_heavy_third_party_packages_with_a_reason(name):
    path = MODULES[name]
    source = path.read_text()
    lines = source.splitlines()
    bad = []
    for node in _function_level_imports(ast.parse(source)):
        roots = ({a.name.split(".")[0] for a in node.names} if isinstance(node, ast.Import)
                 else {"bench" if node.level else (node.module or "").split(".")[0]})
        text = lines[node.lineno - 1].strip()
        if "bench" in roots or not roots <= HEAVY:
            bad.append(f"line {node.lineno}: {text} (import it at the top of the module)")
        elif "#" not in " ".join(lines[node.lineno - 1: node.end_lineno]):
            bad.append(f"line {node.lineno}: {text} (say in a comment why it is imported here)")
    assert not bad, f"{path.relative_to(ROOT)}:\n" + "\n".join(bad)


def test_no_module_is_longer_than_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in MODULES.values() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


@pytest.mark.parametrize("package", sorted(n for n, p in MODULES.items() if p.name == "__init__.py" and n != "bench"))
def test_every_subpackage_lists_its_public_names(package):
    tree = ast.parse(MODULES[package].read_text())
    assert ast.get_docstring(tree), f"{package}/__init__.py: say in a docstring what this layer holds"
    exported = [n for n in tree.body if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)]
    assert exported, f"{package}/__init__.py: list its public names in __all__"


def test_no_function_is_longer_than_a_screen():
    """60 lines at most, unless its ``def`` line says why in a comment."""
    long = []
    for name, path in MODULES.items():
        lines = path.read_text().splitlines()
        for fn in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.end_lineno - fn.lineno >= 60:
                if "#" not in lines[fn.lineno - 1]:
                    long.append(f"{name}.{fn.name}: {fn.end_lineno - fn.lineno + 1} lines")
    assert not long, "functions longer than a screen:\n" + "\n".join(long)
