"""The same grid through the local pool (`bench sweep --jobs 2`) and through Dask (2 loopback workers), in one run.

Grid: 4 models × 4 prompts = 16 cells × S scenarios on the loopback fake provider (100 ms a request); each
model has its own max_concurrency (2, 3, 4, 6: 15 together) under limits.max_concurrency 12, so no way can
exceed 12 / 0.1 s = 120 requests/s. Each way runs the whole `bench sweep` command (--no-report --no-track) in
a fresh runs folder (no cache hit); the fake provider is reset between ways.

  local  bench sweep --jobs 2: two papermill executions of 8 cells each, side by side
  dask   bench sweep --cluster ADDRESS: the executions the sweep plans for the cluster's slots (the table prints how
         many), on a scheduler and 2 worker processes on 127.0.0.1 (bench.testing.dask_cluster), --nthreads
         executions at a time per worker

The bound: the requests alone at the caps (the slowest model's requests ÷ its cap × the latency, or all of them at
the global cap): 5.0 s on the main grid (25 scenarios). Each way's wall time is printed against it as a ratio,
``wall_s / bound``, with the issue's targets beside it: ≤ 2.0× both ways on the main grid (issue 46: kernels start
the ordinary way, with their executions; issue 34's 1.5× and 1.8× counted on kernels started ahead); a grid
10× larger (--big-scenarios, 250 by default; 0 skips it), run both ways too, ≤ 1.2× on both. "met" is true when
every ratio meets its target and no peak in flight exceeded its cap.

Per way: wall (the command, start to exit), requests/s (the provider's request count / wall), start-up (the
command's start to its first execution's start: imports, preflight; Dask: connect, check every worker), the
span of an execution's requests, per-execution overhead (an execution's time outside that span: kernel start,
imports, parameters, opening the run, saving the notebook; from runs/<sweep>/executions.jsonl and the
candidates' times), slot idle time per execution, and the peak requests in flight per model against its cap.
A tiny grid (4 models × P prompts × 1 scenario; local --jobs 2 --per-cell: one execution per cell; Dask: as the
sweep plans them) then isolates the fixed cost of one execution. Each Dask sweep gets a fresh cluster whose workers
have imported papermill and bench first (as on a cluster in use; that import time is printed).

The profile of the gap (main grid, both ways; benchmarks/_cluster_profile.py): start-up; each execution's time split
from its executed notebook's papermill times (kernel start, imports and opening the run, the stage cell, the output
cells, save and shutdown); idle slots; teardown; and, from the fake provider's timeline of requests, each model's
seconds at its cap and below it while it still had requests not yet sent, with the executions running then.

Scaling inputs (for docs/scaling.md): the scheduler's task rate (2,000 trivial tasks on
the same loopback cluster), the sweep's lease server (every capped request takes two leases from the driver:
its model's and the sweep's), and how fast one store shard appends records (write + fsync per append).
The last line is one JSON object for scripts: {"targets", "ratios": {"main": {"local", "dask"}, "big": …}, "met",
"profile", …}. --rounds N reports medians (peaks: the largest of any round).

    python benchmarks/cluster.py [--scenarios 25] [--big-scenarios 250] [--tiny-prompts 2] [--nthreads 1] [--rounds 1]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import tempfile
import textwrap
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # inherited by the workers and every kernel

# siblings in benchmarks/ (on sys.path as the script's folder): the profile of the gap, the scaling inputs
from _cluster_inputs import cpu_seconds, lease_rate, print_scaling, scheduler_rate, store_rate  # noqa: E402
from _cluster_profile import executions, print_profile, profile  # noqa: E402
from bench.core.records import cell_key  # noqa: E402
from bench.testing.dask_cluster import LoopbackDaskCluster  # noqa: E402
from bench.testing.fake_provider import FakeProvider  # noqa: E402
from bench.testing.grids import ROOT, generate, grid, model, prompt, sweep  # noqa: E402

MODELS = (("m1", "fake-a", 2), ("m2", "fake-b", 3), ("m3", "fake-c", 4), ("m4", "fake-d", 6))  # id, name, cap
GLOBAL_CAP = 12
BUDGET_S = 1800  # one sweep on a loaded 2-core machine
PROMPTS = 4  # the main and the big grid: 4 models × 4 prompts = 16 cells
TARGETS = {"main": {"local": 2.0, "dask": 2.0}, "big": {"local": 1.2, "dask": 1.2}}  # wall / bound (issue 46)
# a cell of the main or the big grid → its model's name
CELLS_OF = {cell_key(mid, f"p{k}", "v1"): fake for mid, fake, _c in MODELS for k in range(1, PROMPTS + 1)}


def bound_s(prompts: int, scenarios: int, latency_ms: float) -> float:
    """The requests alone at the caps: the slowest model's requests at its cap, or all of them at the global cap."""
    per_model = prompts * scenarios * latency_ms / 1000  # a model's requests one after the other, seconds
    return max(len(MODELS) * per_model / GLOBAL_CAP, *(per_model / cap for _m, _f, cap in MODELS))


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
    stats, timeline = fake.stats(), fake.timeline()
    execs = executions(folder / "runs" / name)
    return {"wall": wall, "requests": stats["requests"], "rps": stats["requests"] / wall,
            "peaks": stats["peak_in_flight_by_model"], "peak_all": stats["peak_in_flight"], "executions": execs,
            "startup": min(e["start"] for e in execs) - began, "teardown": ended - max(e["end"] for e in execs),
            "timeline": timeline["spans"]}


