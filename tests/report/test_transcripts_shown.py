"""Transcripts in the report (issue 31, point 4): each conversation readable, its roles named, each tool call folded
in a ``<details>`` with its arguments and result, hostile text escaped (no script from a transcript can run in the
self-contained file), and per cell why the conversations ended and how their tool calls went.

The first run folder holds records written here (the report reads records only): an agent cell whose conversations
called a tool, one of them an unknown tool and one to ``max_steps``, and a simulated-user cell whose user said it was
done. The second is a real run of conversations on the fake provider (tests.estimate.conversation_grid), priced as
the fake bills: its report's total is what the provider billed, the simulated user on a line of its own. The HTML
is parsed, not grepped: a text counts as shown only inside the element that shows it.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest

from bench.analysis import summarize
from bench.config.rubrics import load_rubric, snapshot_rubric
from bench.core.records import Candidate, Usage
from bench.core.spend import recorded_spend
from bench.core.store import RunStore
from bench.report import conversations
from bench.report.display import number
from bench.testing.grids import ROOT, grid, model
from bench.testing.records import candidate, judgment, scenario
from bench.testing.in_process import command, run_stages
from tests.estimate.conversation_grid import BILL, PRICE, TOOL_SCRIPT, conversation_grid

HOSTILE = "<script>window.__pwned = 1</script><img src=x onerror=alert(1)>"
VOID = {"br", "img", "hr", "meta", "link", "input", "wbr", "col", "area", "base", "source", "embed", "param", "track"}


def call(cid: str, name: str, arguments: str) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


def usage(cost: float) -> Usage:
    return Usage(prompt_tokens=30, completion_tokens=6, cost_usd=cost)


def agent(s, turns_taken: int, ended: str, calls: list[tuple[str, str, str, str]]) -> Candidate:
    """An agent's conversation: each call (id, name, arguments, outcome) answered by a tool message, then a reply."""
    transcript = [{"role": "system", "content": "You are a weather agent."},
                  {"role": "user", "content": f"Weather in {s.fields['city']}?"}]
    trajectory = []
    for step, (cid, name, arguments, outcome) in enumerate(calls):
        result = (f"Weather in {s.fields['city']}: sunny {HOSTILE}" if outcome == "ok" else
                  f"error: unknown tool '{name}'; available: get_weather")
        transcript += [{"role": "assistant", "content": None, "tool_calls": [call(cid, name, arguments)]},
                       {"role": "tool", "tool_call_id": cid, "name": name, "content": result}]
        trajectory.append({"turn": 1, "step": step, "id": cid, "name": name, "arguments": None,
                           "raw_arguments": arguments, "result": result, "outcome": outcome})
    if ended == "answered":
        transcript.append({"role": "assistant", "content": f"It is sunny in {s.fields['city']}."})
    turns = [{"turn": 1, "step": n, "by": "model", "usage": usage(0.001).model_dump()} for n in range(turns_taken)]
    said = [m["content"] for m in transcript if m["role"] == "assistant" and m["content"]]
    return candidate(s, model_id="agent", output=said[-1] if said else "", transcript=transcript,
                     trajectory=trajectory, turns=turns, ended=ended, usage=usage(0.001 * turns_taken))


