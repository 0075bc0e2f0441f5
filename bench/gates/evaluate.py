"""Each gate of a run: its value, its confidence interval and its verdict, with the reason in words; a cell whose
items all failed fails. Examples: docs/gates.md."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from bench.analysis import COMPOSITE, RunTables, compare_runs, leaderboard, load_run
from bench.core.errors import BenchError
from bench.core.exit_codes import ExitCode
from bench.compare.changes import rubric_changes
from bench.compare.matching import CHANGED
from bench.compare.paired import battle_wins
from bench.gates.agreement import gate_agreement
from bench.gates.decide import BoundTest, Check, bound_tests_of, needed, sign_flip
from bench.gates.floors import floors_of
from bench.gates.health import unfit
from bench.gates.spec import Gates

# `bench gate` and `bench sweep` (docs/sweeps.md, How a sweep ends): a gate failed
EXIT_GATE_FAILED = int(ExitCode.GATE_FAILED)
EXIT_CANNOT_DECIDE = int(ExitCode.CANNOT_DECIDE)  # a check or the whole run cannot be decided
SHOWN_MISSING = 10  # missing answers a coverage check names (bench compare --json lists all)
RESAMPLES = 2000  # bootstrap resamples of every interval a gate reads (the comparison's, the leaderboard's)


@dataclass(frozen=True)
class GateResult:
    """One check of one gate: ``value`` with its interval against ``bound``, and whether it passed, and why."""

    gate: str  # min, max_drop, coverage, win_rate_min or agreement_min ("evaluation": could not be evaluated)
    subject: str  # what was checked: "judge · cell", "judge · baseline cell → cell", …
    bound: float
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int  # scenarios (min, max_drop), baseline answers (coverage), pairs (win_rate_min), reviewed judgments
    passed: bool
    reason: str
    p: float | None = None  # the one-sided test of the bound (every check but coverage): bench.gates.decide
    p_holm: float | None = None  # its Holm-adjusted value across the gate's tested checks (not strict)
    decided: bool = True  # False: the check cannot decide (too few scenarios, a run that cannot be gated): exit 6


@dataclass
class GateReport:
    """Every gate's results for one run, and what the comparison with the baseline said first."""

    run_dir: Path
    baseline: Path | None
    strict: bool
    results: list[GateResult]
    warnings: list[str] = field(default_factory=list)  # the comparison's: versions that differ, unpaired items
    alpha: float = 0.05  # the family-wise error rate of the gate's tests
    ungateable: list[str] = field(default_factory=list)  # why the run cannot be gated at all (exit 6 whatever else)

    @property
    def failed(self) -> list[GateResult]:
        return [r for r in self.results if not r.passed and r.decided]

    @property
    def undecided(self) -> list[GateResult]:
        return [r for r in self.results if not r.decided]

    @property
    def exit_code(self) -> int:
        """Return 0 when every gate passed, 5 when a check failed, 6 when the run or a check cannot decide."""
        if self.ungateable:
            return EXIT_CANNOT_DECIDE
        return EXIT_GATE_FAILED if self.failed else EXIT_CANNOT_DECIDE if self.undecided else 0

    def line(self) -> str:
        """Return the closing line: how many gates passed, failed or could not decide."""
        n, code = len(self.results), self.exit_code
        if self.ungateable:
            return f"gates: the run cannot be gated (exit {code}): " + "; ".join(self.ungateable)
        said = [f"{len(self.failed)} of {n} check(s) FAILED"] if self.failed else []
        if self.undecided:
            said.append(f"{len(self.undecided)} of {n} check(s) cannot decide")
        if said:
            return f"gates: {', '.join(said)} (exit {code})"
        return f"gates: all {n} check(s) passed"


