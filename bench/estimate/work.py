"""The first-turn requests each stage of a sweep will make, with their messages, before anything is sent; judge
requests of answers not collected yet use a stand-in answer (their cache state ``unknown``)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Set
from dataclasses import dataclass, field, replace

from bench.collect import WorkItem, make_candidate, plan, request_messages
from bench.config.params import Cell
from bench.config.reply_schemas import response_format
from bench.core.records import Candidate, Judgment
from bench.estimate.bounds import Ask, bound_of, conversation, stand_in
from bench.judge.packed import packed_messages, short_id  # the packed call, as grade_packed builds it
from bench.judge.grader import Item, Judge
from bench.judge.solutions import solution_messages
from bench.judge.judgments import grid_positions, items_for, load_judges, next_attempts, owns_dataset
from bench.config.structured_checks import similarity_texts
from bench.judge.similarity import similarity_checks
from bench.models.client import LLM
from bench.models.embeddings import request_key
from bench.models.routing import ModelSpec, resolve
from bench.models.tokens import output_bound
from bench.run import Run

# the stand-in answer of a cell not collected yet, given its model's cached replies' mean length (None: none)
Placeholder = Callable[[Cell, float | None], str]
CACHE_SAMPLE = 64  # cached judge replies read per judge for their length: enough for a mean, cheap on a big grid
SIMULATOR = "simulator"  # the stage of a conversation's simulated user (its mode too)
EMBEDDINGS = "embeddings"  # the mode of a judge's embedding requests (its similarity checks)
EMBEDDED = ("automated", "hybrid")  # the modes that run checks


@dataclass
class StageWork:
    """What one model (collect), one simulated user or one judge will ask in the next sweep."""

    stage: str  # "collect", "simulator" or "judge"
    id: str  # model id, user_simulator.id or judge id
    mode: str  # "collect", "simulator", or the judge's grading mode
    spec: ModelSpec
    items: int  # answers to produce / grades to make (pairwise: one per order)
    done: int  # of ``items``, already in the run folder (succeeded, or failed max_attempts times)
    held: int = 0  # first-turn requests of the items already done (the run folder holds their replies)
    requests: int = 0  # first-turn requests still to ask (before the cache answers some)
    cached: int = 0  # of ``requests``, answered by the response cache (or identical to one asked before)
    unknown: int = 0  # of ``requests``, of answers not collected yet: the cache cannot be checked for them
    asks: list[Ask] = field(default_factory=list)  # the requests to send: ``requests - cached`` of them
    replies: list[int] = field(default_factory=list)  # completion tokens of the cached replies read (evidence)
    bounds: dict[str, str] = field(default_factory=dict)  # prompt key -> what bounds its conversations, in words


def stage_work(run: Run, llm: LLM, placeholder: Placeholder | None = None, *, only_stage: str | None = None,
               groups: list[Iterable[str]] | None = None,
               simulated: Callable[[Cell], str] | None = None) -> list[StageWork]:
    """Return one StageWork per model (collect), per simulated user and per judge of ``run``; sends nothing.
    ``only_stage`` as ``bench sweep --only-stage``; ``groups``: the cell keys of each execution (default: one).
    ``placeholder`` and ``simulated``: stand-ins of an answer and a simulated user's turn not collected yet."""
    work = [(it, it.candidate_id) for it in plan(run.sweep, run.scenarios, run.cells)]  # each id hashed once
    store = run.store
    tries, limit = store.attempts(Candidate), run.sweep.limits.max_attempts
    seen: set[str] = set()
    answers: dict[str, dict] = {}  # candidate id -> the answer the response cache holds (make_candidate's keywords)
    collects = run.sweep.collects and only_stage != "judge"
    talks = any(c.prompt.is_conversation for c in run.cells)
    latest = store.latest(Candidate) if talks and collects else {}
    out = _collect_work(run, llm, work, seen, answers, latest) if collects else []
    judges = load_judges(run)
    if not judges:
        return out
    keys = {c.key for c in run.cells} | {j.entry.baseline for j in judges if j.entry.baseline}
    stored = {c.id: c for c in (latest or store.latest(Candidate)).values() if c.ok and c.cell in keys}
    fill = placeholder or (lambda cell, mean: "")
    user = simulated or (lambda cell: "")
    cached = {w.id: sum(w.replies) / len(w.replies) for w in out if w.replies and w.stage == "collect"}
    future = {cid: make_candidate(it, request_messages(it), **(answers.get(cid) or _stand_in(
        it, fill(it.cell, cached.get(it.cell.model.id)), user)))
              for it, cid in work if collects and cid not in stored and tries.get(cid, 0) < limit}
    if only_stage == "collect":  # the judge stage does not run: what was collected earlier waits for it
        stored = {}
    cell_of = {c.id: c.cell for c in stored.values()}
    group_of = {key: n for n, group in enumerate(groups or []) for key in group}
    order = grid_positions(run)  # the judge stage grades the answers collected earlier in the grid's order
    in_order = lambda c: order.get((c.cell, c.scenario_id, c.sample), len(order))  # noqa: E731
    answered = sorted(stored.values(), key=in_order)
    places = _places(sorted(future.values(), key=in_order), group_of)
    graded = (store.done_ids(Judgment), store.attempts(Judgment))
    stand_ins = set(future) - set(answers)
    place = lambda item: places.get(item.ids[0]) or (group_of.get(cell_of.get(item.ids[0], ""), 0), -1)  # noqa: E731
    for judge in (j for j in judges if j.entry.model is not None):  # a checks-only judge with none: nothing to ask
        items = items_for(judge, run.scenarios, [*answered, *future.values()], owns_dataset(run))
        out.append(_judge_work(run, llm, judge, items, (set(future), stand_ins), graded, seen, place))
        if similarity_checks(judge) and judge.entry.embedding_model is not None and judge.mode in EMBEDDED:
            out.append(_embedding_work(run, llm, judge, items, stand_ins, graded, seen))
    return out


