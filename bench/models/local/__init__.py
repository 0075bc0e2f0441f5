"""The embedded default model: a GGUF file served by llama.cpp's OpenAI-compatible server on loopback
(llama_cpp is only ever imported by the server's child process)."""

from bench.models.local._launch import HOST, logprobs_wanted
from bench.models.local.llama_format import llama_messages, llama_response_format
from bench.models.local.manager import ensure, serve_foreground, shutdown
from bench.models.local.server import LocalEndpoint, LocalServer
from bench.models.local.weights import (DEFAULT_MODEL, INSTALL_HINT, LOCAL_PREFIX, PACKAGED, LocalModel, PackagedModel,
                                        cache_dir, identity, is_local, model_file, parse)

__all__ = ["DEFAULT_MODEL", "HOST", "INSTALL_HINT", "LOCAL_PREFIX", "PACKAGED", "LocalEndpoint", "LocalModel",
           "LocalServer", "PackagedModel", "cache_dir", "ensure", "identity", "is_local", "llama_messages",
           "logprobs_wanted", "llama_response_format", "model_file", "parse", "serve_foreground", "shutdown"]
