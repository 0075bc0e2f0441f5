"""LiteLLM's price map from its own package, never from the internet (set before LiteLLM is imported, which could
block without internet); ``BENCH_ONLINE_PRICES=1`` opts out. Standard library only: ``bench/__init__`` runs it."""

from __future__ import annotations

import os
from collections.abc import MutableMapping

LOCAL_PRICES = "LITELLM_LOCAL_MODEL_COST_MAP"
OPT_OUT = "BENCH_ONLINE_PRICES"


def use_local_prices(environ: MutableMapping[str, str] = os.environ) -> None:
    """Set ``LITELLM_LOCAL_MODEL_COST_MAP`` when unset: "True", or "False" when opted out (BENCH_ONLINE_PRICES)."""
    online = environ.get(OPT_OUT, "").strip().lower() in ("1", "true", "yes", "on")
    environ.setdefault(LOCAL_PRICES, "False" if online else "True")
