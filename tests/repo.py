"""Paths of the repository under test, shared by test modules."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def params_files() -> list[Path]:
    """Return every params file the project ships (params/*.yaml and params/examples/*.yaml)."""
    files = sorted(p for folder in (REPO / "params", REPO / "params" / "examples")
                   for p in folder.glob("*.y*ml") if p.suffix in (".yaml", ".yml"))
    assert files, "the project ships params files (params/demo.yaml at least)"
    return files


def parameterized_copy(source: Path, target: Path, **parameters) -> Path:
    """Write ``source`` with its parameters cell overridden as papermill would (for nbval runs); return target."""
    import nbformat
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    nbformat.write(parameterize_notebook(load_notebook_node(str(source)), parameters), target)
    return target
