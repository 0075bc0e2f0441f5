"""The embedded model's lifecycle: one llama.cpp server per process, started on demand, reused, or the shared
``bench serve-local`` server named by ``BENCH_LOCAL_API_BASE``."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator

from bench.core.errors import LocalModelError
from bench.models.local.server import LocalEndpoint, LocalServer, log_tail, model_ids
from bench.models.local.weights import DEFAULT_MODEL, LOCAL_PREFIX, LocalModel, identity, parse

_manager_lock = threading.Lock()
_current: LocalServer | None = None


_VERIFIED: dict[tuple[str, str], LocalEndpoint] = {}  # shared servers checked once per process


def _external_endpoint(url: str, spec: LocalModel) -> LocalEndpoint:
    """Return the endpoint of the shared server at ``url`` after checking (once) that it serves ``spec``."""
    api_base = url.strip().rstrip("/")
    api_base = api_base if api_base.endswith("/v1") else f"{api_base}/v1"
    known = _VERIFIED.get((api_base, spec.name))
    if known is not None:
        return known
    try:  # llama.cpp answers /models only between generations: a busy server may take a while
        ids = model_ids(api_base, timeout_s=30.0)
    except (OSError, ValueError) as exc:
        raise LocalModelError(f"BENCH_LOCAL_API_BASE={url} does not answer {api_base}/models ({exc}); "
                              f"start it with `bench serve-local` or unset BENCH_LOCAL_API_BASE") from None
    if spec.name not in ids:
        raise LocalModelError(f"the server at BENCH_LOCAL_API_BASE={url} serves {ids}, not {spec.name!r} (llama.cpp "
                              f"would silently answer with its own model); serve {LOCAL_PREFIX}{spec.name} there "
                              f"or unset BENCH_LOCAL_API_BASE")
    try:
        weights = identity(LOCAL_PREFIX + spec.name)
    except LocalModelError:  # the weights live only on the serving side
        weights = f"local:{spec.name}"
    _VERIFIED[(api_base, spec.name)] = LocalEndpoint(api_base, spec.name, weights)
    return _VERIFIED[(api_base, spec.name)]


def ensure(model: str) -> LocalEndpoint:
    """Return a live endpoint serving ``model`` (this process's server, or BENCH_LOCAL_API_BASE's); thread-safe."""
    global _current
    spec = parse(model)
    shared = os.environ.get("BENCH_LOCAL_API_BASE", "").strip()
    if shared:
        return _external_endpoint(shared, spec)
    with _manager_lock:
        current = _current
        if current is not None and current.spec.key == spec.key and current.alive() and current.endpoint:
            return current.endpoint
        if current is not None:
            current.stop()
            _current = None
        server = LocalServer(model)
        endpoint = server.start()
        _current = server
        return endpoint


def shutdown() -> None:
    """Stop this process's managed server, if any (the next ``ensure`` starts a new one)."""
    global _current
    with _manager_lock:
        if _current is not None:
            _current.stop()
            _current = None


def serve_foreground(model: str = DEFAULT_MODEL, port: int | None = None) -> None:
    """Serve ``model`` until Ctrl-C or SIGTERM, printing the ``export BENCH_LOCAL_API_BASE=...`` line that shares it."""
    server = LocalServer(model, port=port)
    with _sigterm_raises_interrupt():
        try:
            endpoint = server.start()
            print(f"serving {LOCAL_PREFIX}{endpoint.served_model} at {endpoint.api_base}", flush=True)
            print(f"share it with: export BENCH_LOCAL_API_BASE={endpoint.api_base}", flush=True)
            print(f"(log: {server.log_path}; Ctrl-C to stop)", flush=True)
            while server.alive():
                time.sleep(0.5)
            raise LocalModelError(f"the llama.cpp server for {model} stopped unexpectedly; log {server.log_path}:\n"
                                  f"{log_tail(server.log_path)}")
        except KeyboardInterrupt:
            print("stopping the local model server", flush=True)
        finally:
            server.stop()


@contextlib.contextmanager
def _sigterm_raises_interrupt() -> Iterator[None]:
    """Make SIGTERM raise KeyboardInterrupt while inside (main thread only), so both stop cleanly."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
