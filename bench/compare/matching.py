"""Which answers of two runs are the same item (scenario and sample in one cell) and how each was graded (the
mean of its successful judgments); cells graded only in run A are kept as ``lost``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from bench.analysis.pairwise import OUTCOME
from bench.analysis.tables import RunTables
from bench.config.rubrics import parse_rubric
from bench.core.errors import BenchError, ParamsError

ITEM = ["scenario", "sample"]
CHANGED = 1e-9  # |B − A| above this: the grade changed (below: the float residue of averaging repeats)
LOST_SCHEMA = {"cell_a": pl.Utf8, "cell_b": pl.Utf8, "judge": pl.Utf8, "criterion": pl.Utf8}  # graded in A only


@dataclass
class Matched:
    """The two runs' items paired: grades side by side, answers of one run only, warnings."""

    pairs: pl.DataFrame  # cell_a, cell_b: the cells compared
    items: pl.DataFrame  # per paired item × judge × criterion: value_a, value_b, diff = B − A, candidate/judgment ids
    shared: pl.DataFrame  # cell_a, cell_b, answers: how many items both runs answered (graded or not)
    battles: pl.DataFrame  # per paired pairwise battle: cell_a, cell_b, judge, scenario, sample, score_a, score_b
    only_in_a: list[dict[str, Any]]  # {"cell", "scenario_id", "sample"} of the answers run B lacks
    only_in_b: list[dict[str, Any]]
    warnings: list[str]
    lost: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=LOST_SCHEMA))  # graded in A only (below)


def match(a: RunTables, b: RunTables, mapping: Mapping[str, str] | None = None) -> Matched:
    """Pair the items of runs ``a`` and ``b`` (cells by name, else by ``mapping`` {A cell: B cell})."""
    cells_a, cells_b = _cells(a), _cells(b)
    pairs, cell_notes = cell_pairs(cells_a, cells_b, dict(mapping or {}), a.name, b.name)
    frame = pl.DataFrame(pairs, schema={"cell_a": pl.Utf8, "cell_b": pl.Utf8}, orient="row")
    shared, only_a, only_b = _answers(a, b, frame)
    said = judge_differences(a, b) + cell_notes
    if only_a.height or only_b.height:
        said.append(f"{only_a.height} answer(s) only in run A ({a.name}) and {only_b.height} only in run B "
                    f"({b.name}): not compared (listed as only_in_a and only_in_b)")
    said += [line for t, side in ((a, "A"), (b, "B")) if (line := _not_numbers(t, side))]
    graded, lost = _graded(a, b, frame)
    said += _lost_notes(lost, b)
    return Matched(frame, graded, shared, _battles(a, b, frame, dict(mapping or {})),
                   _listed(only_a), _listed(only_b), said, lost)


def _cells(t: RunTables) -> set[str]:
    """Return every cell of a run: those with answers, and the sides of its judged pairs (dataset pairs too)."""
    return set(t.candidates["cell"].drop_nulls().to_list()).union(
        *(t.judgments[column].drop_nulls().unique().to_list() for column in ("cell", "cell_b")))


def cell_pairs(cells_a: set[str], cells_b: set[str], mapping: dict[str, str], name_a: str = "A",
               name_b: str = "B") -> tuple[list[tuple[str, str]], list[str]]:
    """Return the sorted (A, B) cell pairs and a line per side naming unpaired cells; unknown --map cells raise."""
    for side, names, cells, run in (("A", list(mapping), cells_a, name_a), ("B", list(mapping.values()), cells_b,
                                                                              name_b)):
        unknown = sorted(set(names) - cells)
        if unknown:
            raise BenchError(f"--map names cell(s) {', '.join(map(repr, unknown))} that run {side} ({run}) does not "
                             f"have; its cells: {', '.join(sorted(cells)) or 'none'}")
    pairs = [(c, mapping.get(c, c)) for c in sorted(cells_a) if c in mapping or c in cells_b]
    lone_a, lone_b = sorted(cells_a - {p[0] for p in pairs}), sorted(cells_b - {p[1] for p in pairs})
    notes = [f"cell(s) only in run A ({name_a}), not compared (--map A_CELL=B_CELL pairs cells whose names "
             f"differ): {', '.join(lone_a)}"] if lone_a else []
    return pairs, notes + ([f"cell(s) only in run B ({name_b}), not compared: {', '.join(lone_b)}"] if lone_b else [])


