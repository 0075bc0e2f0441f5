"""Two real sweeps on the fake provider that differ in one prompt version: runs/ca and runs/cb.

Both runs ask model ``m`` (quality 0.35) prompts p@v1 and q; run A has q@v1, run B q@v2, whose system message
makes the fake provider answer with a strong model's words (``model_quality`` 0.9): the judges grade B's answers
of that one cell higher, and nothing else. p@v1 is asked the same in both runs (its answers and grades are the
same). Run A covers topics t0..t19 and run B t1..t20, so each run has answers the other lacks. Judges: a
rubric judge (two criteria) and a pairwise judge with baseline m/p@v1.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.testing.fake_provider.quality import model_tag
from bench.testing.grids import generate, grid, judge, model, prompt, rubric
from bench.testing.in_process import run_stages

CHANGED_A, CHANGED_B, SAME = "m/q@v1", "m/q@v2", "m/p@v1"
STRONG_ANSWER = f"fake answer {model_tag('strong')}00000"


def _params(tmp: Path, url: str, name: str, q_version: str, topics: range) -> Path:
    q = (prompt("q", "Write a tip about {topic}.", version="v2", system="MARKER-Q-V2") if q_version == "v2"
         else prompt("q", "Write a tip about {topic}."))
    return grid(tmp / f"{name}.yaml", url, name=name, seed=1, models=[model("m", url, name="fake-m")],
                prompts=[prompt("p", "One tip about {topic}."), q],
                scenarios=generate(topic=[f"t{i}" for i in topics]),
                judges=[judge("grader", url, rubric="rate.md", name="judge"),
                        judge("arena", url, rubric="arena-pairwise", name="judge", baseline=SAME)],
                limits={"max_concurrency": 8, "timeout_s": 10, "retries": 2})


@pytest.fixture(scope="session")
def two_runs(tmp_path_factory, fake_server) -> tuple[Path, Path, Path]:
    """Sweep run A (ca) and run B (cb); return (tmp folder, run A's folder, run B's folder)."""
    fake_server.reset()
    tmp = tmp_path_factory.mktemp("compare")
    rubric(tmp / "rate.md", "quality", "clarity")
    url = fake_server.url
    fake_server.configure(model_quality={"fake-m": 0.35, "strong": 0.9},
                          replies=[{"match": "MARKER-Q-V2", "content": STRONG_ANSWER}])
    try:
        for name, version, topics in (("ca", "v1", range(0, 20)), ("cb", "v2", range(1, 21))):
            out = run_stages(tmp, _params(tmp, url, name, version, topics))
            assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    finally:
        fake_server.reset()
    return tmp, tmp / "runs" / "ca", tmp / "runs" / "cb"
