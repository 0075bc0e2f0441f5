"""What a rubric's ``images: true`` and a run's images mean when one of the two is missing: a rubric that shows the
judge images on a run with none says so once (naming the rubric), and a judge stage whose judges are shown no
images never needs (nor refuses for) the run's image files."""

from __future__ import annotations

import asyncio
import io
import json
import shutil
import warnings
from pathlib import Path

import pytest
from PIL import Image

from bench.core.errors import ParamsError
from bench.core.images import IMAGE_FOLDER
from bench.core.records import Judgment
from bench.core.store import RunStore
from bench.run import open_run
from bench.stage_runs import run_collect, run_judge
from bench.testing.grids import grid, judge, model, prompt, rubric


def png(colour: str) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (4, 4), colour).save(buf, "PNG")
    return buf.getvalue()


def seen_rubric(tmp_path: Path) -> str:
    path = rubric(tmp_path / "seen.md")
    path.write_text(path.read_text().replace("mode: rubric", "mode: rubric\nimages: true", 1))
    return str(path)


def params_with(tmp_path: Path, url: str, judges: list[dict], image: str | None) -> Path:
    (tmp_path / "red.png").write_bytes(png("red"))
    rows = [{"q": "Which colour?", "img": image}, {"q": "And this one?", "img": None}]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return grid(tmp_path / "img.yaml", url, name="img", models=[model("m1", url)], prompts=[prompt("p", "{q}")],
                scenarios={"dataset": {"path": "data.jsonl", "fields": {"q": "q"}, "images": ["img"]}},
                judges=judges)


def test_a_rubric_showing_images_on_a_run_without_any_warns_once_naming_it(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    params = params_with(tmp_path, fake.url, [judge("j1", fake.url, rubric=seen_rubric(tmp_path)),
                                              judge("j2", fake.url, rubric=seen_rubric(tmp_path))], image=None)
    with pytest.warns(UserWarning) as seen:
        open_run(params)
    said = [str(w.message) for w in seen if "images: true" in str(w.message)]
    assert len(said) == 1, said
    assert "rubric seen@1" in said[0] and "j1, j2" in said[0] and "no scenario holds an image" in said[0]
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        open_run(params)
    assert not [w for w in again if "images: true" in str(w.message)], "said once per process"


def test_a_run_with_images_or_a_rubric_without_them_says_nothing(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    for judges, image in (([judge("j", fake.url, rubric=seen_rubric(tmp_path))], "red.png"),
                          ([judge("j", fake.url)], None)):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            open_run(params_with(tmp_path, fake.url, judges, image=image))
        assert not [w for w in seen if "images: true" in str(w.message)]


def test_a_judge_stage_not_showing_images_needs_no_image_files(tmp_path, fake, monkeypatch):
    """The run's images are gone and the dataset's image changed since the run was opened: the answers are
    collected, and a judge that is shown no images grades them all the same; one that is shown them is refused."""
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    params = params_with(tmp_path, fake.url, [judge("plain", fake.url), judge("eyes", fake.url,
                                                                              rubric=seen_rubric(tmp_path))],
                         image="red.png")
    run = open_run(params)
    asyncio.run(run_collect(run, progress="none"))
    shutil.rmtree(run.dir / IMAGE_FOLDER)
    (tmp_path / "red.png").write_bytes(png("blue"))
    asyncio.run(run_judge(run, judges="plain", progress="none"))
    judged = list(RunStore(run.dir).iter(Judgment))
    assert len(judged) == 2 and all(j.ok for j in judged), [j.error for j in judged]
    with pytest.raises(ParamsError, match="no longer in the dataset"):
        asyncio.run(run_judge(run, judges="eyes", progress="none"))
