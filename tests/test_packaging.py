"""The install story: pyproject is the source of truth; environment.yml, README and CI agree with it."""

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_environment_yml_installs_every_extra_of_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    python = next(d for d in deps if isinstance(d, str) and d.startswith("python"))
    assert python.split("=")[-1] == "3.11"
    assert ">=3.11" in project["requires-python"]
    pip_lines = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    (editable,) = [ln for ln in pip_lines if ln.startswith("-e .")]
    extras = set(re.search(r"\[(.*)\]", editable).group(1).split(","))
    assert extras == set(project["optional-dependencies"]), "environment.yml and pyproject extras drifted"


def test_makefile_installs_the_same_extras_as_environment_yml():
    make = (ROOT / "Makefile").read_text()
    env = (ROOT / "environment.yml").read_text()
    assert re.search(r"-e \.\[(.*?)\]", env).group(1) == re.search(r"-e '\.\[(.*?)\]'", make).group(1)


def test_ci_runs_exactly_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^\s*(make \w[\w-]*)", quick.split("```", 2)[1], flags=re.M)
    assert len(commands) == 2, f"the quick start must be exactly two commands, found {commands}"
    ci = [ln.strip() for ln in (ROOT / ".ci/run").read_text().splitlines() if ln.strip().startswith("make")]
    assert ci == [commands[1]]


def test_import_bench_is_cheap():
    code = ("import sys, bench, bench.core.records, bench.core.store, bench.models.client, bench.models.preflight, bench.cli, bench.models.local.manager, "
            "bench.report, bench.report.render, bench.report.display, bench.review, bench.tracking\n"
            "heavy = {'litellm', 'mlflow', 'plotly', 'polars', 'papermill', 'pandas'}\n"
            "print(sorted(heavy & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_make_lab_passes_allow_root_only_when_root_and_binds_loopback():
    """As root (containers), Jupyter refuses to start without --allow-root; JupyterLab listens on loopback."""
    out = subprocess.run(["make", "-n", "lab"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    line = next(ln for ln in out.splitlines() if "jupyter lab" in ln)
    assert "--ip=127.0.0.1" in line
    flags = subprocess.run(["sh", "-c", "echo " + line.split("--ip=127.0.0.1", 1)[1]], capture_output=True,
                           text=True, check=True).stdout
    assert ("--allow-root" in flags) == (os.getuid() == 0)


def test_embedded_model_tests_skip_with_one_line_when_the_local_extra_is_missing():
    """Without the 'local' extra, the embedded-model tests are skipped, saying how to install it."""
    code = ("import sys; sys.modules['llama_cpp'] = None; import pytest; "
            "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '-rs', 'tests/models/test_local.py', "
            "'tests/models/test_client_local.py']))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:]
    assert "failed" not in out.stdout and " skipped" in out.stdout
    assert "needs the 'local' extra (llama_cpp missing): pip install -e '.[local]'" in out.stdout
