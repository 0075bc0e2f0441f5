"""The json_schema and similarity checks through a real run on the fake provider: the schema check passes a valid
answer and names the first error of an invalid one; the similarity check scores the cosine of the fake's embeddings
(with and without a threshold); the embeddings are counted and priced on the judgments as the fake billed them,
estimated beforehand by `bench estimate`, and answered from the response cache on a second run (no request)."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest
import yaml

from bench._word_vectors import word_count, word_vector
from bench.core.errors import ParamsError
from bench.core.records import Candidate, Judgment
from bench.core.spend import recorded_spend
from bench.core.store import RunStore
from bench.estimate import estimate
from bench.estimate.command import check_budget
from bench.models.budget import PriceUnknown
from bench.run import open_run
from bench.stage_runs import run_collect
from bench.testing.grids import grid, judge, model, prompt

RUBRIC = """---
id: shape
version: "1"
mode: automated
checks:
  - {id: inline, kind: json_schema, schema: {type: object, required: [name, age], properties: {age: {type: integer}}}}
  - {id: filed, kind: json_schema, schema: person.schema.yaml}
  - {id: sim, kind: similarity, reference: answer}
  - {id: close, kind: similarity, reference: answer, threshold: 0.8}
---
"""
MIXED = """---
id: mixed
version: "1"
mode: hybrid
criteria:
  - {id: quality, description: how good it is, scale: [1, 5], anchors: {1: bad, 2: weak, 3: fair, 4: good, 5: great}}
checks:
  - {id: sim, kind: similarity, reference: answer}
