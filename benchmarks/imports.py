"""How long `import bench` (and the layers a command pulls in) takes, measured side by side in fresh interpreters.

Each number is the median over REPEATS fresh `python -c` processes of the import alone (timed inside the
process, so interpreter start-up is excluded); the target for `import bench` is 0.3 s. The heavy
third-party packages each import pulls in are listed: `import bench` must pull in none.

    .venv/bin/python benchmarks/imports.py
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

REPEATS = 7
TARGET_S = 0.3
MODULES = ["bench", "bench.core", "bench.models", "bench.config", "bench.stage_runs", "bench.analysis", "bench.cli"]
HEAVY = ["litellm", "mlflow", "plotly", "polars", "papermill", "pandas"]
CODE = ("import sys, time; t = time.perf_counter(); import {m}; dt = time.perf_counter() - t; "
        "print(dt, ','.join(sorted(set({heavy}) & set(sys.modules))))")


def measure(module: str) -> tuple[float, str]:
    times, heavy = [], ""
    for _ in range(REPEATS):
        out = subprocess.run([sys.executable, "-c", CODE.format(m=module, heavy=HEAVY)], capture_output=True,
                             text=True, check=True).stdout.split()
        times.append(float(out[0]))
        heavy = out[1] if len(out) > 1 else ""
    return statistics.median(times), heavy


def main() -> None:
    rows = {m: measure(m) for m in MODULES}
    base = rows["bench"][0]
    print(f"{'module':<16} {'median s':>9} {'× bench':>8}  heavy packages imported")
    for m, (s, heavy) in rows.items():
        print(f"{m:<16} {s:>9.3f} {s / base:>8.1f}  {heavy or '-'}")
    ok = base <= TARGET_S and not rows["bench"][1]
    print(f"import bench: {base:.3f} s (target ≤ {TARGET_S} s): {'ok' if ok else 'OVER'}")
    print(json.dumps({"import_bench_s": round(base, 4), "target_s": TARGET_S,
                      "modules": {m: round(s, 4) for m, (s, _h) in rows.items()}}))


if __name__ == "__main__":
    main()
