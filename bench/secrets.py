"""Secrets come only from the environment or a `.env` file; bench never writes them anywhere."""

from __future__ import annotations

from functools import cache


@cache
def load_env() -> str | None:
    """Load `.env` (searched upward from the working directory) without overriding the environment.

    Returns the path that was loaded, or None. Runs once per process.
    """
    from dotenv import find_dotenv, load_dotenv  # noqa: PLC0415

    path = find_dotenv(usecwd=True)
    if path:
        load_dotenv(path, override=False)
    return path or None
