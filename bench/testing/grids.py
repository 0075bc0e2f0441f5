"""One params builder for tests and benchmarks (:func:`params`, written by :func:`grid`; entries by :func:`model`,
:func:`judge`, :func:`prompt`, :func:`generate`, :func:`rubric`), and the ``bench`` command run under a test's folder
(:func:`bench`, :func:`sweep`, :func:`started`) in the environment :func:`env` builds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import psutil
import yaml

from bench.testing.processes import tree

ROOT = Path(__file__).resolve().parents[2]  # the checkout: bench/testing/grids.py -> the project root
KEY_ORDER = ("name", "seed", "models", "prompts", "scenarios", "judges", "limits")  # as a params file reads
# never inherited by a bench subprocess: its own MLflow store, the bundled prices, no cluster it was not given
NOT_INHERITED = ("MLFLOW_TRACKING_URI", "BENCH_ONLINE_PRICES", "DASK_SCHEDULER_ADDRESS")
KIT_KEEPS = ("BENCH_CHROMIUM",)  # the one BENCH_* variable passed on: how the suite runs, not how bench behaves
ANCHORS = {1: "bad", 2: "weak", 3: "fair", 4: "good", 5: "great"}  # a rubric criterion's default 1-5 scale


class _NoAliasDumper(yaml.SafeDumper):
    """Writes a value shared by several entries (one ``price`` dict) in full each time, never as ``*id001``."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def model(mid: str, url: str, name: str | None = None, **extra: Any) -> dict[str, Any]:
    """Return a model entry on the fake provider (``openai/<name>`` at ``url``)."""
    return {"id": mid, "model": f"openai/{name or mid}", "api_base": url, **extra}


def judge(jid: str, url: str, rubric: str = "tip-v1", name: str | None = None, **extra: Any) -> dict[str, Any]:
    """Return a judge entry on the fake provider."""
    return {"id": jid, "model": f"openai/{name or jid}", "api_base": url, "rubric": rubric, **extra}


def prompt(pid: str, user: str, version: str = "v1", **extra: Any) -> dict[str, Any]:
    """Return a prompt entry (``system`` and other keys go in ``extra``)."""
    return {"id": pid, "version": version, **extra, "user": user}


def generate(**dimensions: list[Any]) -> dict[str, Any]:
    """Return a ``scenarios`` section generating the product of ``dimensions``."""
    return {"generate": {"dimensions": dimensions}}


def params(url: str, *, name: str = "g", topics: int = 4, **overrides: Any) -> dict[str, Any]:
    """Return a params file's content: one model, one prompt, ``topics`` generated scenarios, no judge; each
    override replaces a top-level key (``None`` leaves it out)."""
    data: dict[str, Any] = {
        "name": name, "seed": 1,
        "models": [model("m1", url)],
        "prompts": [prompt("p", "One tip about {topic}.")],
        "scenarios": generate(topic=[f"t{i}" for i in range(topics)]),
        "limits": {"max_concurrency": 8, "timeout_s": 10, "retries": 0},
    }
    data.update(overrides)
    ordered = [*(key for key in KEY_ORDER if key in data), *(key for key in data if key not in KEY_ORDER)]
    return {key: data[key] for key in ordered if data[key] is not None}


def grid(path: Path, url: str, *, name: str = "g", topics: int = 4, **overrides: Any) -> Path:
    """Write :func:`params` (same arguments) to ``path`` as YAML; return the path."""
    data = params(url, name=name, topics=topics, **overrides)
    path.write_text(yaml.dump(data, Dumper=_NoAliasDumper, sort_keys=False))
    return path


