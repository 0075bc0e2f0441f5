"""`bench estimate` of a dataset with images: each image part counts ``IMAGE_TOKENS`` input tokens (a bound above
what providers bill per image, never the zero it used to be), and the notes say so, naming the stage."""

from __future__ import annotations

import io
import json
from pathlib import Path

from PIL import Image

from bench.estimate import estimate, estimate_table
from bench.models.tokens import IMAGE_TOKENS
from bench.run import open_run
from bench.testing.grids import grid, model, prompt

PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}


def png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), "blue").save(buf, "PNG")
    return buf.getvalue()


def params(tmp_path: Path, url: str, with_images: bool) -> Path:
    (tmp_path / "blue.png").write_bytes(png())
    rows = [{"q": "Which colour?", "img": "blue.png"}, {"q": "Read the chart.", "img": "https://example.org/c.png"},
            {"q": "No picture here.", "img": None}]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    dataset = {"path": "data.jsonl", "fields": {"q": "q"}, **({"images": ["img"]} if with_images else {})}
    name = "img" if with_images else "txt"
    return grid(tmp_path / f"{name}.yaml", url, name=name, prompts=[prompt("p", "{q}")], scenarios={"dataset": dataset},
                models=[model("m1", url, price=PRICE)])


def test_each_image_counts_its_bound_and_the_notes_say_so(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    text = estimate(open_run(params(tmp_path, fake.url, with_images=False))).stages[0]
    run = open_run(params(tmp_path, fake.url, with_images=True))
    est = estimate(run)
    (stage,) = est.stages
    assert stage.images == 2 and text.images == 0
    assert stage.input_tokens == text.input_tokens + 2 * IMAGE_TOKENS  # the file and the URL, each at the bound
    shown = estimate_table(est)
    assert f"{IMAGE_TOKENS:,} tokens" in shown and "images:" in shown
    assert "images:" not in estimate_table(estimate(open_run(params(tmp_path, fake.url, with_images=False))))
    assert fake.stats()["requests"] == 0
