"""Images in records and requests: the run folder's image store, and the image parts of a chat message.
An image is stored once as ``images/<sha256>.<ext>``; only the body in flight carries its bytes."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import stat
from pathlib import Path
from typing import Any

from bench.core.errors import ProviderError
from bench.core.store import atomic_write

IMAGE_FOLDER = "images"  # <run folder>/images/<sha256>.<ext>
EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}
KINDS = "PNG, JPEG, GIF or WebP"  # what EXTENSIONS accepts, as messages say it
_MIMES = {ext: mime for mime, ext in EXTENSIONS.items()}
_STORED = re.compile(r"images/([0-9a-f]{64})\.(png|jpg|gif|webp)")


def sniff(data: bytes) -> str | None:
    """Return the mime type the bytes' signature says (``image/png``, …), or None for anything else."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


_OTHER_KINDS = ((b"%PDF-", "a PDF document"), (b"PK\x03\x04", "a ZIP archive"), (b"\x1f\x8b", "gzip data"),
                (b"\x7fELF", "an ELF executable"), (b"BM", "a BMP image"), (b"II*\x00", "a TIFF image"),
                (b"MM\x00*", "a TIFF image"))  # what a file named as an image often is instead
_NOT_REGULAR = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def looks_like(data: bytes) -> str:
    """Return what non-image bytes look like (``a PDF document``, ``text``, …): a refusal never shows the bytes."""
    if not data:
        return "an empty file"
    if data[4:8] == b"ftyp":
        return "an HEIC/AVIF image or a video"
    kind = next((name for magic, name in _OTHER_KINDS if data.startswith(magic)), None)
    if kind is None and data[:256].lstrip()[:1] == b"<":
        kind = "HTML, XML or SVG"
    return kind or ("text" if _is_text(data[:4096]) else "unrecognised binary data")


def _is_text(head: bytes) -> bool:
    """Whether ``head`` is printable UTF-8 (a character cut at its end allowed)."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:
            return False
        text = head[:exc.start].decode("utf-8")
    return all(ch.isprintable() or ch in "\t\r\n" for ch in text)


class FileRefused(Exception):
    """An image file refused before its bytes are used: ``why`` it is refused, ``size`` when over the limit."""

    def __init__(self, why: str, size: int | None = None) -> None:
        super().__init__(why)
        self.size = size


def read_regular(path: Path, limit: int) -> bytes:
    """Return the bytes of the regular file ``path``, reading at most ``limit`` + 1 of them.
    A FIFO, device, socket or folder, or a file over ``limit``, raises FileRefused; OSError when unreadable."""
    info = path.stat()
    _check_regular(info.st_mode)
    if info.st_size > limit:
        raise FileRefused("too large", size=info.st_size)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # never blocks, were it swapped for a FIFO since the stat
    try:
        _check_regular(os.fstat(fd).st_mode)
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise FileRefused("too large", size=len(data))
    return data


def _check_regular(mode: int) -> None:
    for test, kind in _NOT_REGULAR:
        if test(mode):
            raise FileRefused(f"is {kind}, not a regular file")


def file_ref(column: str, data: bytes, mime: str, origin: str | None = None) -> dict[str, Any]:
    """Return the ref of an image held in the run folder; ``origin`` is for messages, never part of an identity."""
    sha = hashlib.sha256(data).hexdigest()
    ref = {"column": column, "sha256": sha, "mime": mime, "file": f"{IMAGE_FOLDER}/{sha}.{EXTENSIONS[mime]}"}
    return {**ref, "origin": origin} if origin else ref


def url_ref(column: str, url: str) -> dict[str, Any]:
    """Return the ref of an image given by an http(s) URL (sent as that URL, never fetched)."""
    return {"column": column, "url": url}


def store_image(run_dir: Path, ref: dict[str, Any], data: bytes) -> Path:
    """Write an image's bytes to its stored path in ``run_dir`` once (atomically; kept if already there)."""
    path = Path(run_dir) / ref["file"]
    if not path.is_file():
        atomic_write(path, data, shared=True)
    return path


def missing_images(run_dir: Path, refs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the refs of stored images that ``run_dir`` does not hold yet (one per content)."""
    out: dict[str, dict[str, Any]] = {}
    for ref in refs:
        if ref.get("file") and ref["file"] not in out and not (Path(run_dir) / ref["file"]).is_file():
            out[ref["file"]] = ref
    return list(out.values())


def attach_images(messages: list[dict[str, Any]], refs: list[dict[str, Any]] | None,
                  label: str | None = None) -> list[dict[str, Any]]:
    """Return ``messages`` with the images of ``refs`` (after ``label``) appended to the last user message.
    Without refs the same list is returned, so requests without images keep their cache keys."""
    if not refs:
        return messages
    at = max((n for n, m in enumerate(messages) if m.get("role") == "user"), default=None)
    if at is None:
        raise ValueError("attach_images: the messages have no user message to carry the images")
    content = messages[at].get("content")
    parts = list(content) if isinstance(content, list) else [{"type": "text", "text": content or ""}]
    if label:
        parts.append({"type": "text", "text": label})
    parts += [{"type": "image_url", "image_url": {"url": ref.get("file") or ref["url"]}} for ref in refs]  # as stored
    return [*messages[:at], {**messages[at], "content": parts}, *messages[at + 1:]]


def content_text(content: Any) -> str:
    """Return a message content's text: the string itself, or the text parts of a list of parts joined."""
    if isinstance(content, list):
        return "\n".join(str(p.get("text") or "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "" if content is None else str(content)


def inline_images(messages: list[dict[str, Any]], folder: Path | None) -> list[dict[str, Any]]:
    """Return the messages as sent: each stored image's part with its file in ``folder`` as a ``data:`` URL.
    A missing or altered file (checked against its hash) raises ProviderError (kind ``image``)."""
    for message in messages:  # a plain loop: every request asks (a generator costs an allocation)
        if isinstance(message.get("content"), list):
            break
    else:
        return messages
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            message = {**message, "content": [_inlined(part, folder) for part in content]}
        out.append(message)
    return out


def _inlined(part: Any, folder: Path | None) -> Any:
    """Return one content part as sent: a stored image's part with its file as a data URL, any other as given."""
    url = part.get("image_url", {}).get("url") if isinstance(part, dict) and part.get("type") == "image_url" else None
    found = _STORED.fullmatch(url) if isinstance(url, str) else None
    if found is None:
        return part
    return {**part, "image_url": {**part["image_url"], "url": data_url(folder, found.group(1), found.group(2))}}


def data_url(folder: Path | None, sha: str, ext: str) -> str:
    """Return the stored image ``<sha>.<ext>`` of ``folder`` as a base64 ``data:`` URL, its hash checked."""
    path = None if folder is None else Path(folder) / f"{sha}.{ext}"
    try:
        if path is None:
            raise FileNotFoundError("no run folder to read it from")
        data = path.read_bytes()
    except OSError as exc:
        raise ProviderError(f"image {IMAGE_FOLDER}/{sha}.{ext} is not in the run folder ({exc.strerror or exc}); "
                            f"run the stage again: it stores the dataset's images before asking",
                            kind="image", attempts=0) from None  # nothing was sent: its record counts no call
    if hashlib.sha256(data).hexdigest() != sha:
        raise ProviderError(f"{path} does not hold the image its name says (its content changed); delete it and "
                            f"run the stage again: it stores the dataset's image anew", kind="image", attempts=0)
    return f"data:{_MIMES[ext]};base64,{base64.b64encode(data).decode('ascii')}"
