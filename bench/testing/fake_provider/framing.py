"""How the fake provider's replies travel (the ``wire`` config): each framing an HTTP client must read alike."""

from __future__ import annotations

from aiohttp import web


def framed(resp: web.Response, wire: str) -> web.Response:
    """Return ``resp`` sent as ``wire`` says: "plain" (Content-Length, kept alive), "chunked" (Transfer-Encoding),
    "gzip" (compressed whatever Accept-Encoding asked) or "close" (Connection: close)."""
    if wire == "chunked":
        resp.enable_chunked_encoding()
    elif wire == "gzip":
        resp.enable_compression(web.ContentCoding.gzip)  # forced: a server that ignores "identity"
    elif wire == "close":
        resp.force_close()
    return resp
