"""The embedded model end to end through bench.models.client: a real completion, a schema-constrained reply, and
embeddings (llama.cpp's per-token vectors, mean-pooled)."""

import asyncio
import json

import jsonschema
import pytest

from bench.core.errors import ProviderError
from bench.models import local
from bench.models.client import LLM, Limits
from bench.models.embeddings import cosine
from bench.models.routing import ModelSpec

pytestmark = pytest.mark.local_model

GRADE = {"type": "object", "additionalProperties": False, "required": ["score", "reason"],
         "properties": {"score": {"type": "integer", "enum": [1, 2, 3, 4, 5]},  # the grammar enforces enum,
                        "reason": {"type": "string", "minLength": 1, "maxLength": 160}}}  # not min/max


def test_embedded_model_answers_plain_and_json_through_the_seam(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_LOCAL_EMBEDDINGS", "1")  # the server embeds only when asked (it triples its memory)
    local.shutdown()  # a server another test started without embeddings
    llm = LLM(Limits(max_concurrency=2, timeout_s=120), cache=str(tmp_path / "c.sqlite"))
    spec = ModelSpec("local/gemma-3-270m", params={"temperature": 0.0, "max_tokens": 48, "seed": 1})
    judge = {"max_tokens": 160}  # enough room for the whole object: a cut-off reply is not JSON
    rf = {"type": "json_schema", "json_schema": {"name": "grade", "schema": GRADE, "strict": True}}
    judge_msgs = [{"role": "system", "content": "You grade answers. Reply in JSON."},
                  {"role": "user", "content": "Question: 2+2? Answer: 4. Grade the answer from 1 to 5."}]

    async def go():
        plain = await llm.complete(spec, [{"role": "user", "content": "Name one fruit."}])
        graded = await llm.complete(spec, judge_msgs, response_format=rf, params=judge)
        again = await llm.complete(spec, judge_msgs, response_format=rf, params=judge)
        texts = ("The cat sat on the mat.", "A cat sat on a mat.", "Name one fruit.")
        vectors = [await llm.embed(spec, t) for t in texts]
        await llm.aclose()
        return plain, graded, again, vectors

    try:
        plain, graded, again, vectors = asyncio.run(go())
    finally:
        local.shutdown()
    assert plain.text.strip() and plain.usage.completion_tokens >= 1 and plain.usage.cost_usd == 0.0  # free
    assert graded.usage.finish_reason == "stop", graded.text
    jsonschema.validate(json.loads(graded.text, strict=False), GRADE)  # grammar-constrained: valid every time
    assert again.usage.cached and again.text == graded.text
    print("cosines", [round(cosine(vectors[0].vector, v.vector), 4) for v in vectors[1:]])
    assert llm.calls == 5  # two completions, three embeddings (never the completion's cache entry)
    assert all(len(v.vector) == 640 and v.usage.cost_usd == 0.0 and v.usage.prompt_tokens > 0 for v in vectors)


def test_embeddings_from_an_embedded_server_started_without_them_say_how_to_turn_them_on(tmp_path, monkeypatch):
    monkeypatch.delenv("BENCH_LOCAL_EMBEDDINGS", raising=False)
    llm = LLM(Limits(max_concurrency=1, timeout_s=120), cache=str(tmp_path / "c"))
    spec = ModelSpec("local/gemma-3-270m", params={"temperature": 0.0})

    async def go():
        try:
            return await llm.embed(spec, "The cat sat on the mat.")
        finally:
            await llm.aclose()

    local.shutdown()
    try:
        with pytest.raises(ProviderError) as refused:
            asyncio.run(go())
    finally:
        local.shutdown()
    assert "BENCH_LOCAL_EMBEDDINGS=1" in str(refused.value) and not refused.value.retryable
