"""A grid of conversations on the fake provider, for the estimate's and the report's tests: one model answering a
``turns`` script of 3 messages, an agent loop of ``max_steps`` 3 whose model always calls its tool (so it runs to
the bound), and a simulated user of ``max_turns`` 3 that never says it is done (so it runs to the bound too), over
two scenarios. Every model, the simulator and the judges are priced as the fake bills (``BILL``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.testing.grids import generate, grid, judge, model, prompt

PRICE = {"input_per_mtok": 2.0, "output_per_mtok": 8.0}
BILL = {"input": 2.0, "output": 8.0}  # the fake's bill_per_mtok: the same price, so billed USD = recorded USD
SIM_MAX_TOKENS = 20
TOOL_SCRIPT = [{"match": "Weather", "name": "get_weather", "arguments": {"city": "Paris"}, "until": 99}]
TOOLS = [{"name": "get_weather", "description": "Current weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
          "result": "Weather in {city}: {weather}"}]
CRIT = ("criteria:\n  - {id: helpful, description: helps, scale: [1, 5], anchors: {1: none, 2: barely, 3: partly, "
        "4: mostly, 5: fully}}\n")


def rubrics(folder: Path) -> tuple[str, str]:
    """Write a per_turn rubric and a whole-conversation one; return their paths."""
    out = []
    for rid, front in (("turns", "mode: rubric\nper_turn: true\n"), ("whole", "mode: rubric\n")):
        path = folder / f"{rid}.md"
        path.write_text(f"---\nid: {rid}\nversion: '1'\n{front}{CRIT}---\nGrade the conversation.\n")
        out.append(str(path))
    return out[0], out[1]


def simulator(url: str, price: dict[str, float] | None = None) -> dict[str, Any]:
    return {"id": "sim", "model": "openai/simmy", "api_base": url, "max_turns": 3, "price": price or PRICE,
            "instructions": "You are a customer asking about {topic}.", "params": {"max_tokens": SIM_MAX_TOKENS}}


def conversation_grid(path: Path, url: str, *, name: str = "conv", judged: bool = True,
                      sim_price: dict[str, float] | None = None, **limits: Any) -> Path:
    """Write the grid (with a per_turn judge and a whole-conversation judge unless ``judged`` is False; ``limits``
    added to its own)."""
    prompts = [{"id": "chat", "version": "v1", "system": "You give tips.",
                "turns": ["Hi, I am into {topic}.", "Give me one tip.", "Make it shorter."]},
               prompt("agent", "Weather for {topic}?", tools=["get_weather"], max_steps=3),
               prompt("support", "Hello, a question about {topic}.", system="You are a support agent.",
                      user_simulator=simulator(url, sim_price))]
    judges = None
    if judged:
        turns, whole = rubrics(path.parent)
        judges = [judge("per-turn", url, rubric=turns, price=PRICE, params={"max_tokens": 60}),
                  judge("whole", url, rubric=whole, price=PRICE, params={"max_tokens": 60})]
    return grid(path, url, name=name, prompts=prompts, tools=TOOLS, judges=judges,
                scenarios=generate(topic=["tea", "maps"], weather=["sunny"]),
                models=[model("m1", url, params={"max_tokens": 30}, price=PRICE)],
                limits={"max_concurrency": 6, "timeout_s": 10, "retries": 0, **limits})
