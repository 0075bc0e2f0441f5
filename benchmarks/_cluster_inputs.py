"""The inputs of the 100-worker scaling model (docs/scaling.md) that benchmarks/cluster.py measures beside its grids.

The Dask scheduler's task rate, the CPU of the cluster's own processes, the sweep's lease
server (every capped request takes two leases from the driver: its model's and the sweep's), and how fast one store
shard appends records (write + fsync per append); :func:`print_scaling` prints them from one round's figures.
"""

from __future__ import annotations

import asyncio
import os
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from bench.core.records import Candidate, Usage
from bench.core.store import RunStore
from bench.models.ratelimit import SWEEP_KEY, TOKEN_ENV, Caps, LeaseServer, RemoteLimiter

def scheduler_rate(address: str, n: int) -> dict:
    """Submit ``n`` trivial tasks at once (client.map) and time them to the last result: the scheduler's rate."""
    from distributed import Client  # noqa: PLC0415 (distributed: 1 s of imports, the cluster part only)

    with Client(address, timeout="60s") as client:
        client.gather(client.map(abs, range(-200, 0), pure=False))  # warm: connections, the function's pickle
        t0 = time.perf_counter()
        client.gather(client.map(abs, range(-n, 0), pure=False))
        seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        for i in range(200):  # one at a time, as a sweep submits its executions (round trip included)
            client.submit(abs, -i, pure=False).result()
        one = (time.perf_counter() - t0) / 200
    return {"tasks": n, "seconds": round(seconds, 3), "tasks_per_s": round(n / seconds, 1),
            "ms_per_task": round(1000 * seconds / n, 3), "round_trip_ms": round(1000 * one, 2)}


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes ``pids`` used themselves so far (their children excluded)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _lease_client(address: str, token: str, seconds: float, loops: int) -> int:
    """In a child process: ``loops`` coroutines each take a model lease and a sweep lease, release both, repeat."""
    os.environ[TOKEN_ENV] = token  # this process's environment only, as a kernel gets it

    async def main() -> int:
        limiter, done = RemoteLimiter(address), 0
        roomy = Caps(max_concurrency=100_000)  # the server's work, never a wait on a cap
        deadline = time.monotonic() + seconds

        async def loop() -> None:
            nonlocal done
            while time.monotonic() < deadline:
                a = await limiter.acquire("openai/fake-a @ http://127.0.0.1", roomy)
                b = await limiter.acquire(SWEEP_KEY, roomy)
                limiter.release(b)
                limiter.release(a)
                done += 1

        await limiter.acquire(SWEEP_KEY, roomy)  # connect and say hello before the clock runs
        await asyncio.gather(*(loop() for _ in range(loops)))
        return done

    return asyncio.run(main())


def lease_rate(procs: int, loops: int, seconds: float) -> dict:
    """Requests/s one TCP lease server (a thread, as in the driver) admits from ``procs`` processes."""
    server = LeaseServer(host="127.0.0.1")
    server.start()
    try:
        with ProcessPoolExecutor(procs, mp_context=get_context("spawn")) as pool:
            done = sum(pool.map(_lease_client, *zip(*[(server.address, server.token, seconds, loops)] * procs)))
    finally:
        server.stop()
    return {"processes": procs, "in_flight": procs * loops, "requests_per_s": round(done / seconds, 1),
            "ms_per_request": round(1000 * seconds * procs * loops / done, 3) if done else None}


def store_rate(folder: Path, single: int, chunked: int) -> dict:
    """Records/s one shard appends: one record per append (one fsync each), and 256 per append (the writer's chunk)."""
    recs = [Candidate(model_id="m1", model="openai/fake-a", prompt_id="p1", prompt_version="v1",
                      prompt_hash="0" * 12, scenario_id=f"s{i:08d}", params={"max_tokens": 16},
                      messages=[{"role": "user", "content": f"Variant 1, task {i}: one tip."}],
                      output=f"fake answer {i:016x} " * 4,
                      usage=Usage(prompt_tokens=12, completion_tokens=16, cost_usd=0.0, latency_s=0.1))
            for i in range(single + chunked)]
    store = RunStore(folder / "store-bench", shard="w1")
    t0 = time.perf_counter()
    for rec in recs[:single]:
        store.append([rec])
    one = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(single, single + chunked, 256):
        store.append(recs[i:i + 256])
    many = time.perf_counter() - t0
    size = store.path(Candidate).stat().st_size / len(recs)
    return {"record_bytes": round(size), "appends_per_s": round(single / one, 1),
            "ms_per_append": round(1000 * one / single, 3), "records_per_s_chunked": round(chunked / many, 1)}


def print_scaling(out: dict) -> None:
    """Print the inputs of the 100-worker scaling model (docs/scaling.md)."""
    sched, l1, ln, st, lt, dt, dm = (out[k] for k in ("scheduler", "lease_1", "lease_n", "store", "local_tiny",
                                                      "dask_tiny", "dask"))
    print("\nscaling inputs")
    print(f"  fixed cost per execution (tiny grid, median): local {lt['overhead_median_s']:.1f}s, "
          f"dask {dt['overhead_median_s']:.1f}s; sweep start-up: local {lt['startup_s']:.1f}s, "
          f"dask {dt['startup_s']:.1f}s")
    print(f"  cluster start (scheduler + 2 workers): {out['cluster_start_s']:.1f}s; a worker's first task imports "
          f"papermill and bench: {out['worker_warmup_s']:.1f}s,\n    once per worker process (done before each "
          f"dask sweep here, as on a cluster already in use)")
    print(f"  scheduler: {sched['tasks']} trivial tasks in {sched['seconds']:.2f}s = {sched['tasks_per_s']:.0f} "
          f"tasks/s ({sched['ms_per_task']:.2f} ms a task; Dask documents ~1 ms); one submit → result "
          f"{sched['round_trip_ms']:.1f} ms")
    print(f"  CPU of the scheduler and the 2 worker processes (papermill's side of each execution included, "
          f"kernels excluded):\n    {dm['dask_cpu_s']:.1f}s over the main sweep's {dm['executions']} executions, "
          f"{dt['dask_cpu_s']:.1f}s over the tiny one's {dt['executions']}")
    print(f"  lease server (one thread of the driver; 2 leases per capped request): {l1['ms_per_request']:.2f} ms "
          f"a request alone,\n    {ln['requests_per_s']:.0f} requests/s with {ln['in_flight']} in flight from "
          f"{ln['processes']} processes")
    print(f"  store, one shard ({st['record_bytes']} B a record): {st['appends_per_s']:.0f} appends/s of 1 record "
          f"({st['ms_per_append']:.2f} ms: write + fsync),\n    {st['records_per_s_chunked']:.0f} records/s in "
          f"chunks of 256 (a writer flushes every 0.5 s or 256 records)")


