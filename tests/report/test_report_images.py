"""Thumbnails of a run's images: the report embeds them downscaled (one self-contained file, an URL image named,
never fetched) and the review panel shows them beside the answer under review."""

from __future__ import annotations

import base64
import io
import json
import re

import pytest
from PIL import Image

from bench.review import ReviewPanel
from bench.testing.grids import grid, judge, prompt
from bench.testing.in_process import run_stages

URL_IMAGE = "https://example.org/chart.png"
IMG = re.compile(r"<img ([^>]*)>")


def big_png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (640, 400), "orange").save(buf, "PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def image_run(tmp_path_factory, fake_server):
    """Run a dataset with a file image, an URL image and a row without one, judged, with its report."""
    fake_server.reset()
    tmp = tmp_path_factory.mktemp("report-images")
    (tmp / "a&b.png").write_bytes(big_png())
    rows = [{"q": "Which colour?", "img": "a&b.png"}, {"q": "Read the chart.", "img": URL_IMAGE},
            {"q": "No picture.", "img": None}]
    (tmp / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    grid(tmp / "pics.yaml", fake_server.url, name="pics", prompts=[prompt("p", "{q}")],
         scenarios={"dataset": {"path": "data.jsonl", "fields": {"q": "q"}, "images": ["img"]}},
         judges=[judge("j", fake_server.url)])
    out = run_stages(tmp, tmp / "pics.yaml", report=True)
    assert out.returncode == 0, out.log
    return tmp


def sizes(html: str) -> list[tuple[str, tuple[int, int]]]:
    """Return (alt, pixel size) of each <img> (whatever order nbconvert writes its attributes in)."""
    out = []
    for attrs in IMG.findall(html):
        found = dict(re.findall(r'(\w+)="([^"]*)"', attrs))
        b64 = found["src"].removeprefix("data:image/jpeg;base64,")
        out.append((found.get("alt"), Image.open(io.BytesIO(base64.b64decode(b64))).size))
    return out


def test_the_report_embeds_each_image_as_a_small_thumbnail_and_names_an_url_image(image_run):
    text = (image_run / "reports" / "pics" / "index.html").read_text()
    assert "Images</h2>" in text and 'class="bench-thumbs"' in text
    assert sizes(text) == [("a&amp;b.png", (160, 100))]  # downscaled to the box, its name escaped
    assert URL_IMAGE in text and f'src="{URL_IMAGE}"' not in text  # named as text: opening the report fetches nothing
    assert base64.b64encode(big_png()).decode()[:200] not in text  # never the full image


def test_the_review_panel_shows_the_scenarios_images(image_run):
    panel = ReviewPanel(image_run / "runs" / "pics", reviewer="ann", filter="all")
    shown = {}
    for _ in panel.items:
        shown[panel.item.scenario.fields["q"]] = panel.item_html.value
        panel.move(1)
    assert sizes(shown["Which colour?"]) == [("a&amp;b.png", (320, 200))]
    assert URL_IMAGE in shown["Read the chart."] and "<img" not in shown["Read the chart."]
    assert "bench-thumbs" not in shown["No picture."]
