"""The one LLM seam: every model call of collect and judge goes through ``LLM.complete``.

A ``ModelSpec`` resolves into a route (``routing``), is checked first (``preflight``) and asked through ``client``
under ``Limits`` and ``ratelimit``'s caps; each kind of model is one ``Provider`` of ``providers``.
"""

from bench.models.cache import ResponseCache, open_cache, request_key
from bench.models.client import LLM, Completion, complete, configure
from bench.models.dry import dry_model, is_dry
from bench.models.genparams import param_problems
from bench.models.limits import Limits
from bench.models.preflight import preflight
from bench.models.routing import ModelSpec, Route, resolve

__all__ = ["LLM", "Completion", "Limits", "ModelSpec", "ResponseCache", "Route", "complete", "configure", "dry_model",
           "is_dry", "open_cache", "param_problems", "preflight", "request_key", "resolve"]
