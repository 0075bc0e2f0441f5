"""A dataset's image columns: read, checked and hashed into refs (never bytes); what is refused names its row,
column and file; a dataset without images keeps every id it had before images existed."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from pathlib import Path

import polars as pl
import pytest
from PIL import Image

from bench.collect import WorkItem, request_messages
from bench.config.params import Sweep
from bench.config.readers import load_dataset
from bench.config.sources import DatasetSource
from bench.config.templates import fill_prompt
from bench.core.errors import ParamsError
from bench.core.records import Scenario, content_hash

# What bench gave before images existed (computed with the previous commit's code): pinned, so that a dataset
# without images can never silently change its scenario or candidate ids.
OLD_SCENARIO_ID = "se87b8aef6d3eab349cbd"
OLD_CANDIDATE_ID = "c4edacc4db9e6f0f926d0"


def png(colour: str = "red", size: tuple[int, int] = (8, 6)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, "PNG")
    return buf.getvalue()


def jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def source(path: Path, **extra) -> DatasetSource:
    return DatasetSource(path=path.name, fields={"q": "q"}, **extra)


def sweep(dataset: dict) -> Sweep:
    return Sweep.model_validate({"name": "ids", "models": [{"id": "m1", "model": "openai/fake",
                                                            "api_base": "http://127.0.0.1:9/v1"}],
                                 "prompts": [{"id": "p", "version": "v1", "user": "{q}"}],
                                 "scenarios": {"dataset": dataset}})


def test_each_image_becomes_a_ref_with_its_content_hash_never_its_bytes(tmp_path):
    red, blue = png("red"), png("blue")
    (tmp_path / "imgs").mkdir()
    (tmp_path / "imgs" / "red.png").write_bytes(red)
    data_url = "data:image/png;base64," + base64.b64encode(blue).decode()
    jsonl(tmp_path / "d.jsonl", [{"q": "a", "img": "imgs/red.png"}, {"q": "b", "img": "https://example.org/x.png"},
                                 {"q": "c", "img": data_url}, {"q": "d", "img": ["imgs/red.png", data_url]},
                                 {"q": "e", "img": ""}])
    a, b, c, d, e = load_dataset(source(tmp_path / "d.jsonl", images=["img"]), [tmp_path])
    sha = hashlib.sha256(red).hexdigest()
    assert a.images == [{"column": "img", "sha256": sha, "mime": "image/png", "file": f"images/{sha}.png",
                         "origin": "imgs/red.png"}]
    assert b.images == [{"column": "img", "url": "https://example.org/x.png"}]
    assert c.images[0]["sha256"] == hashlib.sha256(blue).hexdigest() and "origin" not in c.images[0]
    assert [r["sha256"] for r in d.images] == [sha, hashlib.sha256(blue).hexdigest()]
    assert e.images is None  # an empty cell: no image, the id of a scenario without one
    assert e.id == Scenario(fields={"q": "e"}).id
    assert all(red.hex()[:40] not in json.dumps(s.model_dump()) for s in (a, b, c, d))


def test_parquet_bytes_and_hugging_face_image_structs_are_read(tmp_path):
    red = png("red")
    frame = pl.DataFrame({"q": ["a"], "raw": [red], "hf": [{"bytes": red, "path": "red.png"}]})
    frame.write_parquet(tmp_path / "d.parquet")
    (scenario,) = load_dataset(source(tmp_path / "d.parquet", images=["raw", "hf"]), [tmp_path])
    assert [(r["column"], r["sha256"]) for r in scenario.images] == [("raw", hashlib.sha256(red).hexdigest()),
                                                                      ("hf", hashlib.sha256(red).hexdigest())]


def test_the_image_is_part_of_the_scenario_identity_and_where_it_lies_is_not(tmp_path):
    (tmp_path / "a.png").write_bytes(png("red"))
    (tmp_path / "b.png").write_bytes(png("red"))
    (tmp_path / "c.png").write_bytes(png("green"))
    jsonl(tmp_path / "d.jsonl", [{"q": "same", "img": "a.png"}, {"q": "same", "img": "b.png"},
                                 {"q": "same", "img": "c.png"}])
    scenarios = load_dataset(source(tmp_path / "d.jsonl", images=["img"]), [tmp_path])
    assert len(scenarios) == 2  # a.png and b.png hold the same bytes: one scenario
    plain = Scenario(fields={"q": "same"})
    assert len({s.id for s in scenarios} | {plain.id}) == 3  # with an image, with another, without any
    sw = sweep({"path": "d.jsonl", "fields": {"q": "q"}, "images": ["img"]})
    ids = {WorkItem(sw.cells()[0], s, 0).candidate_id for s in [*scenarios, plain]}
    assert len(ids) == 3  # so is every candidate asked about them (and their judgments)


@pytest.mark.parametrize("with_images", [False, True])
def test_a_dataset_without_images_keeps_its_ids_and_its_requests(tmp_path, with_images):
    jsonl(tmp_path / "d.jsonl", [{"q": "What colour is it?", "answer": "red", "img": None}])
    extra = {"images": ["img"]} if with_images else {}  # an image column left empty: the same as none at all
    (scenario,) = load_dataset(source(tmp_path / "d.jsonl", reference={"answer": "answer"}, **extra), [tmp_path])
    assert scenario.id == OLD_SCENARIO_ID == "s" + content_hash({"fields": scenario.fields,
                                                                  "reference": scenario.reference})
    sw = sweep({"path": "d.jsonl", "fields": {"q": "q"}})
    item = WorkItem(sw.cells()[0], scenario, 0)
    assert item.candidate_id == OLD_CANDIDATE_ID
    assert request_messages(item) == fill_prompt(sw.prompts[0], scenario)  # the same request, the same cache key
    assert "images" not in scenario.model_dump(exclude_none=True)


def refusal(tmp_path: Path, value, **extra) -> str:
    jsonl(tmp_path / "d.jsonl", [{"q": "fine", "img": None}, {"q": "bad", "img": value}])
    with pytest.raises(ParamsError) as err:
        load_dataset(source(tmp_path / "d.jsonl", images=["img"], **extra), [tmp_path])
    return str(err.value)


def test_an_unreadable_image_is_refused_naming_the_row_the_column_and_the_file(tmp_path):
    text = refusal(tmp_path, "imgs/missing.png")
    assert "d.jsonl:2" in text and "column 'img'" in text and "missing.png" in text and "cannot read" in text


def test_an_oversized_image_is_refused_naming_the_limit(tmp_path):
    (tmp_path / "big.png").write_bytes(png("red", (400, 400)) + b"\0" * 200_000)
    text = refusal(tmp_path, "big.png", max_image_mb=0.1)
    assert "d.jsonl:2" in text and "column 'img'" in text and "big.png" in text and "max_image_mb = 0.1" in text


@pytest.mark.parametrize("content", [b"just some text\n", b"%PDF-1.7\n", b""])
def test_a_file_that_is_no_image_is_refused(tmp_path, content):
    (tmp_path / "notes.png").write_bytes(content)
    text = refusal(tmp_path, "notes.png")
    assert "d.jsonl:2" in text and "column 'img'" in text and "notes.png" in text
    assert "is not a PNG, JPEG, GIF or WebP image" in text


@pytest.mark.parametrize("value, said", [("data:image/png;base64,@@@", "base64 is invalid"),
                                         ("data:text/plain,hello", "must be base64"),
                                         (12, "expected an image path")])
def test_a_malformed_value_is_refused(tmp_path, value, said):
    text = refusal(tmp_path, value)
    assert "d.jsonl:2" in text and said in text


def test_a_missing_image_column_is_refused(tmp_path):
    jsonl(tmp_path / "d.jsonl", [{"q": "a"}])
    with pytest.raises(ParamsError, match=r"d\.jsonl:1: no column 'photo', which scenarios\.dataset\.images names"):
        load_dataset(source(tmp_path / "d.jsonl", images=["photo"]), [tmp_path])