def summarize(r: dict, slots: int, bound: float | None = None) -> dict:
    """The figures of one way: wall, rate, start-up, per-execution overhead, slot idle time per execution, and
    with a ``bound``: ``wall_s / bound`` as ``ratio`` and the profile of the gap (benchmarks/_cluster_profile.py).

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
            "peaks": {k: r["peaks"].get(k, 0) for _m, k, _c in MODELS}, "peak_all": r["peak_all"],
            **({} if bound is None else {
                "bound_s": round(bound, 2), "ratio": round(r["wall"] / bound, 2),
                "profile": profile(r, slots, bound, {f: c for _m, f, c in MODELS}, GLOBAL_CAP, CELLS_OF)})}


def over_caps(s: dict) -> list[str]:
    """The models (and "all") whose peak in flight exceeded its cap in this way's sweep."""
    return [f for _m, f, cap in MODELS if s["peaks"][f] > cap] + (["all"] if s["peak_all"] > GLOBAL_CAP else [])


def print_way(label: str, s: dict) -> None:
    caps = "  ".join(f"{fake} {s['peaks'][fake]}/{cap}{'' if s['peaks'][fake] <= cap else ' OVER'}"
                     for _m, fake, cap in MODELS)
    split = f"({s['overhead_before_s']:.1f} + {s['overhead_after_s']:.1f})"
    ratio = f"{s['ratio']:.2f}×" if "ratio" in s else "-"
    print(f"  {label:7s} {s['requests']:8d} {s['wall_s']:7.1f} {ratio:>7s} {s['rps']:7.1f} {s['startup_s']:8.1f} "
          f"{s['executions']:5d} {s['requests_span_median_s']:9.1f} {s['overhead_median_s']:15.1f} {split:16s} "
          f"{s['idle_per_execution_s']:9.1f}  {caps}  all {s['peak_all']}/{GLOBAL_CAP}"
          f"{' OVER' if s['peak_all'] > GLOBAL_CAP else ''}")


TABLE_HEAD = (f"  {'way':7s} {'requests':>8s} {'wall s':>7s} {'/bound':>7s} {'req/s':>7s} {'start-up':>8s} {'execs':>5s} "
              f"{'reqs/exec':>9s} {'overhead/exec s':>15s} {'(before + after)':16s} {'idle/exec':>9s}  "
              f"peak in flight / cap, per model and all")


def _warm() -> None:
    import papermill  # noqa: F401, PLC0415 (what a worker's first execution imports)

    import bench.sweep.cluster.remote  # noqa: F401, PLC0415


def warm_workers(address: str) -> float:
    """Import what an execution needs on every worker (once per worker process); return how long that took."""
    from distributed import Client  # noqa: PLC0415 (distributed: 1 s of imports, the cluster part only)

    with Client(address, timeout="60s") as client:
        t0 = time.perf_counter()
        client.run(_warm)  # sent by value: it lives in __main__, which a worker could not import
        return round(time.perf_counter() - t0, 2)