def evaluate_gates(run_dir: str | Path, gates: Gates, baseline: str | Path | None = None, *, seed: int = 0,
                   resamples: int = RESAMPLES, cells: Collection[str] | None = None,
                   own_sweep: bool = False) -> GateReport:
    """Return every gate's results for ``run_dir`` against ``baseline`` (resolved; for ``max_drop``, ``win_rate_min``).
    Only ``cells`` are gated when given; ``own_sweep``: the caller holds the lock. Ungateable: exit 6."""
    run_dir = Path(run_dir)
    base = Path(baseline) if baseline is not None else None
    _check_folders(run_dir, base, gates)
    unfit_runs = [f"run: {r}" for r in unfit(run_dir, writing_checked=not own_sweep)]
    unfit_runs += [f"baseline: {r}" for r in (unfit(base) if base is not None and gates.compares else [])]
    t = current_cells(load_run(run_dir), cells)
    results: list[GateResult] = []
    report = GateReport(run_dir, base, gates.strict, results, alpha=gates.alpha, ungateable=unfit_runs)
    level, board, cmp, floors = 1.0 - gates.alpha, None, None, {}
    if gates.min is not None:
        floors = floors_of(gates.min, run_dir, sorted({j for j, _c in scoring_cells(t)}))
        board = [{**r, "floor": floors[(r["judge"], r["criterion"])]} for r in leaderboard(
            t.scores, resamples=resamples, seed=seed, level=level).to_dicts() if (r["judge"], r["criterion"]) in floors]
    if gates.compares and base is not None:
        cmp = compare_runs(base, t, mapping=dict(gates.map), seed=seed, n_boot=resamples, alpha=gates.alpha,
                           allow_rubric_change=True)  # refused below, as a reason the run cannot be gated
        if not gates.allow_rubric_change:
            report.ungateable += [f"{r} (--allow-rubric-change compares anyway)"
                                  for r in rubric_changes(base, run_dir)]
        report.warnings = list(cmp.warnings)
    agreement = None if gates.agreement_min is None else gate_agreement(
        t, floor=gates.agreement_min, strict=gates.strict, resamples=resamples, seed=seed, level=level).to_dicts()
    tests, family = bound_tests(gates, t, floors, cmp, agreement)
    kw = {"tests": tests, "alpha": gates.alpha, "family": family}
    if board is not None:
        expected = [(j, c, crit) for j, c in scoring_cells(t) for (fj, crit) in floors if fj == j]
        results += min_results(board, math.nan, gates.strict, expected=expected, **kw)
    if cmp is not None:
        missing, graded = lacking(cmp.tables_a, t, dict(gates.map))
        results.append(coverage_result(missing, graded, gates.allow_missing) if graded else
                       coverage_result(cmp.only_in_a, _answers(cmp.tables_a), gates.allow_missing))
        if gates.max_drop is not None:
            results += drop_results(cmp.rows.to_dicts(), gates.max_drop, gates.strict, **kw)
        if gates.win_rate_min is not None:
            results += win_rate_results(cmp.pairwise.to_dicts(), gates.win_rate_min, gates.strict, **kw)
    if agreement is not None:
        results += agreement_results(agreement, gates.agreement_min, gates.strict, **kw)
    return report


def _check_folders(run_dir: Path, base: Path | None, gates: Gates) -> None:
    """Refuse a missing run or baseline folder, a comparison with no baseline, and a run compared with itself."""
    if not run_dir.is_dir():
        raise BenchError(f"{run_dir}: no such run folder (run `bench sweep params/<grid>.yaml` first)")
    if gates.compares and base is None:
        raise BenchError("max_drop and win_rate_min compare with a baseline run: give --baseline RUN "
                         "(or baseline: in the params file's gates section)")
    if base is not None and not base.is_dir():
        raise BenchError(f"{base}: the baseline run folder does not exist (a run of the baseline's params, e.g. "
                         f"main's, kept or restored from a CI cache)")
    if base is not None and base.resolve() == run_dir.resolve():
        raise BenchError(f"{run_dir}: the baseline is the run itself; compare with another run folder")


def current_cells(t: RunTables, cells: Collection[str] | None) -> RunTables:
    """Return the run's tables without the answers and judgments of its cells not in ``cells`` (None: all kept).
    Only cells with answers are dropped, so a pairwise judgment against a dataset's answers stays."""
    if cells is None:
        return t
    stale = set(t.candidates["cell"].drop_nulls().unique().to_list()) - set(cells)
    if not stale:
        return t
    keep = lambda *cols: pl.all_horizontal(~pl.col(c).is_in(list(stale)).fill_null(False) for c in cols)  # noqa: E731
    return dataclasses.replace(t, candidates=t.candidates.filter(keep("cell")), scores=t.scores.filter(keep("cell")),
                               judgments=t.judgments.filter(keep("cell", "cell_b")))


def scoring_cells(t: RunTables) -> list[tuple[str, str]]:
    """Return every (scoring judge, cell with answers) of a run: what a ``min`` must check, graded or not."""
    judges = t.judgments.filter(pl.col("mode") != "pairwise")["judge"].drop_nulls().unique().sort().to_list()
    cells = t.candidates["cell"].drop_nulls().unique().sort().to_list()
    return [(j, c) for j in judges for c in cells]


