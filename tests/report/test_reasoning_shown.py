"""A reasoning model's thinking in the report (issue 49, point 5): folded in a ``<details>`` above the answer it led
to, in the Examples table and in a conversation's last assistant message, as transcripts fold tool calls; escaped
like every text of the run; an answer without thinking shows none. The report is rendered from records written here
and its HTML parsed (tests.report.test_transcripts_shown)."""

from __future__ import annotations

from bench.analysis import examples, load_run
from bench.config.rubrics import load_rubric, snapshot_rubric
from bench.core.store import RunStore
from bench.report.display import table_html
from bench.testing.grids import ROOT
from bench.testing.in_process import command
from bench.testing.records import candidate, judgment, scenario
from tests.report.test_transcripts_shown import HOSTILE, agent, inside, parsed

THOUGHT = f"The user wants Paris weather; 12 C and rain means an umbrella. {HOSTILE}"


def test_the_report_folds_a_reasoning_models_thinking_beside_its_answer(tmp_path):
    run = tmp_path / "runs" / "think"
    rubric = load_rubric("tip-v1", ROOT)
    snapshot_rubric(rubric, run)
    s = [scenario({"city": c}) for c in ("Paris", "Oslo")]
    answers = [candidate(s[0], model_id="thinker", output="Take an umbrella.", reasoning=THOUGHT),
               candidate(s[1], model_id="plain", output="Wear a coat."),
               agent(s[1], 1, "answered", [("c1", "get_weather", '{"city": "Oslo"}', "ok")]).model_copy(
                   update={"reasoning": "Oslo is sunny: no umbrella needed."})]
    spec = {"judge_id": "j", "rubric_id": rubric.id, "rubric_version": rubric.version, "rubric_hash": rubric.hash}
    RunStore(run).append([*s, *answers, *(judgment(c, **spec, scores={k.id: 4 for k in rubric.criteria})
                                          for c in answers)])
    shown = examples(load_run(run))
    assert shown.filter(shown["cell"] == "thinker/p@v1")["reasoning"].to_list() == [THOUGHT]
    assert shown.filter(shown["cell"] == "plain/p@v1")["reasoning"].to_list() == [None]
    table = parsed(table_html(shown, fold={"reasoning": "answer"}))
    assert "reasoning" not in [t for t, stack in table.texts if stack[-1][0] == "th"], "folded, not a column"

    out = command(tmp_path, "report", str(run), "--resamples", "20")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    page = parsed((tmp_path / "reports" / "think" / "index.html").read_text())
    thought = page.around("The user wants Paris weather")
    assert thought and all(inside(st, "details", "bench-thinking") for st in thought), "folded"
    assert any(inside(st, "summary", "") for st in page.around(f"thinking ({len(THOUGHT):,} characters)"))
    row = next(r for r in page.rows if "Take an umbrella." in "".join(r))
    assert row[row.index(next(c for c in row if "Take an umbrella." in c))].startswith("thinking ("), \
        "the thinking, then the answer, in one cell"
    assert not any(r for r in page.rows if "Wear a coat." in "".join(r) and "thinking (" in "".join(r))
    agent_thought = page.around("Oslo is sunny: no umbrella needed.")
    assert any(inside(st, "div", "bench-talk") and inside(st, "details", "bench-thinking") for st in agent_thought), \
        "a conversation's thinking, folded in its transcript"
    assert HOSTILE in "".join(t for t, _ in page.texts) and not [x for x in page.scripts if "__pwned" in x]
    assert not [a for tag, a in page.tags if "onerror" in a]
