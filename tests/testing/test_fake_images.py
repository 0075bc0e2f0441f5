"""The fake provider's image parts: well-formed ones answered and hashed in the stats, malformed ones refused with
a 400 as OpenAI refuses them, and ``recent`` kept small."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import urllib.error
import urllib.request

import pytest
from PIL import Image


def image(kind: str) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (5, 5), "blue").save(buf, kind)
    return buf.getvalue()


def data_url(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def chat(fake, *parts: dict) -> tuple[int, dict]:
    body = {"model": "vision", "messages": [{"role": "user", "content": [{"type": "text", "text": "look"}, *parts]}]}
    request = urllib.request.Request(f"{fake.url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def part(url: object) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


@pytest.mark.parametrize("kind, mime", [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("GIF", "image/gif"),
                                        ("WEBP", "image/webp")])
def test_a_well_formed_image_is_answered_and_its_bytes_hashed(fake, kind, mime):
    data = image(kind)
    status, _ = chat(fake, part(data_url(data, mime)), part("https://example.org/a.png"))
    assert status == 200
    stats = fake.stats()
    assert stats["images"] == {hashlib.sha256(data).hexdigest(): 1, "url:https://example.org/a.png": 1}
    shown = stats["recent"][-1]["messages"][0]["content"][1]["image_url"]["url"]
    assert shown == f"data:{mime};base64;{len(data)} bytes;sha256={hashlib.sha256(data).hexdigest()}"


@pytest.mark.parametrize("bad, said", [
    (part("data:image/png;base64,not base64!"), "a data URL must be"),
    (part(data_url(image("JPEG"), "image/png")), "a data URL must be"),  # JPEG bytes declared as PNG
    (part(data_url(b"plain text", "image/png")), "a data URL must be"),
    (part("data:image/svg+xml;base64," + base64.b64encode(b"<svg/>").decode()), "a data URL must be"),
    (part("file:///etc/passwd"), "not an http(s) or data URL"),
    (part("images/abc.png"), "not an http(s) or data URL"),  # a record's path, never resolved: a bug if sent
    (part(None), "must be a string"),
    ({"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}, "unsupported content part type")])
def test_a_malformed_image_part_is_refused_with_a_400(fake, bad, said):
    status, payload = chat(fake, bad)
    assert status == 400 and said in payload["error"]["message"]
    assert fake.stats()["images"] == {} and fake.stats()["statuses"] == {"400": 1}
