"""Images through the real code path on the fake provider: each one reaches the provider byte-identical, the
records hold only its hash, a resume asks nothing again and a changed image is new work; a judge whose rubric
says ``images: true`` receives the scenario's images in every mode, any other judge none of them."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
from pathlib import Path

import pytest
from PIL import Image

from bench.config.rubrics import load_rubric
from bench.core.errors import ProviderError
from bench.core.images import IMAGE_FOLDER
from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.models.client import LLM
from bench.models.limits import Limits
from bench.models.routing import ModelSpec
from bench.estimate import stage_work
from bench.run import open_run
from bench.stage_runs import make_llm, run_collect, run_judge
from bench.testing.grids import ROOT, grid, judge, model, prompt, rubric

URL_IMAGE = "https://example.org/chart.png"


def png(colour: str) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (12, 9), colour).save(buf, "PNG")
    return buf.getvalue()


def image_grid(tmp_path: Path, fake, judges: list[dict] | None = None) -> Path:
    """Write two images, a dataset of three rows (a file, a URL, no image) and a params file on the fake provider."""
    (tmp_path / "imgs").mkdir(exist_ok=True)
    (tmp_path / "imgs" / "red.png").write_bytes(png("red"))
    rows = [{"q": "Which colour?", "img": "imgs/red.png"}, {"q": "Read the chart.", "img": URL_IMAGE},
            {"q": "No picture here.", "img": None}]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return grid(tmp_path / "img.yaml", fake.url, name="img", prompts=[prompt("p", "{q}")],
                scenarios={"dataset": {"path": "data.jsonl", "fields": {"q": "q"}, "images": ["img"]}},
                judges=judges)


def shown_rubric(tmp_path: Path, source: Path, images: bool = True) -> Path:
    """Copy a rubric with ``images: true`` added to its front matter (and a marker naming the copy)."""
    text = source.read_text().replace("\nmode:", "\nimages: true\nmode:" if images else "\nmode:", 1)
    target = tmp_path / f"{source.stem}-seen.md"
    target.write_text(text.replace(f"id: {source.stem}", f"id: {source.stem}-seen", 1) + "\nMARKER-SEEN\n")
    return target


def run_dir(tmp_path: Path) -> Path:
    return tmp_path / "runs" / "img"


@pytest.fixture(autouse=True)
def runs_here(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))


def test_an_image_reaches_the_provider_byte_identical_and_records_hold_only_its_hash(tmp_path, fake):
    run = open_run(image_grid(tmp_path, fake))
    result = asyncio.run(run_collect(run, progress="none"))
    assert result.done == 3 and result.failed == 0
    red = png("red")
    sha = hashlib.sha256(red).hexdigest()
    assert fake.stats()["images"] == {sha: 1, f"url:{URL_IMAGE}": 1}  # the bytes the provider decoded
    assert (run.dir / IMAGE_FOLDER / f"{sha}.png").read_bytes() == red  # stored once, by content hash
    by_question = {c.messages[-1]["content"][0]["text"] if isinstance(c.messages[-1]["content"], list)
                   else c.messages[-1]["content"]: c for c in RunStore(run.dir).latest(Candidate).values()}
    assert by_question["Which colour?"].messages[-1]["content"][1] == {
        "type": "image_url", "image_url": {"url": f"{IMAGE_FOLDER}/{sha}.png"}}
    assert by_question["Read the chart."].messages[-1]["content"][1]["image_url"]["url"] == URL_IMAGE
    assert by_question["No picture here."].messages[-1]["content"] == "No picture here."  # as it always was
    for path in run.dir.rglob("*.jsonl"):  # no record, no scenario line holds an image's bytes
        assert "base64" not in path.read_text(), path


def test_a_resumed_run_asks_nothing_again_and_a_changed_image_is_new_work(tmp_path, fake):
    params = image_grid(tmp_path, fake)
    asyncio.run(run_collect(open_run(params), progress="none"))
    first = fake.stats()["requests"]
    asyncio.run(run_collect(open_run(params), progress="none"))
    assert fake.stats()["requests"] == first  # every reply from the cache: the request key holds the hash
    elsewhere = open_run(params, run_dir=tmp_path / "runs" / "other")  # the estimate builds the same requests
    (work,) = stage_work(elsewhere, make_llm(elsewhere))
    assert (work.requests, work.cached) == (3, 3)
    (tmp_path / "imgs" / "red.png").write_bytes(png("green"))  # same path, other bytes
    run = open_run(params)
    result = asyncio.run(run_collect(run, progress="none"))
    assert result.done == 1 and fake.stats()["requests"] == first + 1  # only the changed scenario is asked
    assert hashlib.sha256(png("green")).hexdigest() in fake.stats()["images"]
    assert len(list((run.dir / IMAGE_FOLDER).iterdir())) == 2


def test_a_judge_sees_the_images_in_every_mode_only_when_its_rubric_says_so(tmp_path, fake):
    url = fake.url
    seen = {mode: shown_rubric(tmp_path, ROOT / "rubrics" / name) for mode, name in
            (("rubric", "tip-v1.md"), ("checklist", "tip-checklist.md"), ("pairwise", "arena-pairwise.md"))}
    judges = [judge("plain", url), judge("seen", url, rubric=str(seen["rubric"])),
              judge("packed", url, rubric=str(seen["rubric"]), pack_size=3),
              judge("check", url, rubric=str(seen["checklist"])),
              judge("arena", url, rubric=str(seen["pairwise"]), baseline="m1/p@v1")]
    params = image_grid(tmp_path, fake, judges)
    text = params.read_text().replace("- id: m1", "- id: m0\n  model: openai/m0\n  api_base: " + url + "\n- id: m1")
    params.write_text(text)
    fake.configure(replies=[{"match": "Compare the two responses", "content": "[[A=B]]"}])
    run = open_run(params)
    asyncio.run(run_collect(run, progress="none"))
    fake.reset()
    fake.configure(replies=[{"match": "Compare the two responses", "content": "[[A=B]]"}])
    result = asyncio.run(run_judge(run, progress="none"))
    assert result.failed == 0
    sha = hashlib.sha256(png("red")).hexdigest()
    requests = fake.stats()["recent"]
    for body in requests:
        parts = body["messages"][-1]["content"]
        seen_by_judge = "MARKER-SEEN" in body["messages"][0]["content"]
        listed = parts if isinstance(parts, list) else []
        images = [p["image_url"]["url"] for p in listed if p.get("type") == "image_url"]
        if not seen_by_judge:
            assert images == [], body["messages"][0]["content"][:80]  # the plain judge: text only
            continue
        if isinstance(parts, str):  # a scenario without images: its judge request is the text as it always was
            assert "No picture here." in parts and "Which colour?" not in parts
            continue
        question = parts[0]["text"]
        if "Grade each of" in question:  # packed: every item's images, each named by its item's id
            labels = [p["text"] for p in parts[1:] if p["type"] == "text"]
            assert labels and all(label.startswith("Images of item i") for label in labels)
        elif "Which colour?" in question:
            assert images == [f"data:image/png;base64;{len(png('red'))} bytes;sha256={sha}"]
        elif "Read the chart." in question:
            assert images == [URL_IMAGE]
    checks = len(load_rubric(str(seen["checklist"]), ROOT).requirements)
    # two answers show the red image: graded once each (rubric), once each in a packed call, once per checklist
    # requirement each, and their pair in both orders; the plain judge never sends it
    assert fake.stats()["images"] == {sha: 2 + 2 + 2 * checks + 2, f"url:{URL_IMAGE}": 2 + 2 + 2 * checks + 2}
    for j in RunStore(run.dir).latest(Judgment).values():
        assert "base64" not in json.dumps(j.model_dump())


def test_a_stored_image_missing_from_the_run_folder_fails_the_call_before_it_is_sent(tmp_path, fake):
    llm = LLM(Limits(retries=0))
    llm.image_folder = tmp_path / IMAGE_FOLDER  # empty: the run's images were never stored
    sha = "0" * 64
    messages = [{"role": "user", "content": [{"type": "text", "text": "Which colour?"},
                                             {"type": "image_url", "image_url": {"url": f"images/{sha}.png"}}]}]

    async def ask() -> None:
        try:
            await llm.complete(ModelSpec("openai/fake", api_base=fake.url), messages)
        finally:
            await llm.aclose()

    with pytest.raises(ProviderError, match="is not in the run folder") as err:
        asyncio.run(ask())
    assert err.value.kind == "image" and fake.stats()["requests"] == 0
