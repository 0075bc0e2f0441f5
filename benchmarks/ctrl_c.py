"""Ctrl-C typed on a sweep's terminal: how many requests reach the provider after it.

Each trial starts `bench sweep` on a pty (bench.testing.terminal) against the fake provider (1.5 s latency, cap 4,
2 cells × 12 scenarios, a judge grading each answer as it arrives: 48 requests), waits for the 10th request,
types Ctrl-C once and waits for the command to end. It prints, per mode (the default path with MLflow on,
``--jobs 2``, ``--cluster local:2``), the requests the provider began to receive after the keypress, those it
held then, its exit code and the seconds it took to exit. Run it on two commits to compare them.

    python benchmarks/ctrl_c.py [--trials 2] [--modes default,jobs2,cluster]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bench.testing import grids
from bench.testing.fake_provider import FakeProvider
from bench.testing.terminal import Terminal

MODES = {"default": [], "jobs2": ["--jobs", "2"], "cluster": ["--cluster", "local:2", "--no-track"]}


def trial(fake: FakeProvider, args: list[str]) -> dict:
    """One sweep, one Ctrl-C after the 10th request; return what the provider saw after it."""
    fake.reset()
    fake.configure(latency_ms=1500)
    tmp = Path(tempfile.mkdtemp(prefix="bench-ctrl-c-"))
    prompts = [grids.prompt("p", "One tip about {topic}."), grids.prompt("q", "Another tip about {topic}.")]
    params = grids.grid(tmp / "g.yaml", fake.url, topics=12, prompts=prompts, judges=[grids.judge("grader", fake.url)],
                        limits={"max_concurrency": 4, "timeout_s": 60, "retries": 0})
    with Terminal(tmp, "sweep", str(params), *args) as term:
        term.wait_for(lambda: fake.stats()["requests"] >= 10, "10 requests", 600)
        t, t0 = term.press_ctrl_c(), time.monotonic()
        code = term.wait(600)
    exit_s = time.monotonic() - t0
    while fake.stats()["in_flight"]:
        time.sleep(0.1)  # polling the provider until what was given up ends there too
    spans = fake.timeline()["spans"]
    return {"after": sum(s > t for _m, s, _e in spans), "held": sum(s <= t < e for _m, s, e in spans),
            "requests": fake.stats()["requests"], "exit": code, "exit_s": round(exit_s, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--modes", default=",".join(MODES))
    opts = parser.parse_args()
    with FakeProvider() as fake:
        for mode in opts.modes.split(","):
            for _ in range(opts.trials):
                print(json.dumps({"mode": mode, **trial(fake, MODES[mode])}), flush=True)


if __name__ == "__main__":
    main()
