"""Hostile answers through the real path: HTML/JS, ANSI escapes, 1 MB of text, NUL bytes and invalid
UTF-8 from the provider are stored, judged (truncated for the judge, with the note recorded) and
reported safely."""

from __future__ import annotations


from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.testing.grids import generate, grid, judge, model, prompt
from bench.testing.in_process import run_stages

HOSTILE = {
    "html": "<script>alert(1)</script><img src=x onerror=alert(2)>",
    "ansi": "\x1b[31mred alert\x1b[0m \x1b]0;retitled\x07",
    "big": "tip " * 250_000,  # 1,000,000 characters
    "nul": "before\x00after",
    "badutf": "broken \udcff bytes",  # what a provider's invalid UTF-8 becomes once JSON-decoded
}


def test_hostile_answers_are_stored_judged_and_reported_safely(tmp_path, fake):
    grid(tmp_path / "h.yaml", fake.url, name="hostile", seed=None, models=[model("m", fake.url, name="fake-a")],
         prompts=[prompt(k, "A tip about {topic}.", system=f"MARKER-{k.upper()}") for k in HOSTILE],
         scenarios=generate(topic=["one"]), judges=[judge("grader", fake.url, name="judge")],
         limits={"max_concurrency": 4, "timeout_s": 20, "retries": 1})
    fake.configure(replies=[{"match": f"MARKER-{k.upper()}", "content": v} for k, v in HOSTILE.items()])
    out = run_stages(tmp_path, tmp_path / "h.yaml", report=True)  # the report rendered as a sweep ends
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    store = RunStore(tmp_path / "runs" / "hostile")
    outputs = {c.prompt_id: c.output for c in store.latest(Candidate).values()}
    assert {k: outputs[k] for k in ("html", "ansi", "big", "nul")} == {k: HOSTILE[k] for k in ("html", "ansi", "big", "nul")}
    assert outputs["badutf"] == "broken \\udcff bytes"  # kept visibly instead of breaking every later write
    judgments = list(store.latest(Judgment).values())
    assert len(judgments) == 5 and all(j.ok for j in judgments)
    big = next(j for j in judgments if j.candidate_ids[0] in {c.id for c in store.latest(Candidate).values()
                                                                if c.prompt_id == "big"})
    assert big.details["truncated_chars"] == 1_000_000 - 4000  # tip-v1's max_chars; the note is recorded
    report = (tmp_path / "reports" / "hostile" / "index.html").read_text(encoding="utf-8")
    assert "\x00" not in report and "\x1b" not in report and "<script>alert(1)" not in report
    assert "\\x1b[31mred alert" in report and "before\\x00after" in report and "more characters]" in report
    assert len(report) < 8_000_000  # the 1 MB answer is clipped in the report