---
MARKER-MIXED: grade the answer.
"""
SCHEMA_FILE = "type: object\nrequired: [name]\nproperties: {name: {type: string, minLength: 2}}\n"
# question marker -> (reference answer, the model's reply)
ROWS = {
    "QS-1": ('The capital is Paris {"name": "Ada", "age": 36}', 'The capital is Paris {"name": "Ada", "age": 36}'),
    "QS-2": ("Paris is the capital of France", 'zebra quantum violin\n```json\n{"name": "B", "age": "old"}\n```'),
    "QS-3": (["no json here", "something else entirely"], "there is no json here at all"),
}
PRICE = 2.0  # USD per million prompt tokens, on the embedding model and on the fake's bill


def cos(a: str, b: str) -> float:
    u, v = word_vector(a), word_vector(b)
    return sum(x * y for x, y in zip(u, v)) / math.sqrt(sum(x * x for x in u) * sum(y * y for y in v))


def write_grid(tmp: Path, url: str, rubric: str = RUBRIC, **judge_extra) -> Path:
    with open(tmp / "qs.jsonl", "w") as fh:
        for q, (ref, _) in ROWS.items():
            fh.write(json.dumps({"question": f"{q}: say it", "answer": ref}) + "\n")
    (tmp / "shape.md").write_text(rubric)
    (tmp / "mixed.md").write_text(MIXED)
    (tmp / "person.schema.yaml").write_text(SCHEMA_FILE)
    embedder = {"model": "openai/embed-sim", "api_base": url,
                "price": {"input_per_mtok": PRICE, "output_per_mtok": 0}}
    price = {"input_per_mtok": PRICE, "output_per_mtok": 0}  # the chat replies are billed too
    return grid(tmp / "qs.yaml", url, name="qs", models=[model("m1", url, name="simq", price=price)],
                prompts=[prompt("ask", "Question {question}")],
                scenarios={"dataset": {"path": "qs.jsonl", "fields": {"question": "question"},
                                       "reference": {"answer": "answer"}}},
                judges=[judge("shape", url, rubric=str(tmp / "shape.md"),
                              **({"embedding_model": embedder} | judge_extra)),
                        judge("mixed", url, rubric=str(tmp / "mixed.md"), price=price,  # its own embedder
                              embedding_model={**embedder, "model": "openai/embed-mix"})],
                limits={"max_concurrency": 4, "timeout_s": 10, "retries": 0})


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory, fake_server):
    """Estimate, then collect and judge the grid once on a cache of its own; then the same again into a second
    folder. Return (first folder, second folder, the estimate before, the fake's stats after each run)."""
    tmp = tmp_path_factory.mktemp("qs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BENCH_CACHE", str(tmp / "cache"))
        fake_server.reset()
        grade = {"match": "MARKER-MIXED", "content": json.dumps({"scores": {"quality": 4}, "rationale": "ok"})}
        fake_server.configure(replies=[grade, *({"match": q, "content": reply} for q, (_, reply) in ROWS.items())],
                              bill_per_mtok={"input": PRICE, "output": 0.0})
        params = write_grid(tmp, fake_server.url)
        run = open_run(params, run_dir=tmp / "runs" / "first")
        before = estimate(run)
        asyncio.run(run_collect(run, progress="none", judge=True))
        first = fake_server.stats()
        fake_server.reset()
        again = open_run(params, run_dir=tmp / "runs" / "again")
        asyncio.run(run_collect(again, progress="none", judge=True))
        second = fake_server.stats()
    return run.dir, again.dir, before, first, second


def graded(run_dir: Path, judge_id: str = "shape") -> dict[str, Judgment]:
    store = RunStore(run_dir)
    question = {c.id: next(q for q in ROWS if q in c.messages[-1]["content"]) for c in store.latest(Candidate).values()}
    return {question[j.candidate_ids[0]]: j for j in store.latest(Judgment).values() if j.judge_id == judge_id}


def test_json_schema_passes_a_valid_answer_and_names_the_first_error(sim_run):
    by_q = graded(sim_run[0])
    details = {q: {c["id"]: c for c in j.details["checks"]} for q, j in by_q.items()}
    assert details["QS-1"]["inline"]["passed"] and details["QS-1"]["filed"]["passed"]  # the {...} inside the prose
    assert by_q["QS-1"].scores["inline"] == 1.0
    assert details["QS-2"]["inline"]["detail"] == "$.age: 'old' is not of type 'integer'"  # from the ```json fence
    assert details["QS-2"]["filed"]["detail"] == "$.name: 'B' is too short"  # the schema file beside the rubric
    assert not details["QS-3"]["inline"]["passed"] and "holds no JSON" in details["QS-3"]["inline"]["detail"]
    assert by_q["QS-2"].scores["inline"] == by_q["QS-3"].scores["filed"] == 0.0


def test_similarity_scores_the_cosine_and_its_threshold(sim_run):
    by_q = graded(sim_run[0])
    assert by_q["QS-1"].scores["sim"] == pytest.approx(1.0) and by_q["QS-1"].scores["close"] == 1.0
    unrelated = cos(ROWS["QS-2"][1], ROWS["QS-2"][0])
    assert by_q["QS-2"].scores["sim"] == pytest.approx(max(0.0, unrelated)) and unrelated < 0.3
    assert by_q["QS-2"].scores["close"] == 0.0
    best = max(cos(ROWS["QS-3"][1], r) for r in ROWS["QS-3"][0])  # a list of references: the best counts
    assert best == pytest.approx(cos(ROWS["QS-3"][1], "no json here")) and 0.5 < best < 0.8
    assert by_q["QS-3"].scores["sim"] == pytest.approx(best) and by_q["QS-3"].scores["close"] == 0.0
    close = {c["id"]: c for c in by_q["QS-3"].details["checks"]}["close"]
    assert "< threshold 0.8" in close["detail"] and "'no json here'" in close["detail"]
    assert by_q["QS-1"].judge_params["embedding_model"].startswith("openai/embed-sim at http://127.0.0.1:")


def test_embeddings_are_counted_and_priced_as_billed(sim_run):
    run_dir, _again, _before, first, _second = sim_run
    by_q = graded(run_dir)
    # one request per distinct text: QS-1's answer is its reference (1), QS-2: 2, QS-3: 3; the second similarity
    # check of an item asks the same texts again, answered by the cache
    assert first["embeddings"] == 12 and first["by_model"]["embed-sim"] == first["by_model"]["embed-mix"] == 6
    embedded = [t for r in first["recent"] if r.get("model") == "embed-sim" for t in r["input"]]
    tokens = sum(j.usage.prompt_tokens for j in by_q.values())
    assert len(embedded) == 6 and tokens == sum(word_count(t) for t in embedded)
    assert sum(j.usage.calls for j in by_q.values()) == 6 and by_q["QS-1"].usage.cache_hits == 3
    assert all(j.usage.completion_tokens == 0 and not j.usage.estimated for j in by_q.values())
    assert sum(j.usage.cost_usd for j in by_q.values()) == pytest.approx(tokens * PRICE / 1e6)
    assert recorded_spend(run_dir).usd == pytest.approx(first["billed"]["usd"])  # chat and embeddings, as billed


def test_a_hybrid_judge_adds_its_embeddings_to_its_llm_grade(sim_run):
    mixed, shape = graded(sim_run[0], "mixed"), graded(sim_run[0])
    for q, j in mixed.items():
        assert j.ok and j.scores["sim"] == pytest.approx(shape[q].scores["sim"]) and j.scores["quality"] == 4
        assert j.score == pytest.approx(0.5 * 0.75 + 0.5 * shape[q].scores["sim"])
    # per item one grading call and its distinct texts' embeddings (QS-1: 1, QS-2: 2, QS-3: 3)
    assert [mixed[q].usage.calls for q in ROWS] == [2, 3, 4]


def test_the_estimate_counts_the_embeddings(sim_run):
    _run, _again, before, first, _second = sim_run
    stage = next(s for s in before.stages if s.mode == "embeddings" and s.id == "shape")
    assert (stage.stage, stage.id, stage.model) == ("judge", "shape", "openai/embed-sim")
    # the references are known before the answers: 4 of them (QS-1's, QS-2's, QS-3's two), and 3 answers unknown
    assert (stage.to_send, stage.unknown) == (7, 3)
    assert stage.output_tokens_max == 0 and stage.repairs_max == 0 and stage.expected_from == "no output"
    assert stage.input_tokens > 0 and stage.cost_usd_max == pytest.approx(stage.input_tokens * PRICE / 1e6)
    references = [t for r in first["recent"] if r.get("model") == "embed-sim" for t in r["input"]
                  if any(t == ref or t in ref for ref, _ in ROWS.values())]
    assert len(references) == 4 and stage.input_tokens > sum(word_count(t) for t in references)


def test_a_second_run_takes_the_embeddings_from_the_cache(sim_run):
    _run, again, _before, _first, second = sim_run
    assert second["requests"] == 0 and second["embeddings"] == 0
    by_q = graded(again)
    assert by_q["QS-3"].scores == graded(sim_run[0])["QS-3"].scores
    assert all(j.usage.calls == 0 and j.usage.cache_hits > 0 for j in by_q.values())


def test_a_similarity_check_without_an_embedding_model_is_refused_before_any_request(tmp_path, fake):
    params = write_grid(tmp_path, fake.url, embedding_model=None)
    with pytest.raises(ParamsError, match="check 'sim' is a similarity check; give the judge an embedding_model"):
        asyncio.run(run_collect(open_run(params, run_dir=tmp_path / "runs" / "x"), progress="none", judge=True))
    assert fake.stats()["requests"] == 0


def test_a_bad_schema_is_refused_naming_the_file_and_key(tmp_path, fake):
    bad = RUBRIC.replace("properties: {age: {type: integer}}", "properties: {age: {type: 12}}")
    with pytest.raises(ParamsError, match=r"shape\.md: checks\[0\].*check 'inline': schema is no valid JSON schema"):
        open_run(write_grid(tmp_path, fake.url, bad), run_dir=tmp_path / "runs" / "x")
    missing = RUBRIC.replace("person.schema.yaml", "nowhere.json")
    with pytest.raises(ParamsError, match=r"shape\.md: checks\[1\].*cannot read the schema file .*nowhere\.json"):
        open_run(write_grid(tmp_path, fake.url, missing), run_dir=tmp_path / "runs" / "y")


def test_a_dry_run_embeds_in_process(tmp_path, fake):
    run = open_run(write_grid(tmp_path, fake.url), run_dir=tmp_path / "runs" / "qs-dry", dry_run=True)
    assert run.sweep.judges[0].embedding_model.model.startswith("dry/")
    asyncio.run(run_collect(run, progress="none", judge=True))
    sims = [j.scores["sim"] for j in RunStore(run.dir).latest(Judgment).values() if j.judge_id == "shape"]
    assert len(sims) == 3 and all(0.0 <= s <= 1.0 for s in sims) and fake.stats()["requests"] == 0


def test_a_budget_refuses_an_unpriced_embedding_model_naming_its_entry(tmp_path, fake):
    params = write_grid(tmp_path, fake.url)
    data = yaml.safe_load(params.read_text())
    del data["judges"][0]["embedding_model"]["price"]
    data["limits"]["budget_usd"] = 1.0
    params.write_text(yaml.safe_dump(data))
    run = open_run(params, run_dir=tmp_path / "runs" / "x")
    with pytest.raises(PriceUnknown, match=r"judges\[0\]\.embedding_model \(id shape, openai/embed-sim\)"):
        check_budget(run, estimate(run))
    assert fake.stats()["requests"] == 0
