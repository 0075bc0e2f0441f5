"""Lazy, quiet import of LiteLLM (it costs seconds; bench/_prices.py keeps it from phoning home for a price map)."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from bench._prices import use_local_prices


@cache
def litellm() -> Any:
    """Return the imported ``litellm`` module, configured to stay local and quiet."""
    use_local_prices()
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    import litellm as _litellm  # noqa: PLC0415 (seconds to import: only when a model needs LiteLLM)

    _litellm.suppress_debug_info = True
    _litellm.telemetry = False
    _litellm.drop_params = False
    return _litellm
