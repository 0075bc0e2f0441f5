"""LiteLLM's price map from its own package, never from the internet (set before LiteLLM is imported).

Importing LiteLLM downloads its model price map unless ``LITELLM_LOCAL_MODEL_COST_MAP=True``;
without internet that download retries and can block whatever imported it (a bare
``mlflow ui`` imports LiteLLM and may never start listening). ``import bench`` therefore
calls :func:`use_local_prices` before anything can import LiteLLM, so the CLI, notebooks,
their papermill kernels and the processes they start (``bench ui``'s MLflow server) use the
price map bundled with LiteLLM. ``BENCH_ONLINE_PRICES=1`` opts out (LiteLLM then fetches
the current map); an explicit ``LITELLM_LOCAL_MODEL_COST_MAP`` always wins.

This module sits below every layer (standard library only), because ``bench/__init__`` runs it.
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