def rubric(path: Path, *criteria: str | tuple[str, dict[int, str]], marker: str | None = None) -> Path:
    """Write a rubric file (id: the file's name, version "1") with these criteria (a name, scored 1-5, or (name,
    {score: anchor}); none: ``quality``); return the path. Its instructions start with ``marker`` (default
    ``MARKER-<ID>-RUBRIC``), so that a ``replies`` rule of the fake provider answers this judge alone."""
    rid = path.stem
    lines = ["---", f"id: {rid}", 'version: "1"', "mode: rubric", "criteria:"]
    for criterion in criteria or ("quality",):
        cid, anchors = (criterion, ANCHORS) if isinstance(criterion, str) else criterion
        shown = ", ".join(f"{score}: {text}" for score, text in anchors.items())
        lines += [f"  - id: {cid}", f"    description: how good its {cid} is",
                  f"    scale: [{min(anchors)}, {max(anchors)}]", f"    anchors: {{{shown}}}"]
    lines += ["---", f"{marker or f'MARKER-{rid.upper()}-RUBRIC'}: grade the answer.", ""]
    path.write_text("\n".join(lines))
    return path


def strays(environ: dict[str, str] | os._Environ = os.environ) -> list[str]:
    """Return the ``BENCH_*`` variables of ``environ`` the kit does not set (all but ``KIT_KEEPS``)."""
    return sorted(k for k in environ if k.startswith("BENCH_") and k not in KIT_KEEPS)


def hermetic() -> list[str]:
    """Remove every stray ``BENCH_*`` variable (:func:`strays`) from this process's environment; return their names."""
    names = strays()
    for name in names:
        del os.environ[name]
    return names


def env(tmp_path: Path, *, drop: tuple[str, ...] = (), **extra: str) -> dict[str, str]:
    """Return a ``bench`` subprocess's environment: this one's less what it must not inherit, under ``tmp_path``."""
    gone = {*NOT_INHERITED, *drop, *strays()}
    kept = {k: v for k, v in os.environ.items() if k not in gone}
    return {**kept, "BENCH_RUNS": str(tmp_path / "runs"), "BENCH_REPORTS": str(tmp_path / "reports"),
            "PYTHONUNBUFFERED": "1", **extra}


def bench(tmp_path: Path, *args: str, timeout: float | None = 300, drop: tuple[str, ...] = (),
          **extra: str) -> subprocess.CompletedProcess:
    """Run ``python -m bench ARGS`` in :func:`env` (``drop``, ``extra``); return the finished process."""
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, env=env(tmp_path, drop=drop, **extra),
                          capture_output=True, text=True, timeout=timeout)


def sweep_args(params: Path, *args: str, report: bool = False, track: bool = False) -> list[str]:
    """Return the arguments of ``bench sweep PARAMS``: without its report and tracking unless asked, then ARGS."""
    return ["sweep", str(params), *([] if report else ["--no-report"]), *([] if track else ["--no-track"]), *args]


def sweep(tmp_path: Path, params: Path, *args: str, report: bool = False, track: bool = False,
          timeout: float | None = 300, drop: tuple[str, ...] = (), **extra: str) -> subprocess.CompletedProcess:
    """Run ``bench sweep PARAMS ARGS`` (with ``--no-report --no-track`` unless asked otherwise); return it finished."""
    return bench(tmp_path, *sweep_args(params, *args, report=report, track=track), timeout=timeout, drop=drop,
                 **extra)


@contextmanager
def started(tmp_path: Path, *args: str, stdout: Any = subprocess.PIPE, stderr: Any = subprocess.PIPE,
            drop: tuple[str, ...] = (), **extra: str) -> Iterator[subprocess.Popen]:
    """Start ``python -m bench ARGS`` in :func:`env`, in its own session; yield it; kill its whole tree on leaving."""
    proc = subprocess.Popen([sys.executable, "-m", "bench", *args], cwd=ROOT, env=env(tmp_path, drop=drop, **extra),
                            stdout=stdout, stderr=stderr, text=True, start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            descendants = tree(proc.pid)[1:]
            os.killpg(proc.pid, signal.SIGKILL)
            for child in descendants:
                with suppress(psutil.NoSuchProcess):
                    child.kill()
        proc.wait(timeout=60)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
