"""Lazy, quiet import of LiteLLM (it costs seconds and otherwise phones home for a price map)."""

from __future__ import annotations

import os
from functools import cache
from typing import Any


@cache
def litellm() -> Any:
    """Return the imported ``litellm`` module, configured to stay local and quiet."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    import litellm as _litellm

    _litellm.suppress_debug_info = True
    _litellm.telemetry = False
    _litellm.drop_params = False
    return _litellm
