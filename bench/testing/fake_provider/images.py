"""The image parts of a chat request, as the fake provider checks and counts them: a malformed part is refused
with a 400, as OpenAI refuses it; each image's sha256 goes into the stats (``images``)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any
from urllib.parse import urlsplit

SIGNATURES = {"image/png": (b"\x89PNG\r\n\x1a\n",), "image/jpeg": (b"\xff\xd8\xff",),
              "image/gif": (b"GIF87a", b"GIF89a"), "image/webp": (b"RIFF",)}  # WebP: RIFF....WEBP
_DATA_URL = re.compile(r"data:(image/[a-z]+);base64,(.*)", re.S)


def image_urls(messages: Any) -> list[str]:
    """Return the URL of every image part of the messages, in order."""
    urls = []
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == "image_url":
                spec = part.get("image_url")
                urls.append(spec.get("url") if isinstance(spec, dict) else spec)
    return urls


def image_problem(messages: Any) -> str | None:
    """Return why the messages' content parts are malformed (a 400's message), or None when they are fine."""
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else []:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in ("text", "image_url"):
                return f"unsupported content part type {kind!r} (this server takes text and image_url)"
    for url in image_urls(messages):
        problem = _url_problem(url)
        if problem:
            return f"invalid image_url: {problem}"
    return None


def _url_problem(url: Any) -> str | None:
    if not isinstance(url, str):
        return "image_url.url must be a string"
    if url.startswith("data:"):
        return None if decoded(url) is not None else (
            "a data URL must be data:image/<png|jpeg|gif|webp>;base64,<base64 of an image of that type>")
    parts = urlsplit(url)
    return None if parts.scheme in ("http", "https") and parts.netloc else f"not an http(s) or data URL: {url[:80]!r}"


def decoded(url: str) -> bytes | None:
    """Return the image bytes of a well-formed base64 image data URL (their signature matching its type), or None."""
    found = _DATA_URL.fullmatch(url)
    if found is None or found.group(1) not in SIGNATURES:
        return None
    try:
        data = base64.b64decode(found.group(2), validate=True)
    except (binascii.Error, ValueError):
        return None
    ok = data.startswith(SIGNATURES[found.group(1)]) and (found.group(1) != "image/webp" or data[8:12] == b"WEBP")
    return data if ok else None


def image_digests(messages: Any) -> list[str]:
    """Return the sha256 of each data-URL image's bytes (an http(s) image: ``url:<the URL>``), in order."""
    out = []
    for url in image_urls(messages):
        data = decoded(url) if isinstance(url, str) else None
        out.append(hashlib.sha256(data).hexdigest() if data is not None else f"url:{url}")
    return out


def without_image_data(body: dict[str, Any]) -> dict[str, Any]:
    """Return ``body`` with each data URL shortened to ``data:<type>;<n> bytes;sha256=<hex>`` (for ``recent``)."""
    messages = body.get("messages")
    if not any(isinstance(u, str) and u.startswith("data:") for u in image_urls(messages)):
        return body
    return {**body, "messages": [_short(m) for m in messages]}


def _short(message: Any) -> Any:
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return message
    parts = []
    for part in content:
        url = (part.get("image_url") or {}).get("url") if isinstance(part, dict) and part.get("type") == "image_url" \
            and isinstance(part.get("image_url"), dict) else None
        if isinstance(url, str) and url.startswith("data:"):
            data = decoded(url) or b""
            head = url.split(",", 1)[0]
            part = {**part, "image_url": {**part["image_url"],
                                          "url": f"{head};{len(data)} bytes;sha256={hashlib.sha256(data).hexdigest()}"}}
        parts.append(part)
    return {**message, "content": parts}
