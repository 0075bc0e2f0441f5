"""The images of a dataset row: each ``scenarios.dataset.images`` column read, checked and hashed; what cannot be
sent is one ParamsError naming row, column and file. A scenario keeps a ref, never the bytes."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.config._errors import reason
from bench.core.errors import ParamsError
from bench.core.images import KINDS, FileRefused, file_ref, looks_like, read_regular, sniff, url_ref

Sink = Callable[[dict[str, Any], bytes], Any]  # (ref, bytes) of each image read: bench.core.images.store_image
_MISSING = object()


def row_images(columns: list[str], row: dict[str, Any], folder: Path, where: str, max_mb: float,
               sink: Sink | None = None) -> list[dict[str, Any]]:
    """Return the refs of a row's images, column by column (``where``: the row, for messages)."""
    refs = []
    for column in columns:
        value = row.get(column, _MISSING)
        if value is _MISSING:
            have = ", ".join(str(c) for c in row if isinstance(c, str))
            raise ParamsError(f"{where}: no column '{column}', which scenarios.dataset.images names (the row's "
                              f"columns: {have or 'none'}); fix scenarios.dataset.images or the file")
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if item is None or (isinstance(item, str) and not item.strip()):
                continue
            refs.append(_image(column, item, folder, f"{where}: column '{column}'", max_mb, sink))
    return refs


def _image(column: str, value: Any, folder: Path, where: str, max_mb: float, sink: Sink | None) -> dict[str, Any]:
    """Return the ref of one image value; refuse (ParamsError naming ``where``) what cannot be sent."""
    if isinstance(value, dict):  # Hugging Face's image struct: its bytes, else its path
        value = value.get("bytes") or value.get("path")
    if isinstance(value, str) and urlsplit(value.strip()).scheme in ("http", "https"):
        url = value.strip()
        if not urlsplit(url).netloc:
            raise ParamsError(f"{where}: {url!r} is not a usable URL (no host); fix the value")
        return url_ref(column, url)
    if isinstance(value, str) and value.startswith("data:"):
        data, origin = _decoded(value, where), None
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data, origin = bytes(value), None
    elif isinstance(value, str):
        data, origin = _read(Path(value).expanduser(), folder, where, max_mb), value
    else:
        raise ParamsError(f"{where}: expected an image path, an http(s) URL or image bytes, got "
                          f"{type(value).__name__}; fix the value")
    _check_size(len(data), origin or "the image", where, max_mb)
    mime = sniff(data)
    if mime is None:
        raise ParamsError(f"{where}: {origin or 'the value'} is not a {KINDS} image (it looks like "
                          f"{looks_like(data)}); convert it or fix the value")
    ref = file_ref(column, data, mime, origin)
    if sink is not None:
        sink(ref, data)
    return ref


def _read(path: Path, folder: Path, where: str, max_mb: float) -> bytes:
    """Return an image file's bytes (relative to the dataset's folder); refuse an unreadable or too large file,
    and anything but a regular file (a FIFO would hang the read, /dev/zero never end), before reading it."""
    path = path if path.is_absolute() else folder / path
    try:
        return read_regular(path, int(max_mb * 1e6))
    except FileRefused as exc:
        if exc.size is None:
            raise ParamsError(f"{where}: image file {path} {exc}; name an image file (relative to the dataset "
                              f"file)") from None
        _check_size(exc.size, str(path), where, max_mb)
        raise  # not reached: _check_size refuses any size over the limit
    except OSError as exc:
        raise ParamsError(f"{where}: cannot read image file {path} ({reason(exc)}); fix the path (relative to "
                          f"the dataset file) or the file") from None


def _check_size(size: int, what: str, where: str, max_mb: float) -> None:
    if size > max_mb * 1e6:
        raise ParamsError(f"{where}: image {what} is {_amount(size)}, more than scenarios.dataset.max_image_mb = "
                          f"{max_mb:g} ({_amount(int(max_mb * 1e6))}); shrink it, or raise max_image_mb if the "
                          f"models take it")


def _amount(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size} bytes"


def _decoded(value: str, where: str) -> bytes:
    """Return the bytes of a base64 ``data:`` URL; refuse any other form."""
    head, _, payload = value.partition(",")
    if not head.endswith(";base64"):
        raise ParamsError(f"{where}: a data: URL must be base64 (data:image/png;base64,…); fix the value")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ParamsError(f"{where}: the data: URL's base64 is invalid; fix the value") from None
