"""The two providers bench runs itself: ``dry/<name>`` (answered in-process, free) and ``local/<name>``
(the embedded llama.cpp server, started on first use). Neither needs a key or LiteLLM."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from bench.core.errors import LocalModelError
from bench.models import dry, local
from bench.models.providers.contract import ModelSpec, Provider, Route


class DryProvider(Provider):
    """``dry/<name>``: a stand-in for any model, answered by bench.models.dry, free; it takes whatever it is sent."""

    name = "dry"
    label = "a dry model"
    free = True
    params = "any"  # it stands in for every provider
    answers_in_process = True
    probes_api_base = False  # an api_base copied from the real model is never asked

    def matches(self, spec: ModelSpec) -> bool:
        return dry.is_dry(spec.model)

    def route(self, spec: ModelSpec) -> Route:
        return Route(spec, "dry", self, "dry", spec.model.removeprefix(dry.DRY_PREFIX), None, identity="dry",
                     key_env=None)

    def check(self, spec: ModelSpec) -> list[str]:
        return []  # answered in-process: nothing to install, no key, no endpoint

    def takes_images(self, route: Route) -> bool:
        return True

    def takes_tools(self, route: Route) -> bool:
        return True

    def logprobs(self, route: Route) -> bool:
        return False  # its replies carry none


class LocalProvider(Provider):
    """``local/<name>``: the embedded GGUF model behind llama.cpp's OpenAI-compatible server on loopback."""

    name = "local"
    label = "the embedded model"
    free = True  # it runs on this machine: cost 0, no price looked up (an unknown price would ask for one)
    launches = True
    params = "llama_cpp"  # OpenAI's chat params plus llama.cpp's sampling ones
    named_in_listing = False  # llama.cpp's single-model server lists its own name for whatever it serves
    no_images = "the embedded model is text-only (served without a vision projector)"

    def matches(self, spec: ModelSpec) -> bool:
        return local.is_local(spec.model)

    def route(self, spec: ModelSpec) -> Route:  # identity: the weights', never the port (the cache survives restarts)
        return Route(spec, "direct", self, "local", spec.model.removeprefix(local.LOCAL_PREFIX), None,
                     identity=local.identity(spec.model), key_env=None)

    def check(self, spec: ModelSpec) -> list[str]:
        """Return the problems of an embedded model: missing server package, weights or size cap."""
        if os.environ.get("BENCH_LOCAL_API_BASE"):
            return []  # an already running `bench serve-local`; its reachability is checked on first use
        problems = []
        if importlib.util.find_spec("llama_cpp") is None:
            problems.append(f"model {spec.model!r} needs llama-cpp-python (the 'local' extra): "
                            f"run `make setup` or pip install -e '.[local]'")
        try:
            local.model_file(spec.model)
        except LocalModelError as err:
            problems.append(str(err))
        return problems

    def takes_images(self, route: Route) -> bool:
        return False  # the packaged GGUF models are text-only, served without a vision projector

    def takes_tools(self, route: Route) -> bool:
        return False  # the server runs no function-calling chat format

    def logprobs(self, route: Route) -> bool:
        return local.logprobs_wanted()  # served only when started with BENCH_LOCAL_LOGPROBS=1

    def wire_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return local.llama_messages(messages)

    def wire_response_format(self, response_format: dict) -> dict:
        return local.llama_response_format(response_format)

    def launch(self, route: Route) -> None:
        ep = local.ensure(route.spec.model)
        route.api_base, route.served_model = ep.api_base, ep.served_model