def lacking(base: RunTables | None, t: RunTables, mapping: dict[str, str]) -> tuple[list[dict[str, Any]], int]:
    """Return the baseline's usable grades (finite composite of a scoring judge, per cell, scenario, sample) this
    run has no usable grade for, as {judge, cell, scenario_id, sample}, and how many the baseline has."""
    if base is None:
        return [], 0
    key = ["judge", "cell", "scenario", "sample"]
    usable = lambda x: (x.scores.filter((pl.col("criterion") == COMPOSITE) & pl.col("value").is_finite()  # noqa: E731
                                        & (pl.col("mode") != "pairwise") & pl.col("cell").is_not_null())
                        .select(key).unique())
    ours = usable(base).with_columns(pl.col("cell").replace(mapping))
    gone = ours.join(usable(t), on=key, how="anti").sort(key)
    return [{"judge": r["judge"], "cell": r["cell"], "scenario_id": r["scenario"], "sample": r["sample"]}
            for r in gone.to_dicts()], ours.height


def _answers(t: RunTables | None) -> int:
    return 0 if t is None else t.candidates.select("cell", "scenario", "sample").unique().height


def min_results(board: Iterable[dict[str, Any]], floor: float, strict: bool,
                expected: Iterable[tuple[str, str, str]] = (), *, tests: dict[Any, BoundTest], alpha: float = 0.05,
                family: int = 1) -> list[GateResult]:
    """Return the ``min`` check of each (judge, cell) composite row of a leaderboard, and a failed one for each
    ``expected`` (judge, cell, criterion) it has no row of. ``tests``: each row's one-sided test (as drop_results)."""
    rows = [{"criterion": COMPOSITE, "floor": floor, **r} for r in board]
    out = [GateResult("min", _graded_by(r["judge"], r["criterion"], r["cell"]), r["floor"], None, None, None,
                      int(r["n"] or 0), False, "no mean: nothing to check") if _missing(r["mean"]) else
           _bounded("min", _graded_by(r["judge"], r["criterion"], r["cell"]), r["floor"], r["mean"], r["ci_low"],
                    r["ci_high"], r["n"], tests.get(("min", r["judge"], r["cell"], r["criterion"])), strict, alpha,
                    r["floor"], f"mean {r['mean']:.3g} (floor {r['floor']:g})", "a mean below the floor", r["n"],
                    family)
           for r in rows]
    seen = {(r["judge"], r["cell"], r["criterion"]) for r in rows}
    known = {(r["judge"], r["criterion"]): r["floor"] for r in rows}
    out += [GateResult("min", _graded_by(judge, criterion, cell), known.get((judge, criterion), floor), None, None,
                       None, 0, False, "no score: no answer of this cell has a grade of this judge (its answers or "
                                        "judgments failed)")
            for judge, cell, criterion in expected if (judge, cell, criterion) not in seen]
    return out or [_nothing("min", floor, "no cell has a composite score (does the grid have a scoring judge, "
                                          "and did its judge stage run?)")]


def coverage_result(missing: list[dict[str, Any]], baseline_answers: int, allow_missing: bool) -> GateResult:
    """Return the ``coverage`` check: the run has a usable grade of every one the baseline has (``missing``, from
    :func:`lacking`), or, without a scoring judge, every answer; passes when ``allow_missing``."""
    n = max(baseline_answers, len(missing))
    share = 1.0 - len(missing) / n if n else 1.0
    what = "grade(s)" if missing and "judge" in missing[0] else "answer(s)"
    if not missing:
        return GateResult("coverage", "baseline answers", 1.0, share, None, None, n, True,
                          f"all {n} graded answer(s) of the baseline are graded in this run")
    shown = ", ".join(f"{x['judge'] + ' · ' if 'judge' in x else ''}{x['cell']} {x['scenario_id']}#{x['sample']}"
                      for x in missing[:SHOWN_MISSING])
    more = f", … ({len(missing) - SHOWN_MISSING} more: bench compare --json lists all)" \
        if len(missing) > SHOWN_MISSING else ""
    what = f"{len(missing)} of {n} {what} of the baseline missing from this run: {shown}{more}"
    if allow_missing:
        return GateResult("coverage", "baseline answers", 1.0, share, None, None, n, True,
                          f"{what} (allowed: allow_missing)")
    return GateResult("coverage", "baseline answers", 1.0, share, None, None, n, False,
                      f"{what} (allow_missing: true / --allow-missing accepts it)")


