"""Every HTTP call bench makes outside the LLM seam is one ``get``: it refuses redirects and reads proxies.
A followed redirect would carry the Authorization header elsewhere, so it is returned as a reply."""

from __future__ import annotations

import base64
import ipaddress
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import unquote, urlsplit


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # urllib then raises the 3xx as an HTTPError: returned by ``get``, not followed


def basic_credentials(url: str) -> tuple[str, str | None]:
    """Return ``url`` without its ``user:password@`` and their Basic token (None without them): sent as HTTP wants."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
    return parts._replace(netloc=host).geturl(), token


def loopback(host: str | None) -> bool:
    """Return whether ``host`` names this machine's loopback (``localhost``, 127.0.0.0/8, ::1)."""
    if not host:
        return False
    if host.lower() == "localhost" or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def get(url: str, *, timeout_s: float, headers: dict[str, str] | None = None,
        limit: int = 1_000_000) -> tuple[int, Any, bytes]:
    """GET ``url``; return (status, headers, at most ``limit`` bytes of body) for any HTTP reply, a redirect's too.
    Raises an OSError (``URLError``) when no HTTP reply comes, ValueError for a bad URL."""
    bare, token = basic_credentials(url)
    sent = dict(headers or {})
    if token is not None:
        sent.setdefault("Authorization", f"Basic {token}")
    proxies = {} if loopback(urlsplit(bare).hostname) else urllib.request.getproxies()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler(proxies), _NoRedirect)
    try:
        with opener.open(urllib.request.Request(bare, headers=sent), timeout=timeout_s) as resp:
            return resp.status, resp.headers, resp.read(limit)
    except urllib.error.HTTPError as exc:  # a status other than 2xx: still a reply
        with exc:
            return exc.code, exc.headers, exc.read(limit)