def _embedding_work(run: Run, llm: LLM, judge: Judge, items: list[Item], stand_ins: Set[str],
                    graded: tuple[set[str], dict[str, int]], seen: set[str]) -> StageWork:
    """Return the embeddings a judge's similarity checks ask (mode ``embeddings``): one request per distinct
    text of the items still to grade (the answer and each reference value), the cached ones counted as such."""
    spec = judge.entry.embedding_model.spec()  # type: ignore[union-attr]
    route = llm._resolved(spec)
    pending, _exhausted = next_attempts(judge, items, *graded, run.sweep.limits.max_attempts)
    out = StageWork("judge", judge.entry.id, EMBEDDINGS, spec, len(items), len(items) - len(pending))
    asks: dict[str, tuple[str, bool]] = {}  # request key (or a stand-in's place) -> (text, unknown)
    for item in pending:
        unknown = bool(stand_ins.intersection(item.ids))
        for check in similarity_checks(judge):
            value = (item.scenario.reference or {}).get(check.reference)
            answer, options = similarity_texts(check, item.texts[0] or "", value if value is not None else [])
            for n, text in enumerate([answer or "", *options]):
                if text.strip():
                    key = f"{id(item)}:{n}" if unknown and n == 0 else request_key(llm, route, text)
                    asks.setdefault(key, (text, unknown and n == 0))
    known = [k for k, (_t, unknown) in asks.items() if not unknown]
    hits = dict(zip(known, cached_keys(llm, known, seen)))
    for key, (text, unknown) in asks.items():
        out.cached += hits.get(key, False)
        out.asks += [] if hits.get(key) else [Ask([{"role": "user", "content": text}], f"{judge.entry.id} embeddings")]
    out.requests, out.unknown = len(asks), sum(unknown for _t, unknown in asks.values())
    return out