def talk(s) -> Candidate:
    """A simulated user's conversation of two assistant turns, ended by the user."""
    transcript = [{"role": "user", "content": "Hi, my order is late."},
                  {"role": "assistant", "content": "Sorry to hear that. Which order?"},
                  {"role": "user", "content": f"Order {s.fields['city']}-42. {HOSTILE}", "simulated": True},
                  {"role": "assistant", "content": "It ships tomorrow."},
                  {"role": "user", "content": "Thanks! [DONE]", "simulated": True}]
    turns = [{"turn": 1, "step": 0, "by": "model", "usage": usage(0.002).model_dump()},
             {"turn": 1, "step": 0, "by": "simulator", "simulator": "sim", "usage": usage(0.0005).model_dump()},
             {"turn": 2, "step": 0, "by": "model", "usage": usage(0.002).model_dump()},
             {"turn": 2, "step": 0, "by": "simulator", "simulator": "sim", "usage": usage(0.0005).model_dump()}]
    return candidate(s, model_id="support", output="It ships tomorrow.", transcript=transcript, turns=turns,
                     ended="user_done", usage=usage(0.004), simulator_usage=usage(0.001))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("talks") / "runs" / "talks"
    rubric = load_rubric("tip-v1", ROOT)
    snapshot_rubric(rubric, run)
    cities = [scenario({"city": c}) for c in ("Paris", "Oslo", "Lima")]
    answers = [agent(cities[0], 2, "answered", [("c1", "get_weather", '{"city": "Paris"}', "ok")]),
               agent(cities[1], 2, "answered", [("c2", "get_weather", '{"city": "Oslo"}', "ok")]),
               agent(cities[2], 3, "max_steps", [("c3", "get_weather", '{"city": "Lima"}', "ok"),
                                                 ("c4", "get_wether", '{"city": "Lima"}', "unknown_tool"),
                                                 ("c5", "get_weather", '{"city": "Lima"}', "ok")]),
               *(talk(s) for s in cities)]
    spec = {"judge_id": "j", "rubric_id": rubric.id, "rubric_version": rubric.version, "rubric_hash": rubric.hash}
    grades = [judgment(c, **spec, scores={k.id: 4 for k in rubric.criteria}, usage=usage(0.0001)) for c in answers]
    RunStore(run).append([*cities, *answers, *grades])
    return run


