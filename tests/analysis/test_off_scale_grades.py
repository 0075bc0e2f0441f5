"""A judgment whose grade lies outside its rubric's scale (1e308 on a 1-5 scale: a hand-edited or damaged record)
is set aside with a warning wherever analysis reads grades (the run reader), never counted: `bench judges` on
such a run grew to 23 GB and was killed."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest

from bench.analysis.tables import load_run
from bench.testing.grids import grid, judge, model, prompt
from bench.testing.in_process import run_stages


@pytest.fixture(scope="module")
def damaged_run(tmp_path_factory, fake_server):
    tmp = tmp_path_factory.mktemp("offscale")
    fake_server.reset()
    url = fake_server.url
    params = grid(tmp / "o.yaml", url, name="o", topics=3, models=[model("m1", url)],
                  prompts=[prompt("p", "One tip about {topic}.")],
                  judges=[judge("j", url), judge("h", url, rubric="tip-hybrid")],  # h: a composite on 0-1
                  limits={"max_concurrency": 4, "timeout_s": 10, "retries": 0})
    out = run_stages(tmp, params)
    assert out.returncode == 0, out.log
    run_dir = out.run_dir
    path = run_dir / "judgments.jsonl"
    record = next(r for r in map(json.loads, path.read_text().splitlines()) if r["judge_id"] == "j")
    criterion = next(iter(record["scores"]))
    record["scores"][criterion], record["score"] = 1e308, 1e308  # a newer record of the same judgment
    with path.open("a") as fh:
        fh.write(json.dumps(record) + "\n")
    return run_dir, record["id"], criterion


def test_a_grade_outside_its_scale_is_set_aside_with_a_warning(damaged_run):
    run_dir, bad, criterion = damaged_run
    with pytest.warns(UserWarning, match=r"1 judgment\(s\) set aside: a grade outside its rubric's scale") as said:
        t = load_run(run_dir)
    text = str(said[0].message)
    assert str(run_dir) in text and bad in text and f"{criterion} = 1e+308 (scale 1–5)" in text
    assert bad not in t.judgments["id"].to_list() and bad not in t.scores["judgment"].to_list()
    assert t.scores.height > 0 and all(math.isfinite(v) and v <= 5 for v in t.scores["value"].to_list())
    assert t.judgments.filter(pl.col("judge") == "h").height == 3  # a hybrid's 0-1 composite is on its scale