def win_rate_results(rows: Iterable[dict[str, Any]], floor: float, strict: bool, *, tests: dict[Any, BoundTest],
                     alpha: float = 0.05, family: int = 1) -> list[GateResult]:
    """Return the ``win_rate_min`` check of each row of a comparison's pairwise win rates (n battles, n_scenarios),
    decided as a ``min`` floor on the mean of its per-scenario win rates (``tests``, as drop_results)."""
    out = [_bounded("win_rate_min", f"{r['judge']} · {_pair(r)}", floor, r["win_rate_b"], r["ci_low"], r["ci_high"],
                    r["n"], tests.get(("win_rate_min", r["judge"], r["cell_a"], r["cell_b"])), strict, alpha, floor,
                    f"win rate {r['win_rate_b']:.3g} (floor {floor:g})", "a win rate below the floor",
                    r["n_scenarios"], family) for r in rows]
    return out or [_nothing("win_rate_min", floor, "no pairwise judge judged the same pairs in both runs")]


def agreement_results(rows: Iterable[dict[str, Any]], floor: float, strict: bool, *, tests: dict[Any, BoundTest],
                      alpha: float = 0.05, family: int = 1) -> list[GateResult]:
    """Return the ``agreement_min`` check of each judge's row of :func:`~bench.gates.agreement.gate_agreement`,
    decided as a floor by its bootstrap test (``tests``, as drop_results; its unit the reviewed answer)."""
    out = [GateResult("agreement_min", f"{r['judge']} · {r['criterion']} vs humans", floor, None, None, None, r["n"],
                      False, f"kappa unknown: {r['note'] or 'no pair of grades'}") if _missing(r["kappa"]) else
           _bounded("agreement_min", f"{r['judge']} · {r['criterion']} vs humans", floor, r["kappa"], r["ci_low"],
                    r["ci_high"], r["n"], tests.get(("agreement_min", r["judge"])), strict, alpha, floor,
                    f"kappa {r['kappa']:.3g} (floor {floor:g})", "a kappa below the floor", r["items"], family,
                    unit="reviewed answers")
           for r in rows]
    return out or [_nothing("agreement_min", floor, "the run has no judge")]


def drop_results(rows: Iterable[dict[str, Any]], max_drop: float, strict: bool, *, tests: dict[Any, BoundTest],
                 alpha: float = 0.05, family: int = 1) -> list[GateResult]:
    """Return the ``max_drop`` check of each composite row of a comparison (A the baseline).
    A drop fails only when shown beyond the bound (``strict``: passes only when shown within); no test: undecided."""
    out = []
    for r in (r for r in rows if r["criterion"] == COMPOSITE):
        diff, lo, hi = r["diff"], r["ci_low"], r["ci_high"]
        subject = f"{r['judge']} · {_pair(r)}"
        if _missing(diff):
            why = (f"no graded item in this run: none of its {r['n_unscored']} answer(s) has a grade of this judge "
                   f"(failed answers or judgments)" if not r["n_matched"] else
                   "no matched item with a composite score in both runs")
            out.append(GateResult("max_drop", subject, max_drop, None, _num(lo), _num(hi), r["n_matched"], False,
                                  why))
            continue
        test = tests.get(("max_drop", r["judge"], r["cell_a"], r["cell_b"]))
        drop = -diff
        moved = f"dropped {drop:.3g}" if drop > CHANGED else f"rose {-drop:.3g}" if drop < -CHANGED else "unchanged"
        out.append(_bounded("max_drop", subject, max_drop, diff, lo, hi, r["n_matched"], test, strict, alpha,
                            -max_drop, f"{moved} (max_drop {max_drop:g})", f"a drop beyond {max_drop:g}",
                            r.get("n_scenarios"), family))
    return out or [_nothing("max_drop", max_drop, "no cell matched between the runs (same cell names, or map: "
                                                  "baseline cell -> cell)")]


