"""The one id rule for every id and name a researcher writes: 1–64 letters, digits, ``.``, ``_`` or ``-``,
starting with a letter or digit (safe in paths, URLs, MLflow and shells)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
ID_HELP = "must be 1–64 letters, digits, '.', '_' or '-', starting with a letter or digit"
_ID = re.compile(ID_PATTERN)


def is_id(text: str) -> bool:
    """Return True when the whole of ``text`` is a valid id (a trailing newline is not)."""
    return _ID.fullmatch(text) is not None


def check_id(text: str) -> str:
    """Return ``text`` if it is a valid id, else raise ValueError with `ID_HELP` (a pydantic validator)."""
    if not is_id(text):
        raise ValueError(ID_HELP)
    return text


SafeId = Annotated[str, AfterValidator(check_id)]
"""A string field holding an id."""
