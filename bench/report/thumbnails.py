"""Thumbnails of a run's images as self-contained HTML (small JPEG ``data:`` URLs): the report's image gallery
and the review panel's. An image given by URL is named as text, never fetched."""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.config.scenarios import describe, read_scenarios
from bench.core.errors import StoreError
from bench.report.display import _display, visible

THUMB_PX = 160  # the report's box: small enough that 48 of them weigh a few hundred kB
GALLERY_MAX = 48  # scenarios shown in the report's gallery; the rest are counted
CSS = ("<style>.bench-thumbs{display:flex;flex-wrap:wrap;gap:8px;margin:4px 0 12px}"
       ".bench-thumbs figure{margin:0;max-width:%dpx;font-size:11px;color:#555;overflow-wrap:anywhere}"
       ".bench-thumbs img{display:block;border:1px solid #ddd;max-width:100%%}"
       ".bench-thumbs .bench-img-url{font-family:monospace}</style>")


def thumbnail_url(path: Path, px: int = THUMB_PX) -> str | None:
    """Return the image at ``path`` as a JPEG data URL fitting ``px`` × ``px``, or None if unreadable."""
    from PIL import Image, ImageOps  # noqa: PLC0415 (Pillow: 50 ms of imports, only where thumbnails are drawn)
    try:
        with Image.open(path) as img:
            img = ImageOps.exif_transpose(img)
            img.thumbnail((px, px))
            if img.mode != "RGB":  # JPEG has no alpha: transparency over white, palettes expanded
                canvas = Image.new("RGB", img.size, "white")
                rgba = img.convert("RGBA")
                canvas.paste(rgba, mask=rgba.getchannel("A"))
                img = canvas
            out = io.BytesIO()
            img.save(out, "JPEG", quality=80, optimize=True)
    except (OSError, ValueError, Image.DecompressionBombError):
        return None
    return "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode("ascii")


def thumbnails_html(run_dir: Path, refs: list[dict[str, Any]] | None, px: int = THUMB_PX,
                    caption: str | None = None) -> str:
    """Return one scenario's images as HTML thumbnails under an escaped ``caption`` (empty without images)."""
    if not refs:
        return ""
    cells = []
    for ref in refs:
        name = html.escape(visible(str(ref.get("origin") or ref.get("url") or ref.get("column") or ""), 200))
        if ref.get("url"):
            cells.append(f'<span class="bench-img-url" title="not fetched">{name}</span>')
            continue
        url = thumbnail_url(Path(run_dir) / ref["file"], px)
        cells.append(f'<img src="{url}" alt="{name}" title="{name}">' if url else
                     f"<span>{name}: not in the run folder or unreadable</span>")
    text = f"<figcaption>{html.escape(visible(caption, 300))}</figcaption>" if caption else ""
    return f"<figure>{''.join(cells)}{text}</figure>"


def thumbnail_strip(run_dir: Path, refs: list[dict[str, Any]] | None, px: int = THUMB_PX) -> str:
    """Return one scenario's thumbnails as a styled block of their own (the review panel's), or "" without images."""
    figure = thumbnails_html(run_dir, refs, px)
    return f'{CSS % px}<div class="bench-thumbs">{figure}</div>' if figure else ""


@dataclass
class Gallery:
    """The report's gallery of a run's images: its HTML and how many scenarios have images."""

    html: str
    count: int

    def show(self) -> None:
        """Display the gallery (in the notebook, and so in the report)."""
        _display({"text/html": self.html, "text/plain": f"<{self.count} scenarios with images>"})


def image_gallery(run_dir: str | Path, limit: int = GALLERY_MAX, px: int = THUMB_PX) -> Gallery:
    """Return the thumbnails of the first ``limit`` scenarios with images, captioned (count 0 without any)."""
    try:
        scenarios = [s for s in read_scenarios(Path(run_dir)) if s.images]
    except StoreError:
        return Gallery("", 0)
    figures = [thumbnails_html(Path(run_dir), s.images, px, f"{s.id}: {describe(s.fields, 120)}")
               for s in scenarios[:limit]]
    more = (f'<p class="bench-note">… and {len(scenarios) - limit} more scenarios with images</p>'
            if len(scenarios) > limit else "")
    body = f'{CSS % px}<div class="bench-thumbs">{"".join(figures)}</div>{more}' if figures else ""
    return Gallery(body, len(scenarios))

