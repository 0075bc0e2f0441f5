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

# Lowest first: a module may import its own layer or a lower one, never a higher one (docs/architecture.md).
LAYERS: list[tuple[str, ...]] = [
    ("bench._prices", "bench.testing", "bench._schema_instance", "bench._word_vectors"),  # standard library only:
    # run by bench/__init__, used by tests, or the structured replies (_schema_instance) and embeddings
    # (_word_vectors) of both the dry model and the fake provider
    ("bench.core",),  # the contract: errors, records, the run store, paths, progress
    ("bench.testing.records", "bench.testing.graded_runs"),  # records with plain defaults; run folders of them
    ("bench.models",),  # the one LLM seam
    ("bench.config", "bench.gates.spec"),  # what a researcher writes, validated (a params file's gates: section too)
    ("bench.run",),  # a params file opened as a run: its scenarios, its selected cells, its folder
    ("bench.collect",),  # answers: the same shape as judge (one item's module, candidates.py)
    ("bench.judge",),
    ("bench.stage_runs",),  # run_collect / run_judge: a stage driven on a run, for notebooks, the CLI and the sweep
    ("bench.estimate",),
    ("bench.analysis", "bench.compare"),  # bench.compare: two runs matched and compared (compare_runs)
    ("bench.kernels",),  # papermill executions, for the report and the sweep
    ("bench.report", "bench.compare.diff_report"),  # the comparison's diff report
    ("bench.tracking",),
    ("bench.review",),
    ("bench.gates",),  # regression gates on a run and a baseline run (bench gate, a sweep's end)
    ("bench.judge_trust",),  # bench judges: each judge's agreement with human reviews and its bias audit
    ("bench.align",),  # bench align: a judge aligned to a run's reviews, written as a new rubric version
    ("bench.sweep", "bench.compare.command"),  # bench compare: compare, report, log to MLflow
    ("bench.monitor",),  # bench status: a run's state from its folder alone (marks a crashed run's MLflow run)
    ("bench.judgebench",),
    ("bench.imports",),  # bench import: other tools' verdicts and Inspect logs written as records
    ("bench.cli", "bench.cli_status", "bench.cli_review", "bench.__main__", "bench"),  # the CLI, and the package's lazy public surface
    ("bench.testing.in_process",),  # a params file's stages (and a command) run in a test's own process, no kernel
]
STAGES = ("collect", "judge")  # each a package of the same shape, driven by bench.stage_runs.run_<stage>
SWEEP_CHOOSER = "bench.sweep.command"  # the one module of the local sweep that may choose a Dask cluster instead
DASK = {"dask", "distributed"}
# Third-party packages too slow to import with `import bench` (they stay inside the functions that use them).
HEAVY = {"litellm", "mlflow", "plotly", "polars", "pandas", "papermill", "nbconvert", "nbformat", "playwright",
         "llama_cpp", "jupyter_client", "ipywidgets", "IPython", "pyarrow", "numpy", "scipy", "opentelemetry",
         "aiohttp", "yaml", "pydantic", "tqdm", "dask", "distributed", "huggingface_hub", "nbclient", "sqlalchemy",
         "psycopg2", "tiktoken", "tiktoken_ext", "PIL", "jsonschema"}


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
        raise AssertionError(f"{module} is in no layer: add it to LAYERS in {Path(__file__).name} and docs/architecture.md")
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


def _imports_of(name: str) -> set[str]:
    """The top-level packages a module imports, anywhere in its source."""
    roots = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def cluster_imports(graph: dict[str, set[str]]) -> list[str]:
    """Return each import of bench.sweep.cluster by a local sweep module other than SWEEP_CHOOSER."""
    def in_cluster(module: str) -> bool:
        return module == "bench.sweep.cluster" or module.startswith("bench.sweep.cluster.")
    return [f"{src} imports {dst}" for src, dsts in sorted(graph.items())
            if src.startswith("bench.sweep") and not in_cluster(src) and src != SWEEP_CHOOSER
            for dst in sorted(dsts) if in_cluster(dst)]


def test_the_local_sweep_reads_on_its_own():
    """Only bench.sweep.command chooses a cluster; the rest of the local path never imports bench.sweep.cluster."""
    bad = cluster_imports(import_graph())
    assert not bad, f"only {SWEEP_CHOOSER} may import bench.sweep.cluster:\n" + "\n".join(bad)
    assert any(d.startswith("bench.sweep.cluster") for d in import_graph()[SWEEP_CHOOSER]), \
        f"{SWEEP_CHOOSER} is named the chooser but imports no bench.sweep.cluster: update SWEEP_CHOOSER"


