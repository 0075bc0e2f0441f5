"""LiteLLM's price map from its own package, never from the internet (set before LiteLLM is imported).

Importing LiteLLM downloads its price map unless ``LITELLM_LOCAL_MODEL_COST_MAP=True``, which can block without
internet; ``import bench`` calls :func:`use_local_prices` first, so bench and every process it starts use the bundled
map. ``BENCH_ONLINE_PRICES=1`` opts out; an explicit ``LITELLM_LOCAL_MODEL_COST_MAP`` wins. Standard library only:
``bench/__init__`` runs it, below every layer.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

LOCAL_PRICES = "LITELLM_LOCAL_MODEL_COST_MAP"
OPT_OUT = "BENCH_ONLINE_PRICES"


def use_local_prices(environ: MutableMapping[str, str] = os.environ) -> None:
    """Make LiteLLM use its bundled price map in this process and its children, unless BENCH_ONLINE_PRICES=1.

    Sets ``LITELLM_LOCAL_MODEL_COST_MAP`` only when it is unset ("True", or "False" when opted
    out, so that later defaults elsewhere cannot undo the opt-out). Takes effect for a LiteLLM
    imported afterwards.
    """
    online = environ.get(OPT_OUT, "").strip().lower() in ("1", "true", "yes", "on")
    environ.setdefault(LOCAL_PRICES, "False" if online else "True")