def one_round(a: argparse.Namespace, fake: FakeProvider, tmp: Path, grids: dict[str, Path], r: int) -> dict:
    """One round: the main, tiny and big grids locally, then each on a fresh cluster; then the scaling inputs."""
    slots = 2 * a.nthreads  # executions at once: --jobs 2 locally; 2 workers × --nthreads on Dask
    out: dict = {}
    tag = f"round {r + 1}/{a.rounds}: "
    sizes = [("", "cluster-main", a.scenarios), ("_tiny", "cluster-tiny", None)]
    sizes += [("_big", "cluster-big", a.big_scenarios)] if a.big_scenarios else []
    for suffix, name, scenarios in sizes:
        key, args = f"local{suffix}", ["--jobs", "2", *(["--per-cell"] if suffix == "_tiny" else [])]
        print(f"{tag}local bench sweep {' '.join(args)} ({key}) …", flush=True)
        bound = scenarios and bound_s(PROMPTS, scenarios, a.latency_ms)
        out[key] = summarize(run_sweep(fake, grids[name], tmp / f"{key}{r}", name, args, a.latency_ms), 2, bound)
    for suffix, name, scenarios in sizes:
        key = f"dask{suffix}"
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
            bound = scenarios and bound_s(PROMPTS, scenarios, a.latency_ms)
            out[key] = {**summarize(result, slots, bound), "dask_cpu_s": round(cpu_seconds(pids) - cpu0, 2)}
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
    if isinstance(items[0], dict):  # a key some rounds lack (an execution's name) is combined over those that have it
        keys = list(dict.fromkeys(k for i in items for k in i))
        return {k: combine([i[k] for i in items if k in i], worst or k.startswith("peak")) for k in keys}
    numbers = [x for x in items if isinstance(x, (int, float))]
    if not numbers:
        return items[0]
    if worst:
        return max(numbers)
    mid = statistics.median(numbers)
    return int(mid) if all(isinstance(x, int) for x in numbers) and mid == int(mid) else round(mid, 3)


def measure(a: argparse.Namespace, fake: FakeProvider, tmp: Path) -> dict:
    """Warm up, run ``a.rounds`` rounds of every way, and return their medians."""
    grids = {"cluster-main": write_grid(tmp / "cluster-main.yaml", fake.url, "cluster-main", PROMPTS, a.scenarios),
             "cluster-tiny": write_grid(tmp / "cluster-tiny.yaml", fake.url, "cluster-tiny", a.tiny_prompts, 1),
             **({"cluster-big": write_grid(tmp / "cluster-big.yaml", fake.url, "cluster-big", PROMPTS,
                                           a.big_scenarios)} if a.big_scenarios else {})}
    print("warming up: one sweep of 4 requests, not counted (cold imports and file caches) …", flush=True)
    warm = write_grid(tmp / "cluster-warm.yaml", fake.url, "cluster-warm", 1, 1)
    run_sweep(fake, warm, tmp / "warm", "cluster-warm", [], a.latency_ms)
    return combine([one_round(a, fake, tmp, grids, r) for r in range(a.rounds)])