class Tree(HTMLParser):
    """Every text of a page with the elements around it (tag and class), and every script's text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, str]] = []
        self.texts: list[tuple[str, tuple[tuple[str, str], ...]]] = []
        self.scripts: list[str] = []
        self.tags: list[tuple[str, dict]] = []
        self.rows: list[list[str]] = []  # every table row: its cells' texts

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th") and self.rows:
            self.rows[-1].append("")
        if tag not in VOID:
            self.stack.append((tag, dict(attrs).get("class") or ""))

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data):
        if self.stack and self.stack[-1][0] == "script":
            self.scripts.append(data)
        elif data.strip():
            self.texts.append((data, tuple(self.stack)))
            if self.rows and self.rows[-1] and any(t in ("td", "th") for t, _c in self.stack):
                self.rows[-1][-1] += data

    def around(self, needle: str) -> list[tuple[tuple[str, str], ...]]:
        """Return the elements around each text holding ``needle``."""
        return [stack for text, stack in self.texts if needle in text]


def parsed(html: str) -> Tree:
    tree = Tree()
    tree.feed(html)
    return tree


def inside(stack: tuple[tuple[str, str], ...], tag: str, cls: str) -> bool:
    return any(t == tag and (not cls or cls in c.split()) for t, c in stack)


def test_the_report_shows_each_transcript_with_roles_and_its_tool_calls_folded(run_dir, tmp_path):
    out = command(tmp_path, "report", str(run_dir), "--resamples", "20")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    page = parsed((tmp_path / "reports" / "talks" / "index.html").read_text())
    result = page.around("Weather in Lima: sunny")
    assert len(result) == 2 and all(inside(s, "details", "bench-call") for s in result), "results folded in calls"
    assert any(inside(s, "summary", "") for s in page.around('get_weather({"city": "Lima"})')), "the call's summary"
    assert any(inside(s, "details", "bench-call") for s in page.around("unknown_tool")), "its outcome, in its call"
    assert page.around("user (simulated)") and page.around("Thanks! [DONE]")
    assert any(inside(s, "details", "bench-system") for s in page.around("You are a weather agent."))
    reply = page.around("It ships tomorrow.")
    assert reply and not any(inside(s, "details", "bench-call") for s in reply), "a reply is never folded away"
    # hostile text is text: no script of the page holds it, no element was made of it
    assert HOSTILE in "".join(text for text, _ in page.texts)
    assert not [s for s in page.scripts if "__pwned" in s]
    assert not [attrs for tag, attrs in page.tags if "onerror" in attrs or attrs.get("src") == "x"]
    # per cell: how the conversations ended and how their tool calls went
    table = "".join(text for text, _ in page.texts)
    assert "answered 2, max_steps 1" in table and "ok 4, unknown_tool 1" in table and "user_done 3" in table


def test_the_listing_shows_one_transcript_per_cell_and_way_of_ending(run_dir):
    talks = conversations(run_dir, per_cell=1)
    assert talks.count == 6
    rows = {r["cell"]: r for r in talks.outcomes.iter_rows(named=True)}
    assert rows["agent/p@v1"]["tool_calls"] == 5 and rows["agent/p@v1"]["assistant_turns"] == 1.0
    assert rows["support/p@v1"]["assistant_turns"] == 2.0 and rows["support/p@v1"]["tool_calls"] == 0
    page = parsed(talks.html)
    shown = [text.split(" · ")[0] for text, stack in page.texts if stack and stack[-1][0] == "b"]
    endings = [text.rsplit("ended: ", 1)[-1] for text, stack in page.texts if stack and stack[-1][0] == "summary"
               and "ended: " in text]
    assert sorted(shown) == ["agent/p@v1", "agent/p@v1", "support/p@v1"]
    assert sorted(endings) == ["answered", "max_steps", "user_done"], "one per cell and way of ending"
    assert len(parsed(conversations(run_dir, per_cell=2).html).around("ended: answered")) == 2


@pytest.fixture(scope="module")
def swept(tmp_path_factory, fake_server) -> tuple[Path, dict]:
    """Sweep the conversation grid in-process with its report, every price the fake's bill; return (tmp dir, fake's
    stats)."""
    fake_server.reset()
    fake_server.configure(tool_calls=TOOL_SCRIPT, bill_per_mtok=BILL)
    tmp = tmp_path_factory.mktemp("swept")
    out = run_stages(tmp, conversation_grid(tmp / "conv.yaml", fake_server.url), report=True)
    stats = fake_server.stats()
    fake_server.reset()
    assert out.returncode == 0, out.log
    return tmp, stats


def test_the_reports_total_is_what_the_provider_billed_the_simulator_on_its_own_line(swept):
    tmp, stats = swept
    run = tmp / "runs" / "conv"
    spend = {r["part"]: r for r in summarize(run, resamples=20).spend.iter_rows(named=True)}
    billed = stats["billed"]["usd"]
    assert billed > 0 and spend["total"]["paid_usd"] == pytest.approx(billed, rel=1e-6)
    assert spend["total"]["paid_usd"] == pytest.approx(recorded_spend(run).usd, abs=1e-9), "the budget's sum"
    assert spend["user simulators"]["calls"] == stats["by_model"]["simmy"] == 4
    assert spend["total"]["calls"] == stats["requests"]
    page = parsed((tmp / "reports" / "conv" / "index.html").read_text())
    total = [r for r in page.rows if r and r[0] == "total" and len(r) == 4]
    assert total == [["total", str(stats["requests"]), "0", number(billed, 3, "$")]], total
    assert [r[:2] for r in page.rows if r and r[0] == "sim"] == [["sim", "4"]], "the simulator's line, by its id"
    # the real records' transcripts: the agent's tool results folded in their calls, the simulated user marked
    results = page.around("Weather in Paris: sunny")
    assert results and all(inside(s, "details", "bench-call") for s in results)
    assert page.around("user (simulated)") and page.around("max_turns 2"), "2 conversations ended at max_turns"


def test_a_resumed_conversation_counts_its_replayed_turns_once(tmp_path, fake):
    fake.configure(bill_per_mtok=BILL, replies=[{"match": "Make it shorter", "status": 500}])
    params = grid(tmp_path / "resume.yaml", fake.url, name="resume", topics=2,
                  prompts=[{"id": "chat", "version": "v1", "turns": ["Hi about {topic}.", "One tip.", "Make it shorter."]}],
                  models=[model("m1", fake.url, price=PRICE)],
                  limits={"max_concurrency": 4, "timeout_s": 10, "retries": 0})
    first = run_stages(tmp_path, params)
    assert first.returncode != 0 and fake.stats()["requests"] == 2 * 3  # the third turn failed, two were paid
    fake.configure(replies=[])
    assert run_stages(tmp_path, params).returncode == 0
    assert fake.stats()["requests"] == 2 * 3 + 2, "the resume asked only the failed turns (the rest: the cache)"
    run = tmp_path / "runs" / "resume"
    billed = fake.stats()["billed"]["usd"]
    assert recorded_spend(run).usd == pytest.approx(billed, rel=1e-6), "each paid turn counted once"
    total = {r["part"]: r for r in summarize(run, resamples=20).spend.iter_rows(named=True)}["total"]
    assert total["paid_usd"] == pytest.approx(billed, rel=1e-6) and total["calls"] == 2 * 3 + 2
