"""The embedded model holds a multi-turn conversation: a ``turns`` script answered turn by turn through its chat
template (llama.cpp's, with the system message folded into the first user turn), each request carrying the whole
history, every turn its own cached request."""

from __future__ import annotations

import pytest

from bench.models import local
from tests.collect.dialogues import candidates, collect, inline, use_runs

pytestmark = pytest.mark.local_model

TURNS = ["My name is Ada and I keep bees.", "Give me one tip for my hobby.", "What is my name?"]


def test_the_embedded_model_answers_a_scripted_conversation_with_its_history(tmp_path, monkeypatch):
    use_runs(monkeypatch, tmp_path / "runs")
    params = tmp_path / "chat.yaml"
    params.write_text(
        "name: chat\nseed: 1\n"
        "models: [{id: gemma, model: local/gemma-3-270m, params: {temperature: 0, max_tokens: 40, seed: 1}}]\n"
        "prompts: [{id: chat, version: v1, system: Answer in one short sentence., turns: %r}]\n"
        "scenarios: {inline: %r}\nlimits: {max_concurrency: 1, timeout_s: 120, retries: 1}\n"
        % (TURNS, inline({"topic": "bees"})["inline"]))
    try:
        first = candidates(collect(params))["chat/0"]
        again = candidates(collect(params))["chat/0"]
    finally:
        local.shutdown()
    assert first.ok and first.ended == "turns_done", first.error
    roles = [m["role"] for m in first.transcript]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    assert [m["content"] for m in first.transcript if m["role"] == "user"] == TURNS
    replies = [m["content"] for m in first.transcript if m["role"] == "assistant"]
    assert all(r.strip() for r in replies) and first.output == replies[-1]
    prompt_tokens = [t["usage"]["prompt_tokens"] for t in first.turns]
    # each request holds the history: the prompt grows by at least the earlier turn and reply
    assert len(prompt_tokens) == 3 and prompt_tokens[0] < prompt_tokens[1] < prompt_tokens[2], prompt_tokens
    assert first.usage.calls == 3 and first.usage.prompt_tokens == sum(prompt_tokens)
    assert again.id == first.id and again.transcript == first.transcript  # the second collect finds it done
