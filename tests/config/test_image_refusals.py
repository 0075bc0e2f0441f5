"""Refused before any request: a model (or a judge shown the images) that reads no images, asked by its provider
or by the entry's own ``images:``; and an unreadable, oversized or non-image file, named by its row."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from PIL import Image

from bench.core.errors import ParamsError
from bench.run import open_run
from bench.testing.grids import grid, judge, model, prompt, rubric
from bench.testing.in_process import command, run_stages


def png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (4, 4), "red").save(buf, "PNG")
    return buf.getvalue()


def image_params(tmp_path: Path, models: list[dict], judges: list[dict] | None = None, image: str = "red.png",
                 **dataset) -> Path:
    (tmp_path / "red.png").write_bytes(png())
    rows = [{"q": "Which colour?", "img": None}, {"q": "And this one?", "img": image}]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return grid(tmp_path / "img.yaml", "unused", name="img", models=models, prompts=[prompt("p", "{q}")],
                scenarios={"dataset": {"path": "data.jsonl", "fields": {"q": "q"}, "images": ["img"], **dataset}},
                judges=judges)


def seen_rubric(tmp_path: Path) -> str:
    path = rubric(tmp_path / "seen.md")
    path.write_text(path.read_text().replace("mode: rubric", "mode: rubric\nimages: true", 1))
    return str(path)


def test_bench_validate_refuses_the_embedded_model_on_images(tmp_path):
    params = image_params(tmp_path, [{"id": "tiny", "model": "local/gemma-3-270m"}])
    out = command(tmp_path, "validate", str(params))
    assert out.returncode == 2, out.stdout + out.stderr
    assert "model tiny (local/gemma-3-270m) reads no images: the embedded model is text-only" in out.stderr
    assert "scenarios.dataset.images: img" in out.stderr


def test_bench_sweep_refuses_a_text_only_litellm_model_before_any_request(tmp_path, fake):
    # LiteLLM's model map says gpt-3.5-turbo reads no images: refused, though its endpoint would answer
    params = image_params(tmp_path, [model("m1", fake.url, name="gpt-3.5-turbo", transport="litellm"),
                                     model("m2", fake.url)])
    out = run_stages(tmp_path, params)
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    assert "model m1 (openai/gpt-3.5-turbo) reads no images: LiteLLM's model map does not say it reads images" \
           in out.stderr
    assert "m2" not in out.stderr.split("reads no images", 1)[1]  # the fake server at an api_base takes them
    assert fake.stats()["requests"] == 0


def test_a_dry_run_is_refused_as_the_real_run_would_be(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    params = image_params(tmp_path, [{"id": "tiny", "model": "local/gemma-3-270m"},
                                     {"id": "big", "model": "openai/gpt-4o-mini"}])
    with pytest.raises(ParamsError, match=r"model tiny \(local/gemma-3-270m\) reads no images") as err:
        open_run(params, dry_run=True)  # dry/tiny stands in for the embedded model, which reads none
    assert "model big" not in str(err.value)
    assert [c.key for c in open_run(params, dry_run=True, cells="big/p@v1").cells] == ["big/p@v1"]


def test_an_entry_says_what_its_provider_cannot_know(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    text_only = image_params(tmp_path, [model("m1", fake.url, images=False)])
    with pytest.raises(ParamsError, match=r"model m1 \(openai/m1\) is set to read no images \(images: false\)"):
        open_run(text_only)
    vision = image_params(tmp_path, [model("m1", fake.url, name="gpt-3.5-turbo", transport="litellm", images=True)])
    assert open_run(vision).scenarios[1].images  # its own `images: true` wins over LiteLLM's map
    assert open_run(vision, cells="m1/p@v1") is not None
    left_out = image_params(tmp_path, [model("m1", fake.url, images=False), model("m2", fake.url)])
    assert [c.key for c in open_run(left_out, cells="m2/p@v1").cells] == ["m2/p@v1"]  # not in the chosen cells


def test_a_judge_shown_the_images_must_read_them(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    url = fake.url
    shown = image_params(tmp_path, [model("m1", url)], [judge("j", url, rubric=seen_rubric(tmp_path), images=False)])
    with pytest.raises(ParamsError, match=r"judge j \(openai/j\) is set to read no images .* its rubric seen@1 shows "
                                          r"the judge the scenarios' images \(images: true\)"):
        open_run(shown)
    plain = image_params(tmp_path, [model("m1", url)], [judge("j", url, images=False)])
    assert open_run(plain).sweep.judges[0].images is False  # a judge not shown the images needs not read them


def test_a_dataset_without_images_is_never_refused_for_a_text_only_model(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    params = image_params(tmp_path, [{"id": "tiny", "model": "local/gemma-3-270m"}], image="")
    assert all(s.images is None for s in open_run(params).scenarios)


@pytest.mark.parametrize("image, dataset, said", [
    ("gone.png", {}, "cannot read image file"),
    ("red.png", {"max_image_mb": 0.00001}, "more than scenarios.dataset.max_image_mb = 1e-05"),
    ("data.jsonl", {}, "is not a PNG, JPEG, GIF or WebP image")])
def test_bench_sweep_refuses_a_bad_image_file_before_any_request_naming_its_row(tmp_path, fake, image, dataset, said):
    params = image_params(tmp_path, [model("m1", fake.url)], image=image, **dataset)
    out = run_stages(tmp_path, params)
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    assert "data.jsonl:2: column 'img'" in out.stderr and image in out.stderr and said in out.stderr
    assert fake.stats()["requests"] == 0
