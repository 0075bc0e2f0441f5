"""The run tables' frames built column by column from records read as dicts (``bench.analysis.record_reader``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain, compress, repeat
from operator import itemgetter
from typing import Any, NamedTuple

import polars as pl

from bench.analysis.conversation_scores import per_conversation
from bench.analysis.record_reader import Rows
from bench.core.records import Judgment, cell_key, versioned
from bench.core.spend import paid_cost

COMPOSITE = "composite"  # the criterion name of a judgment's composite score in the long table
SIMULATOR = "user-simulator"  # a simulated user's label when its records do not name it (user_simulator.id's default)
Row = dict[str, Any]
_USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "cost_usd", "latency_s", "cached", "calls", "cache_hits")


class Graded(NamedTuple):
    """What the review rules (``bench.core.reviewed``) and rubric scales read of a judgment given as a dict."""

    id: str
    candidate_ids: list[str]
    rubric_id: str
    rubric_hash: str
    rubric_key: str
    order: str | None


class GradedRows(Mapping[str, Graded]):
    """The judgment rows at positions ``at`` by id, each read as :class:`Graded` when it is looked up (the review
    rules look up the few judgments reviews name; their units come column-wise from :meth:`units`)."""

    def __init__(self, rows: Rows, at: Sequence[int]):
        self._rows, self._at = rows, at
        self._where = dict(zip(map(rows.column("id").__getitem__, at), at))

    def __getitem__(self, key: str) -> Graded:
        r = self._rows[self._where[key]]
        return Graded(r["id"], r["candidate_ids"], r["rubric_id"], r["rubric_hash"],
                      versioned(r["rubric_id"], r["rubric_version"]), r["order"])

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def _column(self, name: str) -> Sequence[Any]:
        column = self._rows.column(name)
        return column if len(self._at) == len(column) else list(map(column.__getitem__, self._at))

    def units(self) -> dict[tuple[tuple[str, ...], str], str]:
        """Return ``bench.core.reviewed.current_units`` of these judgments, computed a column at a time."""
        keys = zip(map(tuple, self._column("candidate_ids")),
                   map(versioned, self._column("rubric_id"), self._column("rubric_version")))
        counted = map(lambda order, mode: order in _FIRST and mode != "automated", self._column("order"),
                      self._column("mode"))
        return dict(compress(zip(keys, self._column("rubric_hash")), counted))

    def by_rubric(self) -> list[Graded]:
        """Return one judgment per rubric hash (the last): what ``run_scales`` reads."""
        last = dict(zip(self._column("rubric_hash"), self._column("id")))
        return [self[i] for i in last.values()]


_FIRST = frozenset({None, "AB"})  # the orders a pair's unit is counted in (once)


class _Fields(dict):
    """A dict read by attribute: a usage dict for ``paid_cost``, a per_turn stand-in for ``per_conversation``."""

    __getattr__ = dict.__getitem__


def frame_of(columns: Iterable[Sequence[Any]], schema: dict[str, Any]) -> pl.DataFrame:
    """Return ``columns`` (in ``schema``'s order) as a frame of ``schema``."""
    return pl.DataFrame([_series(name, dtype, column) for (name, dtype), column in zip(schema.items(), columns,
                                                                                        strict=True)])


def _series(name: str, dtype: Any, column: Sequence[Any]) -> pl.Series:
    if isinstance(dtype, pl.List):  # built from rows: from a column, polars makes a Series of every row's list
        return pl.DataFrame([(v,) for v in column], schema={name: dtype}, orient="row").to_series()
    return pl.Series(name, column, dtype=dtype)


def latest_at(rows: Rows, kept: Sequence[int]) -> list[int]:
    """Return the positions of one row per id among the rows at ``kept``: the last success if there is one, else
    the last failure (``bench.core.store.latest_of``), in the order each id first came."""
    ids, errors = rows.column("id"), rows.column("error")
    if len(kept) == len(ids) and len(set(ids)) == len(ids):  # every row kept, each id once: every row is its latest
        return list(range(len(ids)))
    out: dict[str, int] = {}
    for n in kept:
        prev = out.get(ids[n])
        if prev is None or errors[n] is None or errors[prev] is not None:
            out[ids[n]] = n
    return list(out.values())


def simulator_of(turns: list[Any] | None) -> str:
    """Return the label of a conversation's simulated user from its ``turns``, else the default id."""
    named = (t.get("simulator") for t in turns or () if isinstance(t, dict) and t.get("by") == "simulator")
    return next((str(n) for n in named if n), SIMULATOR)


def usage_columns(rows: Rows, by: str = "model") -> list[Sequence[Any]]:
    """Return the _USAGE columns of ``rows``: their model's (or judge's) usage, or their simulated user's (``by``)."""
    usages = rows.column("simulator_usage" if by == "simulator" else "usage")
    versions, errors = rows.column("schema_version"), rows.column("error")
    if not any(usages):  # schema-1 failures, or rows built without usage: it sent at least one request
        none = [None] * len(rows)
        return [none, none, none, none, none, [1 if e else None for e in errors], [0] * len(rows), versions, none,
                [0.0] * len(rows), none, none]
    turns = rows.column("turns") if by == "simulator" or "turns" in (rows[0] if rows else {}) else repeat(None)
    return _columns([_usage_row(u, e, v, t, by) for u, e, v, t in zip(usages, errors, versions, turns)], 12)


def _usage_row(u: Row | None, error: str | None, version: int, turns: Any, by: str) -> tuple:
    if u is None:
        return (None, None, None, None, None, 1 if error else None, 0, version, None, 0.0, None, None)
    return (*itemgetter(*_USAGE_FIELDS)(u), version, u["reasoning_tokens"],
            paid_cost(_Fields(u), turns, by), u.get("cached_tokens"), u.get("cache_saved_usd"))  # type: ignore[arg-type]


def candidate_frame(rows: Rows, schema: dict[str, Any]) -> pl.DataFrame:
    """Return the candidates frame (``tables.CANDIDATE_SCHEMA``) of candidate rows."""
    col = rows.column
    prompt, cell = _cell_columns(rows)
    return frame_of([col("id"), col("model_id"), prompt, cell, col("scenario_id"), col("sample"), col("output"),
                     col("error"), col("error_kind"), *usage_columns(rows), col("flags"), col("ended"), col("model"),
                     col("reasoning")],
                    schema)


def _cell_columns(rows: Rows) -> tuple[list[str], list[str]]:
    """Return the candidates' prompt (``prompt_id@version``) and cell (``model_id/prompt_id@version``) columns."""
    prompt = list(map(versioned, rows.column("prompt_id"), rows.column("prompt_version")))
    return prompt, list(map("{}/{}".format, rows.column("model_id"), prompt))


def simulator_frame(every: Rows, kept: Sequence[int], schema: dict[str, Any]) -> pl.DataFrame:
    """Return the simulated users' frame (``tables.SIMULATOR_SCHEMA``) of the candidate rows at ``kept`` that had one."""
    users = every.column("simulator_usage")
    rows = Rows([every[n] for n in kept if users[n] is not None])
    if not rows:
        return pl.DataFrame(schema=schema)
    col = lambda k: list(map(itemgetter(k), rows))  # noqa: E731
    return frame_of([[simulator_of(r["turns"]) for r in rows],
                     [cell_key(r["model_id"], r["prompt_id"], r["prompt_version"]) for r in rows],
                     col("scenario_id"), col("sample"), col("id"), col("error"), *usage_columns(rows, "simulator")],
                    schema)


def cells_of(rows: Rows, at: Sequence[int]) -> dict[str, tuple]:
    """Return per candidate id at ``at`` its (cell, model, prompt, sample): what a judgment's row says of its answer."""
    prompt, cell = _cell_columns(rows)
    every = zip(rows.column("id"), zip(cell, rows.column("model_id"), prompt, rows.column("sample")))
    return dict(every) if len(at) == len(rows) else dict(map(list(every).__getitem__, at))


def _cell_of(cid: str, cells: dict[str, tuple]) -> tuple:
    """As ``tables._cell_of``: a dataset pair's answer (``<scenario>:A``), not a candidate, gets "response_A"."""
    got = cells.get(cid)
    if got is None:
        side = cid.rsplit(":", 1)[-1] if ":" in cid else None
        return (f"response_{side}" if side else None), None, None, 0
    return got


def _cells(ids: list[str], cells: dict[str, tuple]) -> list[tuple]:
    """Return :func:`_cell_of` each id (a dict lookup each, in C, when every id is a candidate's)."""
    found = list(map(cells.get, ids))
    return found if None not in found else [_cell_of(c, cells) for c in ids]


def judgment_frame(rows: Rows, cells: dict[str, tuple], schema: dict[str, Any]) -> pl.DataFrame:
    """Return the judgments frame (``tables.JUDGMENT_SCHEMA``) of judgment rows; ``cells``: :func:`cells_of`."""
    col = rows.column
    ids = col("candidate_ids")
    first = [c[0] for c in ids]
    second = [c[1] if len(c) > 1 else None for c in ids]
    cell, model, prompt, sample = _columns(_cells(first, cells), 4)
    cell_b = [_cell_of(b, cells)[0] if b else None for b in second]
    return frame_of([col("id"), col("judge_id"), col("judge_model"), col("mode"),
                     list(map(versioned, col("rubric_id"), col("rubric_version"))), first, second, cell, model,
                     prompt, cell_b, col("scenario_id"), sample, col("order"), col("score"), col("verdict"),
                     [d.get("shown_verdict") for d in col("details")], col("rationale"), col("error"),
                     col("error_kind"), col("pack_id"), *usage_columns(rows), col("repeat"), col("expected_score"),
                     col("turn")], schema)


def _columns(tuples: list[tuple], width: int) -> list[Sequence[Any]]:
    return list(zip(*tuples, strict=True)) if tuples else [[] for _ in range(width)]


def score_frame(latest: pl.DataFrame, judgments: Sequence[Row], cells: dict[str, tuple], schema: dict[str, Any]
                ) -> pl.DataFrame:
    """Return the long score frame (``tables.SCORE_SCHEMA``) of the latest judgments: one row per criterion and
    the composite of each success; a conversation's per_turn judgments as one."""
    if any(r["turn"] is not None for r in judgments):
        return _merged_score_frame(judgments, cells, schema)
    ok = (pl.col("error").is_null() & (pl.col("mode") != "pairwise") & pl.col("score").is_not_null())
    picked = latest.with_row_index("at").filter(ok)
    rows = judgments if picked.height == len(judgments) else list(map(judgments.__getitem__, picked["at"].to_list()))
    scores = [r["scores"] or {} for r in rows]
    crits = [[*c, COMPOSITE] for c in scores]
    at = list(chain.from_iterable(map(repeat, range(len(rows)), map(len, crits))))
    head = picked.select("judge", "judge_model", "rubric", "mode", "cell", "model", "prompt", "scenario", "sample",
                         "candidate", pl.col("id").alias("judgment"), "repeat")[at]
    return head.with_columns(pl.Series("criterion", list(chain.from_iterable(crits)), schema["criterion"]),
                             pl.Series("value", _values(rows, scores), schema["value"]),
                             pl.Series("expected", _expected(rows, crits, len(at)), schema["expected"]),
                             pl.lit(None, schema["turns"]).alias("turns")).select(list(schema))


def _values(rows: list[Row], scores: list[dict[str, Any]]) -> list[Any]:
    """Return each row's criteria values, then its composite, one after another."""
    return list(chain.from_iterable(map(chain, map(dict.values, scores), zip(map(itemgetter("score"), rows)))))


def _expected(rows: list[Row], crits: list[list[str]], n: int) -> list[Any]:
    """Return each row's probability-weighted value of each criterion and the composite (None without logprobs)."""
    weighted = (list(map(itemgetter(k), rows)).count(None) < len(rows) for k in ("expected_scores", "expected_score"))
    if not any(weighted):
        return [None] * n
    return list(chain.from_iterable([*map((r["expected_scores"] or {}).get, c[:-1]), r["expected_score"]]
                                    for r, c in zip(rows, crits, strict=True)))


def _merged_score_frame(judgments: Sequence[Row], cells: dict[str, tuple], schema: dict[str, Any]) -> pl.DataFrame:
    """As :func:`score_frame`, for a folder with per_turn judgments: built from the rows, conversations merged."""
    graded = [(r, n) for r, n in _per_conversation(judgments)
              if r["error"] is None and r["mode"] != "pairwise" and r["score"] is not None]
    if not graded:
        return pl.DataFrame(schema=schema)
    rows = [r for r, _n in graded]
    scores = [r["scores"] or {} for r in rows]
    crits = [[*c, COMPOSITE] for c in scores]
    at = list(chain.from_iterable(map(repeat, range(len(rows)), map(len, crits))))
    col = lambda k: list(map(itemgetter(k), rows))  # noqa: E731
    first = [c[0] for c in col("candidate_ids")]
    cell, model, prompt, sample = _columns([_cell_of(c, cells) for c in first], 4)
    names = list(schema)
    head = frame_of([col("judge_id"), col("judge_model"), list(map(versioned, col("rubric_id"), col("rubric_version"))),
                     col("mode"), cell, model, prompt, col("scenario_id"), sample, first, col("id"), col("repeat"),
                     [n for _r, n in graded]], {k: schema[k] for k in [*names[:11], "repeat", "turns"]})
    return head[at].with_columns(pl.Series("criterion", list(chain.from_iterable(crits)), schema["criterion"]),
                                 pl.Series("value", _values(rows, scores), schema["value"]),
                                 pl.Series("expected", _expected(rows, crits, len(at)), schema["expected"])
                                 ).select(names)


def _per_conversation(judgments: Sequence[Row]) -> list[tuple[Row, int | None]]:
    """Return judgment rows with a per_turn judge's turns merged by the pydantic records' own rule."""
    if all(r["turn"] is None for r in judgments):
        return [(r, None) for r in judgments]
    items = [Judgment.model_validate(r) if r["turn"] is not None else _Fields(r, turn=None) for r in judgments]
    return [(j.model_dump() if isinstance(j, Judgment) else dict(j), n)
            for j, n in per_conversation(items)]  # type: ignore[arg-type]
