"""The exit codes' table: bench.core.exit_codes against docs/sweeps.md's table, the codes the CLI returns, the
Airflow DAG of docs/orchestration.md, and scripts/nightly.sh run end to end against the fake provider."""

from __future__ import annotations

import py_compile
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core import outcome
from bench.core.exit_codes import Action, ExitCode, main, mlflow_status, task_action
from bench.gates import EXIT_GATE_FAILED
from bench.testing import grids
from bench.testing.grids import ROOT, env

DAG = ROOT / "examples/airflow/bench_sweep_dag.py"
NIGHTLY = ROOT / "scripts/nightly.sh"


def documented() -> dict[int, tuple[str, str]]:
    """Return docs/sweeps.md's exit code table: code -> (MLflow run status, orchestrator action)."""
    text = (ROOT / "docs/sweeps.md").read_text()
    table = text[text.index("| exit code | meaning | MLflow run | orchestrator |"):].split("\n\n")[0]
    rows = [ln.strip("|").split("|") for ln in table.splitlines()[2:]]
    assert rows and all(len(r) == 4 for r in rows), table
    return {int(r[0]): (r[2].strip(), r[3].strip()) for r in rows}


def test_the_documented_table_is_the_packages():
    table = documented()
    assert sorted(table) == sorted(int(c) for c in ExitCode)
    assert table == {int(c): (mlflow_status(c), task_action(c).value) for c in ExitCode}


def test_the_codes_are_the_ones_bench_returns():
    assert (outcome.EXIT_OK, outcome.EXIT_CRASHED, outcome.EXIT_BAD_INPUT, outcome.EXIT_FAILED_ITEMS,
            outcome.EXIT_BUDGET, outcome.EXIT_INTERRUPTED) == (ExitCode.OK, ExitCode.CRASHED, ExitCode.BAD_INPUT,
                                                              ExitCode.FAILED_ITEMS, ExitCode.BUDGET,
                                                              ExitCode.INTERRUPTED)
    assert EXIT_GATE_FAILED == ExitCode.GATE_FAILED


def test_the_issue_s_mapping_and_codes_bench_never_returns():
    assert [task_action(c) for c in (0, 3, 4, 5)] == [Action.SUCCESS, Action.RETRY, Action.FAIL, Action.FAIL]
    assert task_action(137) is Action.FAIL and mlflow_status(137) == "FAILED"  # killed by a signal: not ours
    assert [mlflow_status(c) for c in (0, 1, 3, 4, 5, 130)] == ["FINISHED", "FAILED", "FAILED", "KILLED", "FAILED",
                                                                "KILLED"]


def test_the_module_prints_the_action(capsys):
    assert main(["3"]) == 0 and capsys.readouterr().out == "retry\n"
    assert main(["x"]) == 2 and "usage" in capsys.readouterr().err


def test_the_airflow_dag_compiles_and_takes_the_mapping_from_bench(tmp_path):
    py_compile.compile(str(DAG), cfile=str(tmp_path / "dag.pyc"), doraise=True)  # Airflow is not installed here
    source = DAG.read_text()
    assert "from bench.core.exit_codes import" in source and "task_action" in source
    assert not re.search(r"returncode\s*(==|in)\s*[\d(\[]", source), "the DAG compares exit codes itself"


def nightly(tmp_path: Path, params: Path, attempts: int = 2) -> subprocess.CompletedProcess:
    """Run scripts/nightly.sh PARAMS JUNIT with bench from this checkout's interpreter."""
    extra = {"BENCH": f"{sys.executable} -m bench", "PYTHON": sys.executable, "NIGHTLY_ATTEMPTS": str(attempts),
             "NIGHTLY_RETRY_S": "0"}
    return subprocess.run(["bash", str(NIGHTLY), str(params), str(tmp_path / "gates.xml")], cwd=ROOT,
                          env=env(tmp_path, **extra), capture_output=True, text=True, timeout=600)


def nightly_grid(tmp_path: Path, url: str, floor: float) -> Path:
    return grids.grid(tmp_path / "nightly.yaml", url, name="nightly", topics=8,  # a gate on 3 cannot decide (6)
                      judges=[grids.judge("grader", url, name="judge")], gates={"min": floor})


@pytest.mark.parametrize("floor, code", [(1, 0), (5.5, 5)])
def test_the_nightly_script_runs_a_gated_sweep_and_exits_with_its_code(tmp_path, fake, floor, code):
    result = nightly(tmp_path, nightly_grid(tmp_path, fake.url, floor))
    assert result.returncode == code, result.stdout + result.stderr
    assert (tmp_path / "gates.xml").exists()
    assert result.stdout.count("nightly: attempt") == 1  # success and a failed gate: never run twice


def test_the_nightly_script_retries_failed_items_and_stops_at_its_attempts(tmp_path, fake):
    fake.configure(replies=[{"match": "about t1.", "status": 503}])  # t1 fails on every attempt
    result = nightly(tmp_path, nightly_grid(tmp_path, fake.url, 1), attempts=2)
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stdout.count("nightly: attempt") == 2 and "retry" in result.stdout
    assert fake.stats()["requests"] > 0