def test_the_cluster_check_catches_a_local_module_importing_the_cluster():
    graph = {"bench.sweep.driver": {"bench.sweep.cluster.tasks"}, SWEEP_CHOOSER: {"bench.sweep.cluster"},
             "bench.sweep.cluster.tasks": {"bench.sweep.executions"}, "bench.sweep": {"bench.sweep.cluster"}}
    assert cluster_imports(graph) == ["bench.sweep imports bench.sweep.cluster",
                                      "bench.sweep.driver imports bench.sweep.cluster.tasks"]


def test_dask_is_imported_only_by_the_cluster_half_of_the_sweep():
    outside = [name for name in MODULES if _imports_of(name) & DASK
               and not name.startswith(("bench.sweep.cluster", "bench.testing"))]
    assert not outside, f"import dask/distributed only in bench/sweep/cluster/: {outside}"


PRODUCES = {"collect": "candidates", "judge": "judgments"}  # a stage's module is named by what it produces


@pytest.mark.parametrize("stage", STAGES)
def test_collect_and_judge_have_the_same_shape(stage):
    """A package with a face, its stage in the module named by the records it makes (``<stage>_stage``,
    ``<Stage>Result``, ``<stage>_counts``-style counts), driven by ``bench.stage_runs.run_<stage>``."""
    assert MODULES.get(f"bench.{stage}", Path()).name == "__init__.py", f"bench/{stage}/ must be a package"
    module = PRODUCES[stage]
    tree = ast.parse(MODULES[f"bench.{stage}.{module}"].read_text())
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    assert {f"{stage}_stage", f"{stage.capitalize()}Result"} <= defined, f"bench/{stage}/{module}.py: {sorted(defined)}"
    assert any(n.endswith("_counts") for n in defined), f"bench/{stage}/{module}.py: no saved/planned counts"
    runners = {n.name for n in ast.parse(MODULES["bench.stage_runs"].read_text()).body
               if isinstance(n, ast.AsyncFunctionDef)}
    assert f"run_{stage}" in runners, f"bench/stage_runs.py must define run_{stage}"
    assert "bench.pipeline" not in MODULES, "bench/pipeline.py is split into bench/run.py and bench/stage_runs.py"


# -- private names stay in their package; benchmarks use bench's public names ------------------------------
BENCHMARKS = {f"benchmarks.{p.stem}": p for p in sorted((ROOT / "benchmarks").glob("*.py"))}


def _import_targets(node: ast.Import | ast.ImportFrom, here: str, package: bool) -> list[str]:
    """The dotted names an import statement reaches (``a.b`` of ``import a.b``, ``a.b.c`` of ``from a.b import c``),
    a relative one resolved against ``here`` (``package``: ``here`` is a package's ``__init__``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        parts = here.split(".") if package else here.split(".")[:-1]
        base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
    return [f"{base}.{a.name}" for a in node.names]


def private_owner(target: str) -> str | None:
    """Return the package a bench ``target`` is private to (its first ``_name`` part: a module or a name), or None.

    A private module belongs to the package that holds it; a private name to its module's package."""
    parts = target.split(".")
    if parts[0] != "bench":
        return None
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            holder = ".".join(parts[:i])
            held_by_package = holder in MODULES and MODULES[holder].name == "__init__.py"
            return holder if held_by_package else holder.rsplit(".", 1)[0]
    return None


def private_imports(sources: dict[str, Path]) -> list[str]:
    """Return each import, in these modules, of a private module or name of a package the importer is not in."""
    found = []
    for here, path in sources.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in _import_targets(node, here, path.name == "__init__.py"):
                owner = private_owner(target)
                if owner and here != owner and not here.startswith(owner + "."):
                    found.append(f"{here} (line {node.lineno}) imports {target}, private to {owner}")
    return found


def test_no_package_imports_another_packages_private_modules_or_names():
    bad = private_imports(MODULES)
    assert not bad, "make the name public where another package needs it, or ask its owner:\n" + "\n".join(bad)


def test_benchmarks_use_bench_through_public_names_and_an_ordinary_import():
    """Benchmarks run from the installed package: no private name, no tests module, no sys.path edit."""
    bad = private_imports(BENCHMARKS)
    for name, path in BENCHMARKS.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                bad += [f"{name} (line {node.lineno}) imports {t}" for t in _import_targets(node, name, False)
                        if t.split(".")[0] == "tests"]
            elif isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", "") == "sys":
                bad.append(f"{name} (line {node.lineno}) edits sys.path: bench is installed (pip install -e .)")
    assert BENCHMARKS and not bad, "\n".join(bad)


