"""The exit codes' table: bench.core.exit_codes against docs/sweeps.md's table, the codes the CLI returns, the
Airflow DAG of docs/orchestration.md, scripts/nightly.sh run end to end against the fake provider, and a sweep whose
execution crashes (exit 1). Exit 3 (items still failed): tests/sweep/test_sweep.py; 2, 4, 5: the folders of their
subjects."""

from __future__ import annotations

import py_compile
import re
import subprocess
import sys
from pathlib import Path


from bench.core import outcome
from bench.core.exit_codes import Action, ExitCode, main, mlflow_status, task_action
from bench.gates import EXIT_GATE_FAILED
from bench.core.records import Candidate
from bench.core.store import RunStore
from bench.testing import grids
from bench.testing.grids import ROOT, env
from tests.sweep.test_sweep import sweep_runs

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
    """Run scripts/nightly.sh PARAMS JUNIT with bench from this checkout's interpreter, its sweeps without their
    report and MLflow run (BENCH, the command that runs bench, adds --no-report --no-track: neither is the script's)."""
    quiet = tmp_path / "bench-quiet"
    quiet.write_text(f'#!/bin/sh\nexec {sys.executable} -m bench "$@" --no-report --no-track\n')
    quiet.chmod(0o755)
    extra = {"BENCH": str(quiet), "PYTHON": sys.executable, "NIGHTLY_ATTEMPTS": str(attempts), "NIGHTLY_RETRY_S": "0"}
    return subprocess.run(["bash", str(NIGHTLY), str(params), str(tmp_path / "gates.xml")], cwd=ROOT,
                          env=env(tmp_path, **extra), capture_output=True, text=True, timeout=600)


def nightly_grid(tmp_path: Path, url: str, floor: float) -> Path:
    return grids.grid(tmp_path / "nightly.yaml", url, name="nightly", topics=8,  # a gate on 3 cannot decide (6)
                      judges=[grids.judge("grader", url, name="judge")], gates={"min": floor})


def test_the_nightly_script_exits_with_its_sweeps_code_and_retries_failed_items_up_to_its_attempts(tmp_path, fake):
    gated = tmp_path / "gated"
    gated.mkdir()
    for floor, code in ((5.5, 5), (1, 0)):  # a failed gate, then one that passes on the same (cached) run folder
        result = nightly(gated, nightly_grid(gated, fake.url, floor))
        assert result.returncode == code, result.stdout + result.stderr
        assert (gated / "gates.xml").exists()
        assert result.stdout.count("nightly: attempt") == 1  # a failed gate and success: never run twice
    retried = tmp_path / "retried"  # runs and response cache of its own: t1 is asked again
    retried.mkdir()
    fake.configure(replies=[{"match": "about t1.", "status": 503}])  # t1 fails on every attempt
    result = nightly(retried, nightly_grid(retried, fake.url, 1), attempts=2)
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stdout.count("nightly: attempt") == 2 and "retry" in result.stdout


def test_a_crashed_execution_stops_the_stages_after_it_its_report_and_tracking(tmp_path, fake):
    """`bench sweep --jobs 2`, report and MLflow on, where one of the two collect executions cannot append to its
    shard: it fails (exit 1), the other finishes, judging does not start, no report is rendered, and the live MLflow
    run ends FAILED with its progress only; the failed execution's paid replies are kept (a rescue file)."""
    prompts = [grids.prompt("p", "One tip about {topic}."), grids.prompt("q", "Another tip about {topic}.")]
    params = grids.grid(tmp_path / "h.yaml", fake.url, name="h", topics=3, prompts=prompts,
                        judges=[grids.judge("grader", fake.url)])
    run_dir = tmp_path / "runs/h"
    blocker = run_dir / "candidates.job1.jsonl"
    blocker.parent.mkdir(parents=True)
    blocker.symlink_to(tmp_path / "no-such-folder" / "x")  # job1 cannot append: its execution fails
    out = grids.sweep(tmp_path, params, "--jobs", "2", report=True, track=True)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    assert "collect.job1: FAILED" in out.stdout and "01_collect.job1.ipynb" in out.stdout
    assert "collect.job2: ok" in out.stdout
    lines = (run_dir / "candidates.job2.jsonl").read_bytes().splitlines()
    assert len({Candidate.model_validate_json(ln).id for ln in lines}) == 3
    # job1's replies were paid for: they are kept in a rescue file that readers merge, never asked again
    assert len(RunStore(run_dir).done_ids(Candidate)) == 6
    assert "judge: not started, because collect.job1 failed" in out.stdout
    assert not list((run_dir / "notebooks").glob("02_judge*.ipynb"))
    assert "report and tracking: skipped, the run is incomplete" in out.stdout
    assert not (tmp_path / "reports/h").exists() and "tracking: logged" not in out.stdout
    (parent,) = sweep_runs(run_dir)  # the live run: FAILED, with its progress and nothing the end would log
    assert parent.info.status == "FAILED" and parent.data.tags["bench.exit_code"] == "1"
    assert "bench.grid" not in parent.data.tags and "progress.collect.done" in parent.data.metrics
    assert not sweep_runs(run_dir, level="cell")