def _places(future: list[Candidate], group_of: dict[str, int]) -> dict[str, tuple[int, int]]:
    """Return each new answer's (execution, place among the answers that execution's collect asks, in grid
    order): an execution packs its own cells apart, its stream k consecutive new answers."""
    counts: dict[int, int] = {}
    out = {}
    for c in future:
        n = group_of.get(c.cell, 0)
        out[c.id] = (n, counts.get(n, 0))
        counts[n] = counts.get(n, 0) + 1
    return out


def _stand_in(item: WorkItem, reply: str, user: Callable[[Cell], str]) -> dict:
    """Return make_candidate's keywords of an answer not collected yet: ``reply`` (a conversation: its bound of
    turns, each answered by ``reply``, the simulated user's by ``user``'s stand-in)."""
    return stand_in(item, reply, user(item.cell)) if item.cell.prompt.is_conversation else {"output": reply}


def _collect_work(run: Run, llm: LLM, work: list[tuple[WorkItem, str]], seen: set[str],
                  answers: dict[str, dict], latest: dict[str, Candidate]) -> list[StageWork]:
    """Return each model's collect work, then each simulated user's; ``answers`` gets wholly cached answers."""
    store = run.store
    done, tries = store.done_ids(Candidate), store.attempts(Candidate)
    limit = run.sweep.limits.max_attempts
    out: list[StageWork] = []
    simulators: dict[str, StageWork] = {}
    for model in run.sweep.models:
        mine = [(it, cid) for it, cid in work if it.cell.model.id == model.id]
        if not mine:
            continue
        todo = [(it, cid) for it, cid in mine if cid not in done and tries.get(cid, 0) < limit]
        stage = StageWork("collect", model.id, "collect", model.spec(), len(mine), len(mine) - len(todo),
                          sum(_held(latest.get(cid), "model") for _it, cid in mine if cid in done))
        _single_work(stage, llm, [(it, cid) for it, cid in todo if not it.cell.prompt.is_conversation], tries,
                     seen, answers)
        talks = [(it, cid) for it, cid in mine if it.cell.prompt.is_conversation]
        stage.bounds = {it.cell.prompt.key: bound_of(it.cell.prompt).words for it, _cid in talks}
        bounds: dict[str, tuple[int, int]] = {}
        for it, cid in talks:
            sim = _simulator_stage(simulators, it) if it.cell.prompt.user_simulator else None
            if sim is not None:
                sim.items += 1
                sim.done += cid in done or tries.get(cid, 0) >= limit
                sim.held += _held(latest.get(cid), SIMULATOR) if cid in done else 0
            if cid in done or tries.get(cid, 0) >= limit:
                continue
            if it.cell.key not in bounds:
                bounds[it.cell.key] = _reply_bounds(it)
            talk = conversation(it, llm, bounds[it.cell.key], lambda keys: cached_keys(llm, keys, seen))
            stage.requests += talk.model_requests
            stage.cached += talk.model_cached
            stage.asks += talk.model
            stage.replies += talk.replies
            if sim is not None:
                sim.requests += talk.simulator_requests
                sim.cached += talk.simulator_cached
                sim.asks += talk.simulator
            if talk.transcript is not None:  # the judges will grade this very conversation
                answers[cid] = {"output": talk.output, "transcript": talk.transcript, "turns": talk.turns}
        out.append(stage)
    return out + list(simulators.values())


def _single_work(stage: StageWork, llm: LLM, todo: list[tuple[WorkItem, str]], tries: dict[str, int],
                 seen: set[str], answers: dict[str, dict]) -> None:
    """Add the one-reply items ``todo`` to a model's collect work: one request each, less what the cache holds."""
    messages = [request_messages(it) for it, _cid in todo]
    keys = [llm.request_key(stage.spec, m, sample=it.sample, attempt=tries.get(cid, 0) + 1)
            for (it, cid), m in zip(todo, messages)]
    hits = cached_keys(llm, keys, seen)
    stage.asks += [Ask(m, it.cell.key) for (it, _cid), m, hit in zip(todo, messages, hits) if not hit]
    for (_it, cid), key, hit in zip(todo, keys, hits):
        reply = llm.cache.get(key) if hit and llm.cache is not None else None
        if reply is not None:  # the judges will grade this very answer: their requests can be looked up
            answers[cid] = {"output": reply["text"]}
            stage.replies += _completion_tokens(reply)
    stage.requests += len(todo)
    stage.cached += sum(hits)