def test_the_private_check_finds_each_form(tmp_path):
    assert private_owner("bench.models._litellm.litellm") == "bench.models"  # a private module
    assert private_owner("bench.core.store._KINDS") == "bench.core"  # a private name of a module
    assert private_owner("bench._prices") == "bench" and private_owner("bench.core.store.RunStore") is None
    assert private_owner("bench.__version__") is None and private_owner("os._exit") is None
    sources = {"bench.judge.x": tmp_path / "x.py", "bench.core.y": tmp_path / "y.py", "benchmarks.z": tmp_path / "z.py"}
    sources["bench.judge.x"].write_text("from bench.core.store import _KINDS\nfrom ._asking import ask\n")
    sources["bench.core.y"].write_text("from .store import _KINDS\nimport bench._prices\n")
    sources["benchmarks.z"].write_text("import bench.models._litellm\nfrom bench import _prices\n")
    assert private_imports(sources) == [
        "bench.judge.x (line 1) imports bench.core.store._KINDS, private to bench.core",
        "benchmarks.z (line 1) imports bench.models._litellm, private to bench.models",
        "benchmarks.z (line 2) imports bench._prices, private to bench"]


# Which kind of model a route holds is its provider's to know (bench.models.providers): elsewhere code asks
# ``route.provider`` for a capability instead of testing for a kind. Modules that define a kind may name it.
KIND_OWNERS = ("bench.models.providers", "bench.models.dry", "bench.models.local", "bench.testing")
KIND_TESTS = {"is_local", "is_dry", "self_hosted"}  # predicates and flags that name a kind of model
KIND_VALUES = {"dry", "local", "dry/", "local/"}  # a transport, vendor or prefix that names a kind of model


def _constants(node: ast.expr) -> set[object]:
    if isinstance(node, ast.Constant):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant)}
    return set()


def kind_branches(source: str) -> list[str]:
    """Return each place ``source`` tests which kind of model it holds, rather than asking its provider."""
    found = []
    for node in ast.walk(ast.parse(source)):
        name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
        if name in KIND_TESTS:
            found.append(f"line {node.lineno}: {name}")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = {s.attr for s in sides if isinstance(s, ast.Attribute)} & {"transport", "vendor", "provider"}
            if named and set().union(*map(_constants, sides)) & KIND_VALUES:
                found.append(f"line {node.lineno}: {'/'.join(sorted(named))} compared with a kind of model")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith"
              and any(_constants(a) & KIND_VALUES for a in node.args)):
            found.append(f"line {node.lineno}: startswith a kind's prefix")
    return found


def test_only_the_providers_know_which_kind_of_model_a_route_holds():
    bad = [f"{name}: {hit}" for name, path in MODULES.items() if not name.startswith(KIND_OWNERS)
           for hit in kind_branches(path.read_text())]
    assert not bad, "ask route.provider (bench.models.providers) instead of testing the kind:\n" + "\n".join(bad)


def test_the_kind_check_catches_branches_and_spares_settings():
    branches = ("if route.is_local: pass", "x = dry.is_dry(m)", "if route.transport == 'dry': pass",
                "ok = route.vendor in ('local', 'openai')", "m.startswith('local/')", "if r.self_hosted: pass")
    assert all(kind_branches(src) for src in branches)
    legit = ("from bench.models.dry import is_dry", "if spec.transport == 'auto': pass",
             "if route.transport == 'direct': pass", "if route.provider.launches: pass", "s.startswith('local:')")
    assert not any(kind_branches(src) for src in legit)


def test_routing_and_the_batch_api_do_not_import_each_other():
    """The routing reads the batch settings (bench.models.batch_policy), never the Batch API machinery."""
    graph = import_graph()
    seen, todo = set(), ["bench.models.routing"]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    reached = sorted(m for m in seen if m.startswith("bench.models.batches"))
    assert not reached, f"bench.models.routing reaches {reached}"
    assert "bench.models.batches.policy" not in MODULES, "the batch settings live in bench.models.batch_policy"


def test_no_two_modules_share_a_name_that_means_a_stage():
    """Modules are named by what they produce: no ``stage.py`` or ``stages.py`` anywhere in bench (four did)."""
    alike = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "bench").rglob("*.py")
                   if p.name in {"stage.py", "stages.py"})
    assert not alike, f"name these by what they produce: {alike}"
