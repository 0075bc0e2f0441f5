"""A batch line is OpenAI's chat request whatever the provider: LiteLLM's files API translates it.

Providers on the "litellm" transport (Vertex, Bedrock, Mistral, ...) are called directly with LiteLLM's
provider-specific params (``max_output_tokens``, ``maxTokens``, a JSON tool for JSON mode), but their
batch files are written in OpenAI's form and translated by LiteLLM on upload. These tests put bench's
batch line through LiteLLM's own Vertex and Bedrock upload translations (pure functions: nothing is
sent anywhere) and check that the output bound and the JSON schema survive, and run a batched
litellm-transport model against the fake provider end to end.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from litellm.llms.bedrock.files.transformation import BedrockFilesConfig
from litellm.llms.vertex_ai.files.transformation import VertexAIFilesConfig, _openai_batch_jsonl_entry_to_vertex_rows

from bench.models.batches import BatchPolicy
from bench.models.batches.outputs import read_line
from bench.models.batches.batch_api import jsonl_line, line_body
from bench.models.client import LLM
from bench.models.limits import Limits
from bench.models.routing import ModelSpec, body_params, resolve

SCHEMA = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
JSON_MODE = {"type": "json_schema", "json_schema": {"name": "verdict", "schema": SCHEMA}}
PARAMS = {"max_tokens": 64, "temperature": 0.0}
ASK = [{"role": "user", "content": "Grade this answer."}]


def _line(model: str) -> dict:
    """The batch line bench writes for ``model`` (as ``LLM.complete`` builds it), parsed back from its JSONL."""
    route = resolve(ModelSpec(model=model, params=PARAMS))
    body = {"model": route.served_model, "messages": ASK, **body_params(route, PARAMS, JSON_MODE, model)}
    return json.loads(jsonl_line("k1", line_body(route, body, PARAMS, JSON_MODE)))


def test_a_vertex_line_keeps_its_output_bound_and_json_schema_through_litellms_translation():
    entry = _line("vertex_ai/gemini-2.0-flash")
    assert entry["body"]["model"] == "gemini-2.0-flash", "the provider's own model name, as Vertex's batch wants"
    [row] = _openai_batch_jsonl_entry_to_vertex_rows(entry, VertexAIFilesConfig()._map_openai_to_vertex_params)
    config = row["request"]["generationConfig"]
    assert config["max_output_tokens"] == 64 and config["temperature"] == 0.0
    assert config["response_mime_type"] == "application/json" and config["response_json_schema"] == SCHEMA


@pytest.mark.parametrize("model", ["bedrock/anthropic.claude-3-5-haiku-20241022-v1:0",
                                   "bedrock/us.amazon.nova-lite-v1:0"])
def test_a_bedrock_line_keeps_its_output_bound_and_json_tool_through_litellms_translation(model):
    [record] = BedrockFilesConfig()._transform_openai_jsonl_content_to_bedrock_jsonl_content([_line(model)])
    assert record["recordId"] == "k1"
    given = record["modelInput"]
    if "anthropic" in model:
        assert given["max_tokens"] == 64, "not Bedrock's default bound"
        assert given["tool_choice"]["name"] == "json_tool_call" and given["tools"][0]["input_schema"] == SCHEMA
    else:
        assert given["inferenceConfig"]["maxTokens"] == 64
        assert given["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"] == SCHEMA


def test_a_batched_model_on_the_litellm_transport_is_answered_through_its_batch(fake, tmp_path):
    spec = ModelSpec(model="openai/m1", api_base=fake.url, transport="litellm", params=PARAMS, price=(1.0, 2.0),
                     batch=BatchPolicy(poll_s=0.05, poll_max_s=0.2, gather_s=0.1))

    async def main():
        llm = LLM(Limits(retries=1, backoff_s=0.01, timeout_s=10))
        llm.batch_dir = tmp_path / "batches"
        try:
            return await asyncio.gather(*(llm.complete(spec, [{"role": "user", "content": f"q{i}"}])
                                          for i in range(3)))
        finally:
            await llm.aclose()

    comps = asyncio.run(main())
    assert all(c.text and c.usage.batch_id == comps[0].usage.batch_id for c in comps)
    assert fake.stats()["batches"]["created"] == 1 and fake.stats()["requests"] == 0


def test_bedrock_output_records_are_read_as_openai_lines():
    claude = {"recordId": "k1", "modelInput": {}, "modelOutput": {
        "type": "message", "content": [{"type": "tool_use", "name": "json_tool_call", "input": {"score": 4}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 31, "output_tokens": 9}}}
    nova = {"recordId": "k2", "modelInput": {}, "modelOutput": {
        "output": {"message": {"role": "assistant", "content": [{"text": "fine"}]}}, "stopReason": "max_tokens",
        "usage": {"inputTokens": 12, "outputTokens": 64}}}
    refused = {"recordId": "k3", "modelInput": {}, "error": {"errorCode": 429, "errorMessage": "Too many tokens"}}
    rid, status, body, _ = read_line(claude)
    assert (rid, status) == ("k1", 200) and json.loads(body["choices"][0]["message"]["content"]) == {"score": 4}
    assert body["usage"] == {"prompt_tokens": 31, "completion_tokens": 9}
    rid, status, body, _ = read_line(nova)
    assert body["choices"][0] == {"index": 0, "message": {"role": "assistant", "content": "fine"},
                                  "finish_reason": "length"}
    rid, status, body, _ = read_line(refused)
    assert (rid, status) == ("k3", 429) and body["error"]["message"] == "Too many tokens"
    openai = {"custom_id": "k4", "response": {"status_code": 200, "body": {"choices": []}}, "error": None}
    assert read_line(openai) == ("k4", 200, {"choices": []}, None)