def _simulator_stage(simulators: dict[str, StageWork], item: WorkItem) -> StageWork:
    """Return the simulator stage of ``item``'s simulated user: one per ``user_simulator.id`` and model."""
    sim = item.cell.prompt.user_simulator
    spec = sim.spec()
    name = sim.id
    if name in simulators and simulators[name].spec != spec:
        name = f"{sim.id} ({sim.model})"
    return simulators.setdefault(name, StageWork(SIMULATOR, name, SIMULATOR, spec, 0, 0))


def _reply_bounds(item: WorkItem) -> tuple[int, int]:
    """Return the output bound (tokens per reply) of ``item``'s model and of its simulated user (0: none)."""
    sim = item.cell.prompt.user_simulator
    return (output_bound(resolve(item.cell.model.spec()))[0],
            output_bound(resolve(sim.spec()))[0] if sim is not None else 0)


def _held(cand: Candidate | None, by: str) -> int:
    """Return the requests a done item made as ``by`` ("model" or "simulator"): its turns', else one."""
    if cand is None or cand.turns is None:
        return int(by == "model")
    return sum(isinstance(t, dict) and t.get("by", "model") == by for t in cand.turns)


def _judge_work(run: Run, llm: LLM, judge: Judge, items: list[Item], new: tuple[Set[str], Set[str]],
                graded: tuple[set[str], dict[str, int]], seen: set[str],
                place: Callable[[Item], tuple[int, int]]) -> StageWork:
    """Return one judge's work. ``new``: (the ids of the answers this sweep collects, which are graded as
    they arrive; those of them answered by a stand-in, whose judge requests cannot be looked up)."""
    (future, stand_ins), (done, tries) = new, graded
    spec, grader = judge.entry.spec(), judge.grader
    pending, exhausted = next_attempts(judge, items, done, tries, run.sweep.limits.max_attempts)
    per_item = len(judge.judgment_ids(items[0])) if items else 1
    n_done = len(items) - len(pending) - len(exhausted)
    out = StageWork("judge", judge.entry.id, judge.mode, spec, len(items) * per_item, n_done * per_item)
    solutions, pending, unsolved, out.held = _solutions(llm, judge, items, pending, exhausted)
    unknown = lambda item: bool(stand_ins.intersection(item.ids)) or id(item) in unsolved  # noqa: E731
    if grader.packed:
        out.held += math.ceil(n_done / max(1, judge.entry.pack_size))
        requests = [(packed_request(judge, chunk, run.sweep.seed), any(unknown(i) for i in chunk))
                    for chunk in _chunks(judge, pending, future, place)]
    else:
        out.held += round(grader.requests_per_item(judge) * n_done) + sum(
            i in done for item in pending for i in judge.judgment_ids(item))  # a pairwise order graded earlier
        requests = [((messages, rf, item.attempt, item.repeat), unknown(item)) for item in pending
                    for messages, rf in grader.first_requests(judge, item, done) or []]
    requests = solutions + requests
    known = [r for r, unknown in requests if not unknown]
    keys = [llm.request_key(spec, m, response_format=rf, attempt=attempt, sample=repeat)
            for m, rf, attempt, repeat in known]
    found = cached_keys(llm, keys, seen)
    hits = iter(found)
    for (messages, *_rest), unknown in requests:
        hit = False if unknown else next(hits)
        out.cached += hit
        out.asks += [] if hit else [Ask(messages, judge.entry.id)]
    out.requests, out.unknown = len(requests), sum(unknown for _r, unknown in requests)
    if out.asks and llm.cache is not None:  # what this judge answered before says how long its replies run
        for key in [k for k, hit in zip(keys, found) if hit][:CACHE_SAMPLE]:
            out.replies += _completion_tokens(llm.cache.get(key))
    return out


