"""Lazy, quiet import of LiteLLM (it costs seconds and otherwise phones home for a price map).

Importing LiteLLM downloads its model price map unless ``LITELLM_LOCAL_MODEL_COST_MAP=True``;
without internet that download retries and can block whatever imported it (a bare
``mlflow ui`` imports LiteLLM and may never start listening). ``import bench`` therefore
calls :func:`use_local_prices` before anything can import LiteLLM, so the CLI, notebooks,
their papermill kernels and the processes they start (``bench ui``'s MLflow server) use the
price map bundled with LiteLLM. ``BENCH_ONLINE_PRICES=1`` opts out (LiteLLM then fetches
the current map); an explicit ``LITELLM_LOCAL_MODEL_COST_MAP`` always wins.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from functools import cache
from typing import Any

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


@cache
def litellm() -> Any:
    """Return the imported ``litellm`` module, configured to stay local and quiet."""
    use_local_prices()
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    import litellm as _litellm

    _litellm.suppress_debug_info = True
    _litellm.telemetry = False
    _litellm.drop_params = False
    return _litellm
