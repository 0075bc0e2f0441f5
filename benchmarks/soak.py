"""Kill and resume: sweeps SIGKILLed at seeded random moments, resumed, compared with an uninterrupted run.

Against the fake provider (fixed latency), one uninterrupted sweep gives the reference: the set
of successful candidate and judgment ids. Then each trial, in a fresh run folder:
  1. starts `bench sweep` and SIGKILLs, at a seeded random moment, either the driver (its kernel
     and the embedded server die with it) or the papermill kernel (the driver survives and reports
     the failed execution); "judge" trials first collect with a judge-less copy of the params, then
     kill a `--only-stage judge` sweep, so the kill lands in the judge stage;
  2. reads the interrupted run folder with bench.analysis (it must load: a torn last line is
     skipped, never parsed half);
  3. resumes with a plain `bench sweep` and checks that the final set of successes equals the
     reference's, with no id succeeding twice, and that the requests answered twice by the provider
     (paid again because they were in flight at the kill) stay within the cap.

    python benchmarks/soak.py [--trials 20] [--seed 1] [--latency-ms 150]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.testing import grids

ROOT = Path(__file__).resolve().parents[1]


def write_soak(path: Path, url: str, cap: int, judged: bool) -> Path:
    """Two models × two prompts × 15 scenarios; with ``judged``, a rubric, a packed and a pairwise judge."""
    judges = [grids.judge("grader", url, name="judge-r"), grids.judge("packed", url, name="judge-b", pack_size=4),
              grids.judge("arena", url, rubric="arena-pairwise", name="judge-p", baseline="m1/p@v1")]
    return grids.grid(
        path, url, name="soak", seed=3,
        models=[grids.model("m1", url, name="fake-a"), grids.model("m2", url, name="fake-b")],
        prompts=[grids.prompt("p", "One tip about {topic} for a {who}."),
                 grids.prompt("p", "Give a {who} one concrete tip about {topic}.", version="v2")],
        scenarios=grids.generate(topic=["email", "sleep", "focus", "lunch", "travel"],
                                 who=["nurse", "student", "chef"]),
        judges=judges if judged else None, limits={"max_concurrency": cap, "timeout_s": 10, "retries": 2})


def successes(run_dir: Path) -> collections.Counter:
    """Return how many success lines each candidate and judgment id has in the store (torn lines skipped)."""
    counts: collections.Counter = collections.Counter()
    for path in sorted(run_dir.glob("*.jsonl")):
        if path.name.startswith(("candidates", "judgments")):
            for line in path.read_bytes().splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("error") is None:
                    counts[rec["id"]] += 1
    return counts


def sweep(params: Path, runs: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "BENCH_RUNS": str(runs), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "bench", "sweep", str(params), "--no-report", "--no-track", *extra],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def kernels_of(pid: int) -> list:
    import psutil  # noqa: PLC0415

    try:
        return [p for p in psutil.Process(pid).children(recursive=True) if "ipykernel" in " ".join(p.cmdline())]
    except psutil.Error:
        return []


def kill_at(proc: subprocess.Popen, delay: float, victim: str) -> str:
    """SIGKILL the driver or its kernel ``delay`` s after start; return what was killed."""
    deadline = time.monotonic() + delay
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    if proc.poll() is not None:
        return "nothing (finished first)"
    if victim == "kernel":
        kernels = kernels_of(proc.pid)
        if kernels:
            kernels[0].send_signal(signal.SIGKILL)
            proc.wait(timeout=120)
            return "kernel"
    os.kill(proc.pid, signal.SIGKILL)  # only the driver: what dies with it is the driver's business
    proc.wait()
    return "driver"


def trial(n: int, rng: random.Random, files: dict[str, Path], ref: dict, fake, cap: int, work: Path) -> dict:
    runs = Path(tempfile.mkdtemp(prefix=f"trial-{n}-", dir=work))
    stage = rng.choice(["collect", "judge"])
    victim = rng.choice(["driver", "kernel"])
    fake.reset()
    if stage == "judge":
        sweep(files["collect_only"], runs).wait()
        proc = sweep(files["full"], runs, "--only-stage", "judge")
        delay = rng.uniform(0.4, 1.0) * ref["judge_s"]
    else:
        proc = sweep(files["full"], runs)
        delay = rng.uniform(0.4, 1.0) * ref["wall_s"]  # the first ~40% is start-up: imports, kernel
    killed = kill_at(proc, delay, victim)
    time.sleep(0.3)  # let the OS reap whatever died with the driver
    from bench.analysis import load_run  # noqa: PLC0415

    interrupted = load_run(runs / "soak")  # must load: no torn record reaches the analysis
    seen = (interrupted.candidates.height, interrupted.judgments.height)
    resumed = sweep(files["full"], runs).wait()
    final = successes(runs / "soak")
    answered = fake.stats()["statuses"].get("200", 0) + fake.stats()["statuses"].get(200, 0)
    paid_twice = answered - ref["answered_split" if stage == "judge" else "answered"]
    ok = set(final) == ref["ids"] and max(final.values()) == 1 and resumed == 0 and paid_twice <= cap
    return {"trial": n, "stage": stage, "victim": victim, "killed": killed, "at_s": round(delay, 2),
            "records_seen_after_kill": seen, "resume_exit": resumed, "same_as_reference": set(final) == ref["ids"],
            "duplicates": sum(v > 1 for v in final.values()), "paid_twice": paid_twice, "ok": ok}


def reference(files: dict[str, Path], fake, work: Path) -> dict:
    runs = Path(tempfile.mkdtemp(prefix="ref-", dir=work))
    fake.reset()
    t0 = time.monotonic()
    sweep(files["collect_only"], runs).wait()
    collect_s = time.monotonic() - t0
    t1 = time.monotonic()
    assert sweep(files["full"], runs).wait() == 0
    judge_s = time.monotonic() - t1
    answered = fake.stats()["statuses"].get("200", 0) + fake.stats()["statuses"].get(200, 0)
    fake.reset()
    full = Path(tempfile.mkdtemp(prefix="ref2-", dir=work))
    t2 = time.monotonic()
    assert sweep(files["full"], full).wait() == 0
    ids = set(successes(full / "soak"))
    return {"ids": ids, "wall_s": time.monotonic() - t2, "collect_s": collect_s, "judge_s": judge_s,
            "answered": fake.stats()["statuses"].get("200", 0) + fake.stats()["statuses"].get(200, 0),
            "answered_split": answered}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--latency-ms", type=float, default=150)
    ap.add_argument("--cap", type=int, default=8)
    ap.add_argument("--keep", action="store_true", help="keep the run folders (else removed at the end)")
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-soak-"))  # every run folder, removed at the end unless --keep
    try:
        return _trials(a, work)
    finally:
        if a.keep:
            print(f"run folders kept in {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)


def _trials(a: argparse.Namespace, work: Path) -> int:
    from bench.testing.fake_provider import FakeProvider  # noqa: PLC0415

    rng = random.Random(a.seed)
    folder = work / "params"
    folder.mkdir()
    with FakeProvider(latency_ms=a.latency_ms) as fake:
        files = {"full": folder / "full" / "soak.yaml", "collect_only": folder / "collect" / "soak.yaml"}
        for key, judged in (("full", True), ("collect_only", False)):
            files[key].parent.mkdir()
            write_soak(files[key], fake.url, a.cap, judged)
        ref = reference(files, fake, work)
        print(f"reference: {len(ref['ids'])} successes in {ref['wall_s']:.1f} s "
              f"({ref['answered']} requests answered)", flush=True)
        results = []
        for n in range(1, a.trials + 1):
            r = trial(n, rng, files, ref, fake, a.cap, work)
            results.append(r)
            print(f"trial {n:>2}: kill {r['killed']:<24} in {r['stage']:<7} at {r['at_s']:>5.2f}s; analysis saw "
                  f"{r['records_seen_after_kill'][0]} answers, {r['records_seen_after_kill'][1]} judgments; resumed "
                  f"→ same as reference: {r['same_as_reference']}, duplicates {r['duplicates']}, "
                  f"requests paid twice {r['paid_twice']} {'ok' if r['ok'] else 'FAILED'}", flush=True)
    bad = [r for r in results if not r["ok"]]
    print(json.dumps({"trials": len(results), "failed": len(bad), "kills": collections.Counter(r["killed"] for r in results),
                      "max_paid_twice": max(r["paid_twice"] for r in results), "cap": a.cap}))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
