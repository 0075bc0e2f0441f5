"""Secrets come only from the environment or a `.env` file; bench never writes them anywhere.
``redact`` is applied to whatever bench stores or shows."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from functools import cache
from urllib.parse import unquote, urlsplit

from dotenv import find_dotenv, load_dotenv


@cache
def load_env() -> str | None:
    """Load `.env` (searched upward from the cwd) once, without overriding; return its path or None."""
    path = find_dotenv(usecwd=True)
    if path:
        load_dotenv(path, override=False)
        _R.next_scan = 0.0  # its keys are secrets from now on
    return path or None


# -- redaction: whatever is stored or shown goes through `redact` first, echoed auth headers and
# scheme://user:password@host included ----------------------------------------------------------------

MARKER = "[redacted]"
MIN_SECRET_LEN = 8  # shorter values are not redacted: they would mangle ordinary text
KNOWN_KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "GEMINI_API_KEY",
                  "TOGETHERAI_API_KEY", "MISTRAL_API_KEY")  # .env.example's list
SECRET_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_SECRET_KEY", "_SECRET_ACCESS_KEY")
RESCAN_S = 1.0  # the environment is scanned again at most this often (registration rescans at once)

# _HEADER and _BEARER are templates: {known} becomes the alternation of known secret values, so a known
# value right after a header name is taken whole, even with characters the generic token class stops at.
_HEADER = (r"(?i:\b(?:proxy-)?authorization|\bx-api-key|\bx-goog-api-key)"  # a header echoed as text…
           r"(?P<sep>\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?)"  # …in any quoting: `X: v`, "X": "v", \"X\": \"v\", X=v
           r"(?!(?i:bearer|basic|token)[ \t]+\[redacted\]|\[redacted\])"
           r"(?:(?i:bearer|basic|token|digest)[ \t]+)?(?:{known}[^\s\"'\\,;\[\]<>]{{1,4096}})")
_BEARER = (r"(?P<scheme>\b(?i:bearer)[ \t]+)(?:{known}(?=[A-Za-z]*[0-9\-._~+/])"  # a token has a digit or
           r"[A-Za-z0-9\-._~+/]{{8,4096}}=*)")  # a symbol: "Bearer authentication" is prose, "Bearer sk-x1…" is not
_TRIGGERS = ("authorization", "bearer", "api-key")  # what a header echo contains (lowercased)
_USERINFO = r"://[^\s/?#\"'<>\\\[\]]{1,512}@"  # scheme://user:pass@host: up to the authority's last @
_URL_AT = re.compile(_USERINFO)  # its literal start makes it a fast test (records name their api_base URL)
# A credential as a URI's query parameter (libpq's ?password=, ?access_token=, Google's ?key=): the name ends in
# one of these words; its value runs to the next parameter. The name is kept, so a reader sees what was hidden.
_QUERY = (r"(?P<qname>[?&;](?i:[A-Za-z0-9_.\-]{0,40}?(?:password|passwd|pwd|token|key|secret|signature))=)"
          r"(?!\[redacted\])[^&#;\s\"'<>\\]+")
_QUERY_AT = re.compile(r"[?&;][A-Za-z0-9_.\-]{0,40}?(?i:password|passwd|pwd|token|key|secret|signature)=")


@dataclass
class _Redactor:
    names: set[str] = field(default_factory=lambda: set(KNOWN_KEY_VARS))  # variables whose values are secret
    extra: set[str] = field(default_factory=set)  # values registered directly (api_base credentials, keys sent)
    values: frozenset[str] | None = None  # the secret values the pattern was built from
    # the pattern, and how those values can appear in text (raw, JSON-escaped): one tuple, so that a thread never
    # reads the pattern of one scan with the literals of another
    built: tuple[re.Pattern[str], tuple[str, ...]] | None = None
    next_scan: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


_R = _Redactor()


def watch_env(name: str | None) -> None:
    """Treat the value of environment variable ``name`` as a secret (e.g. a model's ``api_key_env``)."""
    if name and name not in _R.names:
        with _R.lock:
            _R.names.add(name)
            _R.next_scan = 0.0


def add_secret(value: str | None) -> None:
    """Treat ``value`` as a secret from now on (values shorter than 8 characters are ignored)."""
    if value and len(value) >= MIN_SECRET_LEN and value not in _R.extra:
        with _R.lock:
            _R.extra.add(value)
            _R.next_scan = 0.0


def note_endpoint(api_base: str | None, api_key_env: str | None = None) -> None:
    """Register what a model's endpoint makes secret: its key variable and any credentials in ``api_base``."""
    watch_env(api_key_env)
    if api_base and "@" in api_base:
        try:
            parts = urlsplit(api_base.strip())
            user, password = parts.username, parts.password
        except ValueError:
            return  # a malformed URL: the userinfo rule of `redact` still hides it
        secret = password if password else user  # https://TOKEN@host: the user part is the secret
        if secret:
            add_secret(secret)
            add_secret(unquote(secret))


def refresh() -> None:
    """Scan the environment again at the next `redact` (it does so by itself at most once a second)."""
    _R.next_scan = 0.0


def _scan() -> frozenset[str]:
    names = _R.names
    found = {v for k, v in os.environ.items() if k in names or k.endswith(SECRET_SUFFIXES)}
    found |= _R.extra
    return frozenset(v for v in found if len(v) >= MIN_SECRET_LEN)


def _build(values: frozenset[str]) -> tuple[re.Pattern[str], tuple[str, ...]]:
    literals: set[str] = set()
    for v in values:
        literals.add(v)
        literals.add(json.dumps(v)[1:-1])  # as it appears inside a JSON string (a record line, a cache value)
        literals.add(json.dumps(v, ensure_ascii=False)[1:-1])
    alts = "|".join(re.escape(v) for v in sorted(literals, key=lambda s: (-len(s), s)))
    known = f"(?:{alts})|" if alts else ""
    parts = [f"(?P<value>{alts})"] if alts else []
    parts += ["(?P<header>" + _HEADER.format(known=known) + ")", _BEARER.format(known=known),
              f"(?P<userinfo>{_USERINFO})", _QUERY]
    return re.compile("|".join(parts)), tuple(sorted(literals, key=len))


def _current() -> tuple[re.Pattern[str], tuple[str, ...]]:
    """Return the pattern and literals of the secrets known now (the environment scanned at most once a second,
    and at once after ``add_secret`` or ``refresh``; the record writers and the cache's writer thread ask too)."""
    now = time.monotonic()
    if now >= _R.next_scan or _R.built is None:
        with _R.lock:
            if now >= _R.next_scan or _R.built is None:  # not rescanned by another thread meanwhile
                values = _scan()
                if values != _R.values or _R.built is None:
                    _R.built, _R.values = _build(values), values
                _R.next_scan = now + RESCAN_S  # only once the pattern holds what was scanned
    return _R.built  # type: ignore[return-value]


def _replace(m: re.Match[str]) -> str:
    if m.group("userinfo") is not None:
        return "://***@"
    if m.group("qname") is not None:
        return m.group("qname") + MARKER
    if m.group("header") is not None:
        text = m.group("header")
        return text[: m.start("sep") - m.start("header") + len(m.group("sep"))] + MARKER
    if m.group("scheme") is not None:
        return m.group("scheme") + MARKER
    return MARKER


def redact(text: str) -> str:
    """Return ``text`` with every known secret replaced by ``[redacted]``; JSON text stays valid JSON."""
    if not text or not may_hold_secret(text):
        return text
    return _current()[0].sub(_replace, text)


def may_hold_secret(text: str) -> bool:
    """Return whether ``redact`` may change ``text`` (cheap substring tests, never matching across lines)."""
    if _URL_AT.search(text) or ("=" in text and _QUERY_AT.search(text)):
        return True
    for value in _current()[1]:
        if value in text:
            return True
    lower = text.lower()
    for trigger in _TRIGGERS:
        if trigger in lower:
            return True
    return False
