"""An Airflow DAG that runs a nightly gated `bench sweep`, its exit code mapped to the task's state by bench itself.

Copy it into Airflow's dags folder on a machine that has bench installed (the same environment as the workers
that run the task) and a checkout of the project holding the params file (``WORKDIR``). The mapping is
bench.core.exit_codes (docs/sweeps.md, How a sweep ends; docs/orchestration.md):

- ``success`` (0): the task succeeds;
- ``retry`` (3: items still failed; 130: interrupted): the task raises ``AirflowException``, so Airflow retries
  it after ``retry_delay``, up to ``retries``; each retry is the same `bench sweep`, which asks only the failed
  or missing items (what is done stays done);
- ``fail`` (1 crashed, 2 bad input, 4 the budget, 5 a gate failed, 6 a gate cannot decide): ``AirflowFailException``,
  failed at once without a retry: running it unchanged would not help.

Written for Airflow 2 (``airflow.decorators``; Airflow 3 has the same ``dag`` and ``task`` in ``airflow.sdk``).
Airflow is not a dependency of bench and is not installed in its test environment: the tests compile this
file and check that it takes the mapping from bench (tests/sweep/test_exit_codes.py).
"""

from __future__ import annotations

import subprocess
from datetime import datetime, timedelta

from airflow.decorators import dag, task
from airflow.exceptions import AirflowException, AirflowFailException

from bench.core.exit_codes import Action, ExitCode, task_action

WORKDIR = "/srv/bench"  # the checkout: params/, rubrics/ and runs/ are relative to it
PARAMS = "params/tips.yaml"  # a params file with a gates: section
JUNIT = "reports/tips-gates.xml"  # the gates' results, for whatever reads JUnit XML


def _named(code: int) -> str:
    """Return ``3 (FAILED_ITEMS)``, or the bare number of a code bench never exits with (a signal's)."""
    return f"{code} ({ExitCode(code).name})" if code in ExitCode._value2member_map_ else str(code)


@dag(schedule="0 2 * * *", start_date=datetime(2026, 1, 1), catchup=False, max_active_runs=1, tags=["bench"],
     default_args={"retries": 2, "retry_delay": timedelta(minutes=10)})
def bench_nightly_sweep() -> None:
    """Every night at 02:00: the sweep, then its gates (a failed gate fails the DAG run, with no retry)."""

    @task(execution_timeout=timedelta(hours=8))
    def sweep() -> None:
        code = subprocess.run(["bench", "sweep", PARAMS, "--junit", JUNIT], cwd=WORKDIR, check=False).returncode
        action = task_action(code)
        if action is Action.SUCCESS:
            return
        message = f"bench sweep {PARAMS} exited {_named(code)}: {action.value} (docs/sweeps.md, How a sweep ends)"
        if action is Action.RETRY:
            raise AirflowException(message)  # retried: the next attempt asks only what is failed or left
        raise AirflowFailException(message)  # failed now, never retried

    sweep()


bench_nightly_sweep()