def _solutions(llm: LLM, judge: Judge, items: list[Item], pending: list[Item], exhausted: list[Item]
               ) -> tuple[list[tuple[tuple, bool]], list[Item], set[int], int]:
    """Return, for a ``solve_first`` judge: its solution requests still to ask, the pending items with their
    solution, the ids whose solution is a stand-in, and the done items' solution requests (else: nothing)."""
    if not judge.rubric.solve_first:
        return [], pending, set(), 0
    spec, cache = judge.entry.spec(), llm.cache
    texts: dict[str, str | None] = {}  # request key -> the cached solution (None: not cached)
    asks, solved, unsolved = {}, [], set()
    keys = [llm.request_key(spec, solution_messages(judge, item), sample=item.repeat) for item in pending]
    cached = cache.held(keys) if cache is not None and keys else set()  # one look for all (a miss: no get)
    for item, key in zip(pending, keys):
        if key not in texts:
            hit = cache.get(key) if key in cached else None
            texts[key] = hit["text"] if hit is not None else None
            asks[key] = ((solution_messages(judge, item), None, 1, item.repeat), False)
        solved.append(replace(item, solution=texts[key] if texts[key] is not None else item.texts[0]))
        if texts[key] is None:
            unsolved.add(id(solved[-1]))
    open_items = {(i.ids, i.repeat) for i in [*pending, *exhausted]}
    held = {llm.request_key(spec, solution_messages(judge, i), sample=i.repeat) for i in items
            if (i.ids, i.repeat) not in open_items} - set(asks)
    return list(asks.values()), solved, unsolved, len(held)


def _completion_tokens(reply: dict | None) -> list[int]:
    """Return ``[completion tokens]`` of a cached reply, or [] when it has none (or is not there)."""
    tokens = ((reply or {}).get("usage") or {}).get("completion_tokens")
    return [int(tokens)] if isinstance(tokens, int) and not isinstance(tokens, bool) else []


def _chunks(judge: Judge, pending: list[Item], future: Set[str],
            place: Callable[[Item], tuple[int, int]]) -> list[list[Item]]:
    """Return the packed calls of ``pending`` as grading makes them, per execution: earlier answers k at a time
    in grid order, the stream's new ones k consecutive places to a pack, each cut k to a call."""
    k = max(1, judge.entry.pack_size)
    parts: dict[tuple[int, bool, int, int], list[Item]] = {}
    for item in pending:  # one repeat per call, as grading packs them
        execution, position = place(item)
        new = bool(future.intersection(item.ids))
        pack = (position // k if position >= 0 else -1) if new else 0
        parts.setdefault((execution, new, item.repeat, pack), []).append(item)
    return [part[i:i + k] for part in parts.values() for i in range(0, len(part), k)]


def packed_request(judge: Judge, items: list[Item], seed: int) -> tuple[list[dict], dict, int, int]:
    """Return (messages, response_format, attempt, repeat) of the packed call grading ``items``, exactly as
    ``bench.judge.packed.grade_packed`` builds it (the same order, the same shuffle, the same schema)."""
    order = sorted(items, key=short_id)
    random.Random(f"{seed}:{judge.entry.id}:{[short_id(i) for i in order]}").shuffle(order)
    ids = [short_id(i) for i in order]
    messages, _notes = packed_messages(judge, order, ids)
    return (messages, response_format(judge.rubric.packed_schema(ids), "grades"), max(i.attempt for i in items),
            order[0].repeat)


def cached_keys(llm: LLM, keys: list[str], seen: set[str]) -> list[bool]:
    """Return, per key, whether no request will be sent for it: the response cache holds its reply, or an
    identical request was counted before (``seen``, which this adds ``keys`` to)."""
    fresh = list(dict.fromkeys(k for k in keys if k not in seen))
    cache = llm.cache
    held = cache.held(fresh) if fresh and cache is not None else set()
    out = []
    for key in keys:
        out.append(key in seen or key in held)
        seen.add(key)
    return out
