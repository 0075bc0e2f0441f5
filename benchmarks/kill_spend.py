"""What a run records against what the provider billed, after a collect is SIGKILLed N times and then finished.

The scenario of tests/core/test_kill_spend.py: 120 items on the loopback fake provider (60 ms latency, cap 4,
``max_tokens: 8`` for replies of 3-4 tokens, output-heavy prices), a ``bench sweep`` killed with its process group
each time ``--step`` more requests reached the provider, then a finishing sweep. The fake provider bills every
reply it sends and, with ``bill_hung_up``, every request whose client hung up at the kill (a provider that finishes
a reply bills it). Per kill count it prints recorded / billed and where the recorded spend comes from: the
records, the requests in flight at the kills (estimated) and the cached replies no record had claimed.

    python benchmarks/kill_spend.py [--kills 3 4 12 20] [--step 6]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from bench.core.journal import read_repeats
from bench.core.spend import recorded_spend
from bench.testing import grids
from bench.testing.fake_provider import FakeProvider

ITEMS, CAP, MAX_TOKENS = 120, 4, 8
PRICE = {"input_per_mtok": 10.0, "output_per_mtok": 400.0}
BILL = {"input": 10.0, "output": 400.0}


def killed(tmp: Path, params: Path, fake: FakeProvider, step: int) -> None:
    """Start a sweep and SIGKILL its process group once ``step`` more requests reached the provider."""
    seen = fake.stats()["requests"]
    with grids.started(tmp, *grids.sweep_args(params), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       drop=("BENCH_CACHE",)) as proc:
        deadline = time.monotonic() + 120
        while fake.stats()["requests"] < seen + step:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the sweep ended (or sent nothing in 120 s) before kill: {proc.returncode}")
            time.sleep(0.005)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    runs = str(tmp / "runs")
    while any(_runs_of(p) == runs for p in psutil.process_iter()):  # its kernel, in a session of its own
        time.sleep(0.05)


def _runs_of(proc: psutil.Process) -> str | None:
    try:
        return proc.environ().get("BENCH_RUNS") if proc.pid != os.getpid() else None
    except (psutil.Error, OSError):
        return None


def trial(kills: int, step: int, fake: FakeProvider) -> dict[str, Any]:
    """Run one kill count; return the bill, the recorded spend and its parts."""
    fake.reset()
    fake.configure(latency_ms=60, bill_per_mtok=BILL, bill_hung_up=True)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        entry = grids.model("m1", fake.url, price=PRICE, params={"max_tokens": MAX_TOKENS})
        params = grids.grid(tmp / "k.yaml", fake.url, name="k", topics=ITEMS, models=[entry],
                            limits={"max_concurrency": CAP, "timeout_s": 10, "retries": 0})
        t0 = time.monotonic()
        for _ in range(kills):
            killed(tmp, params, fake, step)
        fake.configure(latency_ms=0)
        done = grids.sweep(tmp, params, drop=("BENCH_CACHE",))
        if done.returncode != 0:
            raise SystemExit(done.stdout[-2000:] + done.stderr[-2000:])
        run_dir = tmp / "runs" / "k"
        spend, repeats, bill = recorded_spend(run_dir), read_repeats(run_dir), fake.stats()["billed"]
        return {"kills": kills, "billed_usd": round(bill["usd"], 6), "recorded_usd": spend.usd,
                "ratio": round(spend.usd / bill["usd"], 4), "estimated_usd": spend.lost_in_flight_usd,
                "records_usd": round(spend.usd - spend.lost_in_flight_usd, 6), "lost": spend.lost_in_flight,
                "replies": bill["replies"], "hung_up_billed": bill["replies"] - fake.stats()["statuses"].get("200", 0),
                "requests": fake.stats()["requests"],
                "unclaimed": len(repeats.get("unclaimed", [])), "seconds": round(time.monotonic() - t0, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kills", type=int, nargs="+", default=[3, 4, 12, 20])
    ap.add_argument("--step", type=int, default=6, help="requests the provider receives between kills (default 6)")
    a = ap.parse_args()
    rows = []
    with FakeProvider() as fake:
        for kills in a.kills:
            row = trial(kills, a.step, fake)
            rows.append(row)
            print(f"{kills:>3} kills: recorded ${row['recorded_usd']:.4f} / billed ${row['billed_usd']:.4f} = "
                  f"{row['ratio']:.2f}x; records ${row['records_usd']:.4f}, estimated ${row['estimated_usd']:.4f} "
                  f"for {row['lost']} request(s) in flight; {row['replies']} replies billed ({row['hung_up_billed']} "
                  f"hung up) of {row['requests']} requests; {row['unclaimed']} killed requests found cached "
                  f"(unclaimed); {row['seconds']} s", flush=True)
    held = all(1.0 <= r["ratio"] <= 1.5 for r in rows)
    print(json.dumps({"rows": rows, "held": held}))
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