def _answers(a: RunTables, b: RunTables, pairs: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Return (answers both runs have, counted per cell pair; A's answers B lacks; B's answers A lacks)."""
    keys = ["cell", *ITEM]
    ans_a = a.candidates.select(keys).unique()
    ans_b = b.candidates.select(keys).unique()
    both = (ans_a.join(pairs, left_on="cell", right_on="cell_a")
            .join(ans_b, left_on=["cell_b", *ITEM], right_on=keys, how="semi"))
    only_a = ans_a.join(both.select(keys), on=keys, how="anti")
    only_b = ans_b.join(both.select(pl.col("cell_b").alias("cell"), *ITEM).unique(), on=keys, how="anti")
    shared = both.group_by(pl.col("cell").alias("cell_a"), "cell_b").agg(pl.len().alias("answers"))
    return shared, only_a, only_b


def _listed(frame: pl.DataFrame) -> list[dict[str, Any]]:
    return frame.sort(["cell", *ITEM]).select("cell", pl.col("scenario").alias("scenario_id"), "sample").to_dicts()


def item_grades(t: RunTables) -> pl.DataFrame:
    """Return a run's grade per item, judge, criterion (mean of its successes), candidate and smallest judgment id."""
    scores = t.scores.filter(pl.col("value").is_finite() & pl.col("cell").is_not_null())  # NaN, inf: unscored
    return (scores.group_by("judge", "cell", "criterion", *ITEM)
            .agg(pl.col("value").mean(), pl.col("candidate").first(), pl.col("judgment").min()))


def _not_numbers(t: RunTables, side: str) -> str | None:
    """Return a line counting run ``side``'s NaN or infinite grades (counted as unscored, not compared)."""
    bad = t.scores.filter(pl.col("value").is_not_null() & ~pl.col("value").is_finite())
    if bad.is_empty():
        return None
    judgments = bad["judgment"].unique().sort().to_list()
    return (f"run {side} ({t.name}): {len(judgments)} judgment(s) with a grade that is NaN or infinite, counted as "
            f"unscored: {', '.join(judgments[:5])}{', …' if len(judgments) > 5 else ''}")


def _graded(a: RunTables, b: RunTables, pairs: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return per paired item × judge × criterion both grades and B − A, and the (cell_a, cell_b, judge,
    criterion) graded in A and on no paired item in B (so a cell that failed in B does not vanish)."""
    side = lambda t, s: item_grades(t).rename(  # noqa: E731
        {"value": f"value_{s}", "candidate": f"candidate_{s}", "judgment": f"judgment_{s}"})
    ga = side(a, "a").join(pairs, left_on="cell", right_on="cell_a").rename({"cell": "cell_a"})
    gb = side(b, "b").rename({"cell": "cell_b"})
    joined = ga.join(gb, on=["cell_b", "judge", "criterion", *ITEM], how="inner")
    lost = ga.select(list(LOST_SCHEMA)).unique().join(joined.select(list(LOST_SCHEMA)).unique(),
                                                      on=list(LOST_SCHEMA), how="anti")
    return joined.select("cell_a", "cell_b", "judge", "criterion", *ITEM, "value_a", "value_b",
                         (pl.col("value_b") - pl.col("value_a")).alias("diff"),
                         "candidate_a", "candidate_b", "judgment_a", "judgment_b"), lost.sort(list(LOST_SCHEMA))


def _lost_notes(lost: pl.DataFrame, b: RunTables) -> list[str]:
    """Return a line per (B cell, judge) that run A graded and run B did not: how many answers B has there."""
    answers = dict(b.candidates.group_by("cell").agg(pl.len()).iter_rows())
    return [f"cell {cell}: none of its {answers.get(cell, 0)} answer(s) in run B ({b.name}) has a grade of judge "
            f"{judge} (failed answers or judgments), which graded it in run A: compared with nothing"
            for cell, judge in lost.select("cell_b", "judge").unique(maintain_order=True).iter_rows()]


def _oriented(t: RunTables) -> pl.DataFrame:
    """Return each pairwise battle of a run from each side, its score (1 win, ½ tie, 0 loss) averaged over orders."""
    fought = t.judgments.filter((pl.col("mode") == "pairwise") & pl.col("error").is_null()
                                & pl.col("verdict").is_in(list(OUTCOME)))
    fought = fought.with_columns(pl.col("verdict").replace_strict(OUTCOME, return_dtype=pl.Float64).alias("outcome"))
    texts = t.candidates.select(pl.col("id").alias("opponent_answer"), pl.col("output").alias("opponent_text")).unique(
        "opponent_answer")
    head = ["judge", *ITEM]
    both = pl.concat([
        fought.select(*head, pl.col("cell").alias("player"), pl.col("cell_b").alias("opponent"),
                      pl.col("candidate_b").alias("opponent_answer"), pl.col("outcome").alias("score")),
        fought.select(*head, pl.col("cell_b").alias("player"), pl.col("cell").alias("opponent"),
                      pl.col("candidate").alias("opponent_answer"), (1.0 - pl.col("outcome")).alias("score"))])
    return (both.join(texts, on="opponent_answer", how="left")
            .group_by(*head, "player", "opponent", "opponent_answer", "opponent_text").agg(pl.col("score").mean()))


def _battles(a: RunTables, b: RunTables, pairs: pl.DataFrame, mapping: dict[str, str]) -> pl.DataFrame:
    """Return the pairwise battles both runs judged against the same opponent answer, outcomes side by side."""
    oa = (_oriented(a).join(pairs, left_on="player", right_on="cell_a")
          .with_columns(pl.col("opponent").replace(mapping).alias("opponent_b")))
    ob = _oriented(b).rename({"player": "cell_b", "opponent": "opponent_b", "score": "score_b"})
    joined = oa.join(ob, on=["judge", *ITEM, "cell_b", "opponent_b", "opponent_answer", "opponent_text"],
                     how="inner", nulls_equal=True)
    return joined.select(pl.col("player").alias("cell_a"), "cell_b", "judge", *ITEM, "opponent",
                         pl.col("score").alias("score_a"), "score_b")


def judge_differences(a: RunTables, b: RunTables) -> list[str]:
    """Return a line per judge that graded one run only, or whose model, rubric or mode differs between them."""
    ja, jb = _judges(a), _judges(b)
    said = []
    for judge in sorted(ja.keys() | jb.keys()):
        if judge not in jb or judge not in ja:
            run, name = ("A", a.name) if judge in ja else ("B", b.name)
            said.append(f"judge {judge} graded only run {run} ({name}): its grades are not compared")
            continue
        for what, label in (("model", "model"), ("rubric", "rubric"), ("mode", "mode")):
            if ja[judge][what] != jb[judge][what]:
                said.append(f"judge {judge}: {label} {_listing(ja[judge][what])} in run A, "
                            f"{_listing(jb[judge][what])} in run B: its scores measure different things")
        for key in sorted(ja[judge]["rubric"] & jb[judge]["rubric"]):
            ta, tb = _rubric_texts(a.run_dir, key), _rubric_texts(b.run_dir, key)
            if ta and tb and not ta & tb:
                said.append(f"judge {judge}: rubric {key} has the same version but different text in the two runs "
                            f"(edited without a version bump): its scores measure different things")
    return said


def _judges(t: RunTables) -> dict[str, dict[str, set[str]]]:
    out: dict[str, dict[str, set[str]]] = {}
    for judge, model, rubric, mode in t.judgments.select("judge", "judge_model", "rubric", "mode").unique().iter_rows():
        seen = out.setdefault(judge, {"model": set(), "rubric": set(), "mode": set()})
        for what, value in (("model", model), ("rubric", rubric), ("mode", mode)):
            if value is not None:
                seen[what].add(str(value))
    return out


def _listing(values: set[str]) -> str:
    return " and ".join(sorted(values)) or "none"


def _rubric_texts(run_dir: Path | None, key: str) -> set[str]:
    """Return the content hashes of the run's snapshots of rubric ``id@version`` (``rubrics/<hash>/<id>.md``)."""
    rid, _, version = key.rpartition("@")
    if run_dir is None or not rid:
        return set()
    found = set()
    for path in Path(run_dir).glob(f"rubrics/*/{rid}.md"):
        try:
            rubric = parse_rubric(path.read_text(encoding="utf-8-sig"), path)
        except (OSError, ParamsError):
            continue
        if rubric.version == version:
            found.add(path.parent.name)
    return found