def report(a: argparse.Namespace, out: dict) -> dict:
    """Print the tables, the ratios against their targets, the profile and the scaling inputs; return the JSON."""
    limit = GLOBAL_CAP / (a.latency_ms / 1000)
    cells = len(MODELS) * PROMPTS
    slots = {"local": 2, "dask": 2 * a.nthreads}  # executions at once: --jobs 2; 2 workers × --nthreads
    grids = {"main": a.scenarios, **({"big": a.big_scenarios} if a.big_scenarios else {})}
    ways = {g: {w: out[w + ("" if g == "main" else "_big")] for w in slots} for g in grids}
    tiny = {"local": out["local_tiny"], "dask": out["dask_tiny"]}
    for g, scenarios in grids.items():
        print(f"\n{g} grid: {len(MODELS)} models × {PROMPTS} prompts = {cells} cells × {scenarios} scenarios = "
              f"{cells * scenarios} requests, {a.latency_ms:g} ms each; caps "
              f"{', '.join(f'{f} {c}' for _m, f, c in MODELS)}, global {GLOBAL_CAP} → at most {limit:.0f} req/s"
              + (f"; medians of {a.rounds} rounds (peaks: the largest)" if a.rounds > 1 else ""))
        print(TABLE_HEAD)
        for label, s in ways[g].items():
            print_way(label, s)
        print(f"  bound: the requests alone at the caps (the slowest model at its cap, or all at the global cap): "
              f"{bound_s(PROMPTS, scenarios, a.latency_ms):.1f}s; /bound = wall ÷ that")
    print(f"\ntiny grid: {len(MODELS)} models × {a.tiny_prompts} prompts × 1 scenario = "
          f"{len(MODELS) * a.tiny_prompts} requests (local: --jobs 2 --per-cell, an execution a cell; dask: as planned)")
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
    print_profile({w: s["profile"] for w, s in ways["main"].items()}, slots)
    print_scaling(out)
    ratios = {g: {w: s["ratio"] for w, s in by_way.items()} for g, by_way in ways.items()}
    over = {f"{g}/{w}": over_caps(s) for g, by_way in ways.items() for w, s in by_way.items() if over_caps(s)}
    met = not over and all(ratios[g][w] <= TARGETS[g][w] for g in ratios for w in ratios[g])
    print("\nwall / bound against the targets (issue 46)")
    for g in ratios:
        print("  " + "   ".join(f"{g} {w}: {ratios[g][w]:.2f}× (target ≤ {TARGETS[g][w]}×, "
                                f"{'met' if ratios[g][w] <= TARGETS[g][w] else 'NOT met'})" for w in ratios[g]))
    print(f"  peaks in flight ≤ caps: {'yes' if not over else 'OVER in ' + str(over)}; all targets met: {met}")
    return {"targets": {g: TARGETS[g] for g in ratios}, "ratios": ratios, "met": met, "over_caps": over,
            "grid": {"cells": cells, "scenarios": a.scenarios, "big_scenarios": a.big_scenarios,
                     "latency_ms": a.latency_ms, "global_cap": GLOBAL_CAP, "caps": {f: c for _m, f, c in MODELS},
                     "limit_rps": limit, "nthreads": a.nthreads, "rounds": a.rounds,
                     "bound_s": {g: round(bound_s(PROMPTS, n, a.latency_ms), 2) for g, n in grids.items()}},
            **ways, "tiny": tiny, "cluster_start_s": out["cluster_start_s"],
            "worker_warmup_s": out["worker_warmup_s"], "scheduler": out["scheduler"],
            "lease_server": {"alone": out["lease_1"], "loaded": out["lease_n"]}, "store": out["store"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", type=int, default=25, help="scenarios per cell of the main grid (16 cells)")
    ap.add_argument("--big-scenarios", type=int, default=250,
                    help="scenarios per cell of the big grid (10× the main one), run both ways; 0 skips it")
    ap.add_argument("--tiny-prompts", type=int, default=2, help="tiny grid: 4 models × this × 1 scenario")
    ap.add_argument("--nthreads", type=int, default=1, help="executions at once per Dask worker (1: as --jobs 2)")
    ap.add_argument("--latency-ms", type=float, default=100.0)
    ap.add_argument("--tasks", type=int, default=2000, help="trivial tasks for the scheduler's rate")
    ap.add_argument("--rounds", type=int, default=1, help="rounds of every way; medians are reported")
    a = ap.parse_args()
    if min(a.scenarios, a.tiny_prompts, a.nthreads, a.tasks, a.rounds) < 1 or a.latency_ms <= 0 or a.big_scenarios < 0:
        ap.error("--scenarios, --tiny-prompts, --nthreads, --tasks and --rounds must be ≥ 1, --latency-ms > 0, "
                 "--big-scenarios ≥ 0")
    # bench's bytecode, as pip writes it when it installs a package (not for an editable install): under
    # PYTHONDONTWRITEBYTECODE=1 every process (the driver, each kernel) would compile bench from source (0.1-0.2 s)
    compileall.compile_dir(str(ROOT / "bench"), quiet=1)
    with FakeProvider(latency_ms=a.latency_ms) as fake, tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        out = measure(a, fake, Path(tmp))
    figures = report(a, out)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