def _bounded(gate: str, subject: str, bound: float, value: float, lo: Any, hi: Any, n: Any, test: BoundTest | None,
             strict: bool, alpha: float, edge: float, said: str, broken: str, scenarios: Any,
             family: int = 1, unit: str = "scenarios") -> GateResult:
    """Return a tested check of ``value`` against ``edge``: not strict, FAIL only when ``broken`` is shown; strict,
    pass only when it is shown kept; no test (too few ``unit``), it cannot decide."""
    lo, hi, ci, n = _num(lo), _num(hi), _ci(lo, hi), int(n or 0)
    if test is None:
        need, has = needed(family, strict=strict, alpha=alpha), "" if _missing(scenarios) else f"has {int(scenarios)}"
        level = f"alpha {alpha:g}" if strict or family == 1 else f"alpha/{family} (Holm's first step of {family} checks)"
        return GateResult(gate, subject, bound, float(value), lo, hi, n, False,
                          f"cannot decide: needs at least {need} {unit} ({has}): no one-sided test on fewer can "
                          f"reach {level}; {said}, CI {ci}", decided=False)
    kw = {"p": test.p, "p_holm": test.p_holm}
    if strict:
        shown = lo is not None and lo > edge and test.p < alpha
        why = (f"{said}: shown within it, the CI {ci} lies above {edge:g} (one-sided p {test.p:.3g} < {alpha:g})"
               if shown else f"{said}: not shown within it (CI {ci}, one-sided p {test.p:.3g} vs alpha {alpha:g}; "
                             f"strict: keeping the bound must be shown)")
        return GateResult(gate, subject, bound, float(value), lo, hi, n, shown, why, **kw)
    shown = hi is not None and hi < edge and test.p_holm < alpha
    why = (f"{said}: {broken} shown, the CI {ci} lies below {edge:g} (one-sided p_holm {test.p_holm:.3g} < "
           f"{alpha:g}): a regression" if shown else
           f"{said}: {broken} not shown (CI {ci}, p_holm {test.p_holm:.3g}): passes (--strict would ask to show "
           f"it kept)")
    return GateResult(gate, subject, bound, float(value), lo, hi, n, not shown, why, **kw)


def bound_tests(gates: Gates, t: RunTables, floors: dict[tuple[str, str], float], cmp: Any,
                agreement: list[dict[str, Any]] | None) -> tuple[dict[Any, BoundTest], int]:
    """Return the one-sided test of every statistical check, keyed as the checks look them up, and the family size."""
    checks: dict[Any, Check] = {}
    means = (t.scores.filter(pl.col("value").is_not_null())
             .group_by("judge", "cell", "criterion", "scenario").agg(pl.col("value").mean()))
    for (judge, cell, criterion), g in means.group_by("judge", "cell", "criterion") if floors else ():
        if (judge, criterion) in floors:
            checks[("min", judge, cell, criterion)] = sign_flip(g["value"].to_numpy(), floors[(judge, criterion)],
                                                                strict=gates.strict)
    if cmp is not None and gates.max_drop is not None:
        for (cell_a, cell_b, judge), g in cmp.scenario_diffs().group_by("cell_a", "cell_b", "judge"):
            checks[("max_drop", judge, cell_a, cell_b)] = sign_flip(g["diff"].to_numpy(), -gates.max_drop,
                                                                    strict=gates.strict)
    if cmp is not None and gates.win_rate_min is not None and not cmp.battles.is_empty():
        wins = (cmp.battles.with_columns(battle_wins(cmp.battles))
                .group_by("cell_a", "cell_b", "judge", "scenario").agg(pl.col("won").mean()))
        for (cell_a, cell_b, judge), g in wins.group_by("cell_a", "cell_b", "judge"):
            checks[("win_rate_min", judge, cell_a, cell_b)] = sign_flip(g["won"].to_numpy(), gates.win_rate_min,
                                                                        strict=gates.strict)
    for r in agreement or ():
        if r["p"] is not None:
            checks[("agreement_min", r["judge"])] = (r["items"], lambda p=r["p"]: p)
    family = sum(1 for n, _p in checks.values() if n)
    return bound_tests_of(checks, strict=gates.strict, alpha=gates.alpha), family


def _graded_by(judge: str, criterion: str, cell: str) -> str:
    """Return a ``min`` check's subject: ``judge · cell``, ``judge.criterion · cell`` for a criterion's floor."""
    return f"{judge} · {cell}" if criterion == COMPOSITE else f"{judge}.{criterion} · {cell}"


def _nothing(gate: str, bound: float, why: str) -> GateResult:
    return GateResult(gate, "(nothing to check)", bound, None, None, None, 0, False, why)


def _pair(r: dict[str, Any]) -> str:
    """Return a matched cell's name: one name when both runs call it alike, else ``baseline cell → cell``."""
    return r["cell_b"] if r["cell_a"] == r["cell_b"] else f"{r['cell_a']} → {r['cell_b']}"


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _num(v: Any) -> float | None:
    return None if _missing(v) else float(v)


def _ci(lo: Any, hi: Any) -> str:
    return "n/a" if _missing(lo) or _missing(hi) else f"[{lo:.3g}, {hi:.3g}]"
