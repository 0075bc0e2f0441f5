"""The same grid through the local pool (`bench sweep --jobs 2`) and through Dask (2 loopback workers), in one run.

Grid: 4 models × 4 prompts = 16 cells × S scenarios on the loopback fake provider (100 ms a request); each
model has its own max_concurrency (2, 3, 4, 6: 15 together) under limits.max_concurrency 12, so no way can
exceed 12 / 0.1 s = 120 requests/s. Each way runs the whole `bench sweep` command (--no-report --no-track) in
a fresh runs folder (no cache hit); the fake provider is reset between ways.

  local  bench sweep --jobs 2: two papermill executions of 8 cells each, side by side
  dask   bench sweep --cluster ADDRESS: one execution per cell (16 Dask tasks) on a scheduler and 2 worker
         processes on 127.0.0.1 (bench.testing.dask_cluster), --nthreads executions at a time per worker

Per way: wall (the command, start to exit), requests/s (the provider's request count / wall), start-up (the
command's start to its first execution's start: imports, preflight; Dask: connect, check every worker), the
span of an execution's requests, per-execution overhead (an execution's time outside that span: kernel start,
imports, parameters, opening the run, saving the notebook; from runs/<sweep>/executions.jsonl and the
candidates' times), slot idle time per execution, and the peak requests in flight per model against its cap.
A tiny grid (4 models × P prompts × 1 scenario, one execution per cell on both ways: local --jobs 2
--per-cell) then isolates the fixed cost of one execution. Each Dask sweep gets a fresh cluster whose workers
have imported papermill and bench first (as on a cluster in use; that import time is printed).

Scaling inputs (for docs/scaling.md): the scheduler's task rate (2,000 trivial tasks on
the same loopback cluster), the sweep's lease server (every capped request takes two leases from the driver:
its model's and the sweep's), and how fast one store shard appends records (write + fsync per append).
The last line is one JSON object for scripts. --rounds N reports medians (peaks: the largest of any round).

    python benchmarks/cluster.py [--scenarios 25] [--tiny-prompts 2] [--nthreads 1] [--rounds 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import tempfile
import textwrap
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime
from multiprocessing import get_context
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # inherited by the workers and every kernel

from bench.core.executions import read_attempts  # noqa: E402
from bench.core.records import Candidate, Usage, cell_key  # noqa: E402
from bench.core.store import RunStore  # noqa: E402
from bench.models.ratelimit import SWEEP_KEY, TOKEN_ENV, Caps, LeaseServer, RemoteLimiter  # noqa: E402
from bench.testing.dask_cluster import LoopbackDaskCluster  # noqa: E402
from bench.testing.fake_provider import FakeProvider  # noqa: E402
from bench.testing.grids import generate, grid, model, prompt, sweep  # noqa: E402

MODELS = (("m1", "fake-a", 2), ("m2", "fake-b", 3), ("m3", "fake-c", 4), ("m4", "fake-d", 6))  # id, name, cap
GLOBAL_CAP = 12
BUDGET_S = 1800  # one sweep on a loaded 2-core machine


def write_grid(path: Path, url: str, name: str, prompts: int, scenarios: int) -> Path:
    """4 capped models × ``prompts`` prompts × ``scenarios`` scenarios under the global cap."""
    return grid(path, url, name=name,
                models=[model(mid, url, name=fake, params={"max_tokens": 16}, max_concurrency=cap)
                        for mid, fake, cap in MODELS],
                prompts=[prompt(f"p{k}", f"Variant {k}, task {{i}}: one tip.") for k in range(1, prompts + 1)],
                scenarios=generate(i=list(range(scenarios))),
                limits={"max_concurrency": GLOBAL_CAP, "timeout_s": 30, "retries": 2})


def run_sweep(fake: FakeProvider, params: Path, folder: Path, name: str, args: list[str], latency_ms: float) -> dict:
    """Run one `bench sweep` in its own runs folder; return its wall time, the provider's stats and its executions."""
    fake.reset()
    fake.configure(latency_ms=latency_ms)
    t0, began = time.monotonic(), time.time()
    proc = sweep(folder, params, *args, timeout=BUDGET_S)  # the local way finds no cluster: none is inherited
    wall, ended = time.monotonic() - t0, time.time()
    if proc.returncode != 0:
        raise SystemExit(f"bench sweep {' '.join(args)} failed ({proc.returncode}):\n"
                         f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    stats = fake.stats()
    execs = executions(folder / "runs" / name)
    return {"wall": wall, "requests": stats["requests"], "rps": stats["requests"] / wall,
            "peaks": stats["peak_in_flight_by_model"], "peak_all": stats["peak_in_flight"], "executions": execs,
            "startup": min(e["start"] for e in execs) - began, "teardown": ended - max(e["end"] for e in execs)}


def _t(iso: str) -> float:  # a record's ISO time, as seconds since the epoch
    return datetime.fromisoformat(iso).timestamp()


def executions(run_dir: Path) -> list[dict]:
    """Each ok execution: its duration, its requests, and its time outside the span of those requests."""
    by_cell: dict[str, list[Candidate]] = defaultdict(list)
    for c in RunStore(run_dir).read(Candidate):
        if c.ok and c.usage is not None:
            by_cell[cell_key(c.model_id, c.prompt_id, c.prompt_version)].append(c)
    out = []
    for a in read_attempts(run_dir):
        if a["status"] != "ok":
            continue
        start, end = _t(a["started"]), _t(a["ended"])
        cells = a["cells"] or list(by_cell)
        reqs = [c for cell in cells for c in by_cell[cell]]
        first = min((_t(c.created_at) - (c.usage.latency_s or 0.0) for c in reqs), default=end)
        last = max((_t(c.created_at) for c in reqs), default=end)
        span = max(0.0, last - first)
        out.append({"name": a["name"], "worker": a["worker"], "start": start, "end": end, "seconds": end - start,
                    "requests": len(reqs), "span": span, "overhead": (end - start) - span,
                    "before": first - start, "after": end - last})
    return out


def summarize(r: dict, slots: int) -> dict:
    """The figures of one way: wall, rate, start-up, per-execution overhead, slot idle time per execution.

    Idle: ``slots`` executions could run at once from the first start to the last end; the time no execution
    filled a slot (dispatching the next one, or waiting for the slowest), per execution.
    """
    ex = r["executions"]
    over = [e["overhead"] for e in ex]
    span = max(e["end"] for e in ex) - min(e["start"] for e in ex)
    idle = max(0.0, slots * span - sum(e["seconds"] for e in ex)) / len(ex)
    return {"wall_s": round(r["wall"], 2), "requests": r["requests"], "rps": round(r["rps"], 1),
            "startup_s": round(r["startup"], 2), "teardown_s": round(r["teardown"], 2), "executions": len(ex),
            "workers": len({e["worker"] for e in ex}), "overhead_median_s": round(statistics.median(over), 2),
            "overhead_before_s": round(statistics.median(e["before"] for e in ex), 2),
            "overhead_after_s": round(statistics.median(e["after"] for e in ex), 2),
            "requests_span_median_s": round(statistics.median(e["span"] for e in ex), 2),
            "overhead_total_s": round(sum(over), 1), "idle_per_execution_s": round(idle, 2),
            "peaks": {k: r["peaks"].get(k, 0) for _m, k, _c in MODELS}, "peak_all": r["peak_all"]}


def print_way(label: str, s: dict) -> None:
    caps = "  ".join(f"{fake} {s['peaks'][fake]}/{cap}{'' if s['peaks'][fake] <= cap else ' OVER'}"
                     for _m, fake, cap in MODELS)
    split = f"({s['overhead_before_s']:.1f} + {s['overhead_after_s']:.1f})"
    print(f"  {label:7s} {s['requests']:8d} {s['wall_s']:7.1f} {s['rps']:7.1f} {s['startup_s']:8.1f} "
          f"{s['executions']:5d} {s['requests_span_median_s']:9.1f} {s['overhead_median_s']:15.1f} {split:16s} "
          f"{s['idle_per_execution_s']:9.1f}  {caps}  all {s['peak_all']}/{GLOBAL_CAP}")


TABLE_HEAD = (f"  {'way':7s} {'requests':>8s} {'wall s':>7s} {'req/s':>7s} {'start-up':>8s} {'execs':>5s} "
              f"{'reqs/exec':>9s} {'overhead/exec s':>15s} {'(before + after)':16s} {'idle/exec':>9s}  "
              f"peak in flight / cap, per model and all")


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


def _warm() -> None:
    import papermill  # noqa: F401, PLC0415 (what a worker's first execution imports)

    import bench.sweep.cluster.remote  # noqa: F401, PLC0415


def warm_workers(address: str) -> float:
    """Import what an execution needs on every worker (once per worker process); return how long that took."""
    from distributed import Client  # noqa: PLC0415 (distributed: 1 s of imports, the cluster part only)

    with Client(address, timeout="60s") as client:
        t0 = time.perf_counter()
        client.run(_warm)
        return round(time.perf_counter() - t0, 2)


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


def one_round(a: argparse.Namespace, fake: FakeProvider, tmp: Path, grids: dict[str, Path], r: int) -> dict:
    """One round: the main and the tiny grid locally, then each on a fresh cluster; then the scaling inputs."""
    slots = 2 * a.nthreads  # executions at once: --jobs 2 locally; 2 workers × --nthreads on Dask
    out: dict = {}
    tag = f"round {r + 1}/{a.rounds}: "
    for key, args in (("local", ["--jobs", "2"]), ("local_tiny", ["--jobs", "2", "--per-cell"])):
        print(f"{tag}local bench sweep {' '.join(args)} ({key}) …", flush=True)
        name = "cluster-tiny" if key.endswith("tiny") else "cluster-main"
        out[key] = summarize(run_sweep(fake, grids[name], tmp / f"{key}{r}", name, args, a.latency_ms), 2)
    for key in ("dask", "dask_tiny"):
        name = "cluster-tiny" if key.endswith("tiny") else "cluster-main"
        t0 = time.monotonic()  # a fresh cluster per sweep: its workers load the bench on disk now, as the driver does
        with LoopbackDaskCluster(2, nthreads=a.nthreads) as cluster:
            out.setdefault("cluster_start_s", round(time.monotonic() - t0, 2))
            warm = warm_workers(cluster.address)  # imports done, as on a cluster that already ran a sweep
            out.setdefault("worker_warmup_s", warm)
            print(f"{tag}dask, 2 workers × {a.nthreads} thread(s), cluster up in {time.monotonic() - t0:.1f}s "
                  f"({key}) …", flush=True)
            pids = [p.pid for p in [cluster.scheduler, *cluster.workers] if p is not None]
            cpu0 = cpu_seconds(pids)
            result = run_sweep(fake, grids[name], tmp / f"{key}{r}", name, ["--cluster", cluster.address],
                               a.latency_ms)
            out[key] = {**summarize(result, slots), "dask_cpu_s": round(cpu_seconds(pids) - cpu0, 2)}
            if key == "dask_tiny":
                print(f"{tag}{a.tasks} trivial tasks on the same cluster …", flush=True)
                out["scheduler"] = scheduler_rate(cluster.address, a.tasks)
        shutil.rmtree(cluster.folder, ignore_errors=True)  # its logs and workers' scratch: the processes are stopped
    print(f"{tag}the lease server and a store shard …", flush=True)
    out["lease_1"] = lease_rate(1, 1, 3.0)
    out["lease_n"] = lease_rate(2, 32, 3.0)
    out["store"] = store_rate(tmp / f"store{r}", 300, 256 * 20)
    return out


def combine(items: list, worst: bool = False) -> object:
    """Medians over rounds, figure by figure; a peak in flight is the largest of any round (the cap holds in each)."""
    if isinstance(items[0], dict):
        return {k: combine([i[k] for i in items], worst or k.startswith("peak")) for k in items[0]}
    numbers = [x for x in items if isinstance(x, (int, float))]
    if not numbers:
        return items[0]
    if worst:
        return max(numbers)
    mid = statistics.median(numbers)
    return int(mid) if all(isinstance(x, int) for x in numbers) and mid == int(mid) else round(mid, 3)


def measure(a: argparse.Namespace, fake: FakeProvider, tmp: Path) -> dict:
    """Warm up, run ``a.rounds`` rounds of every way, and return their medians."""
    grids = {"cluster-main": write_grid(tmp / "cluster-main.yaml", fake.url, "cluster-main", 4, a.scenarios),
             "cluster-tiny": write_grid(tmp / "cluster-tiny.yaml", fake.url, "cluster-tiny", a.tiny_prompts, 1)}
    print("warming up: one sweep of 4 requests, not counted (cold imports and file caches) …", flush=True)
    warm = write_grid(tmp / "cluster-warm.yaml", fake.url, "cluster-warm", 1, 1)
    run_sweep(fake, warm, tmp / "warm", "cluster-warm", [], a.latency_ms)
    return combine([one_round(a, fake, tmp, grids, r) for r in range(a.rounds)])


def report(a: argparse.Namespace, out: dict) -> dict:
    """Print the table and the scaling inputs; return the JSON figures."""
    limit = GLOBAL_CAP / (a.latency_ms / 1000)
    cells = len(MODELS) * 4
    print(f"\ngrid {len(MODELS)} models × 4 prompts = {cells} cells × {a.scenarios} scenarios = "
          f"{cells * a.scenarios} requests, {a.latency_ms:g} ms each; caps "
          f"{', '.join(f'{f} {c}' for _m, f, c in MODELS)}, global {GLOBAL_CAP} → at most {limit:.0f} req/s"
          + (f"; medians of {a.rounds} rounds (peaks: the largest)" if a.rounds > 1 else ""))
    print(TABLE_HEAD)
    slots = {"local": 2, "dask": 2 * a.nthreads}  # executions at once: --jobs 2; 2 workers × --nthreads
    ways = {"local": out["local"], "dask": out["dask"]}
    tiny = {"local": out["local_tiny"], "dask": out["dask_tiny"]}
    for label, s in ways.items():
        print_way(label, s)
    per_model = 4 * a.scenarios * a.latency_ms / 1000  # a model's requests one after the other
    ideal = max(cells * a.scenarios / limit, *(per_model / cap for _m, _f, cap in MODELS))
    print(f"  requests alone at the caps (the slowest model at its cap, or all at the global cap): {ideal:.1f}s;\n"
          f"  wall − that = what the way itself costs")
    print(f"\ntiny grid: {len(MODELS)} models × {a.tiny_prompts} prompts × 1 scenario = "
          f"{len(MODELS) * a.tiny_prompts} executions of 1 request each (local: --jobs 2 --per-cell)")
    print(TABLE_HEAD)
    for label, s in tiny.items():
        print_way(label, s)
    print(textwrap.fill(
        "start-up: the command's start → its first execution's start (imports, preflight; dask: connect, probe every "
        "worker, lease server). reqs/exec (median): an execution's first request → its last reply (waits on caps "
        "included). overhead/exec (median): an execution's own time outside that span; before: its start → first "
        "request (papermill, kernel start, imports, parameters, opening the run), after: last reply → its end "
        "(flush, notebook save, kernel shutdown). The tiny grid's overhead is the fixed cost of one execution "
        f"whatever its size. idle/exec: time a slot (local 2, dask {slots['dask']} executions at a time) held no "
        "execution, per execution: dispatching the next one, or waiting for the slowest. On a loaded 2-core "
        "machine, executions starting side by side slow each other: every figure includes that contention.",
        width=116, initial_indent="  ", subsequent_indent="  "))
    print_scaling(out)
    return {"grid": {"cells": cells, "scenarios": a.scenarios, "latency_ms": a.latency_ms, "global_cap": GLOBAL_CAP,
                     "caps": {f: c for _m, f, c in MODELS}, "limit_rps": limit, "nthreads": a.nthreads,
                     "rounds": a.rounds},
            "main": ways, "tiny": tiny, "cluster_start_s": out["cluster_start_s"],
            "worker_warmup_s": out["worker_warmup_s"], "scheduler": out["scheduler"],
            "lease_server": {"alone": out["lease_1"], "loaded": out["lease_n"]}, "store": out["store"]}


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", type=int, default=25, help="scenarios per cell of the main grid (16 cells)")
    ap.add_argument("--tiny-prompts", type=int, default=2, help="tiny grid: 4 models × this × 1 scenario")
    ap.add_argument("--nthreads", type=int, default=1, help="executions at once per Dask worker (1: as --jobs 2)")
    ap.add_argument("--latency-ms", type=float, default=100.0)
    ap.add_argument("--tasks", type=int, default=2000, help="trivial tasks for the scheduler's rate")
    ap.add_argument("--rounds", type=int, default=1, help="rounds of every way; medians are reported")
    a = ap.parse_args()
    if min(a.scenarios, a.tiny_prompts, a.nthreads, a.tasks, a.rounds) < 1 or a.latency_ms <= 0:
        ap.error("--scenarios, --tiny-prompts, --nthreads, --tasks and --rounds must be ≥ 1, --latency-ms > 0")
    with FakeProvider(latency_ms=a.latency_ms) as fake, tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        out = measure(a, fake, Path(tmp))
    figures = report(a, out)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
