"""No secret is ever stored or shown, even when a provider echoes it (issue 12, point 8).

The real path: `bench sweep` (subprocesses) against the fake provider whose error bodies echo the request's
Authorization header (``echo_auth``), on the direct transport and through ``litellm.acompletion``,
with an ``api_base`` carrying ``user:password@``; then the report, MLflow, a review export (in-process), and a
search of every file and of everything printed for the canaries. Plus fast unit tests of
``bench.core.secrets.redact`` and of each place that applies it.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from bench.core import secrets
from bench.models.cache import ResponseCache
from bench.core.errors import PreflightError, ProviderError
from bench.core.records import Candidate, Judgment
from bench.core.secrets import redact
from bench.core.store import RunStore
from bench.testing import grids
from bench.testing.in_process import command

KEY_UNKNOWN = "sk-canary-sent-but-refused-4b7e91d0c2"  # sent by sweep A; the fake wants another key
KEY_RIGHT = "sk-canary-accepted-but-echoed-8f2a6c3d"  # sweep B's key, accepted, then echoed by 500s
KEY_FAKE_WANTS = "sk-canary-the-fake-wants-1e5b07a9f3"  # sweep A's m-ok and judge use it (never echoed)
PASSWORD = "canary-pass-5e8a1f9c"  # in an api_base's userinfo
BASIC = base64.b64encode(f"user:{PASSWORD}".encode()).decode()  # the same password as a Basic header
CANARIES = (KEY_UNKNOWN, KEY_RIGHT, KEY_FAKE_WANTS, PASSWORD, BASIC)

LIMITS = {"max_concurrency": 8, "timeout_s": 10, "retries": 1}


def write_leak401(path: Path, url: str, userinfo_url: str) -> Path:
    """Sweep A: the fake wants KEY_FAKE_WANTS; three models send KEY_UNKNOWN (a variable whose name says
    nothing: only its api_key_env registration makes it a secret) and get 401s naming the key and
    echoing the header; m-ok sends the right key and is judged; two models reach the fake through an
    api_base with user:PASSWORD@."""
    gateway = "BENCH_GATEWAY_CRED"
    models = [grids.model("m-direct", url, name="fake-a", api_key_env=gateway),
              grids.model("m-litellm", url, name="fake-b", api_key_env=gateway, transport="litellm"),
              grids.model("m-userinfo", userinfo_url, name="fake-c", api_key_env=gateway),
              grids.model("m-userinfo-litellm", userinfo_url, name="fake-d", transport="litellm"),
              grids.model("m-ok", url, name="fake-e", api_key_env="BENCH_GOOD_CRED")]
    return grids.grid(path, url, name="leak401", seed=3, models=models,
                      prompts=[grids.prompt("p", "Give one tip about {topic}.")],
                      scenarios=grids.generate(topic=["email", "sleep", "focus"]),
                      judges=[grids.judge("grader", url, name="judge", api_key_env="BENCH_GOOD_CRED")], limits=LIMITS)


def write_leak500(path: Path, url: str) -> Path:
    """Sweep B: the key is right (OPENAI_API_KEY, a well-known variable), but every prompt about sleep and
    every judge call (its rubric names "actionability") gets a 500 that echoes the header."""
    key = "OPENAI_API_KEY"
    return grids.grid(
        path, url, name="leak500", seed=3,
        models=[grids.model("m-direct", url, name="fake-a", api_key_env=key),
                grids.model("m-litellm", url, name="fake-b", api_key_env=key, transport="litellm")],
        # not sweep A's prompt: its judge requests must not be answered by the shared response cache
        prompts=[grids.prompt("p", "Give one short tip about {topic}.")],
        scenarios=grids.generate(topic=["email", "sleep", "focus"]),
        judges=[grids.judge("grader", url, name="judge", api_key_env=key),
                grids.judge("lite", url, name="judge", api_key_env=key, transport="litellm")],
        limits=LIMITS)


def _run(tmp: Path, env: dict[str, str], *args: str) -> str:
    """Run ``bench ARGS`` with ``env`` set and no OPENAI_API_KEY inherited (a sweep as a subprocess, whose every
    line is read; another command in-process); return its command line and output."""
    out = (grids.bench(tmp, *args, timeout=600, drop=("OPENAI_API_KEY",), **env) if args[0] == "sweep"
           else command(tmp, *args, drop=("OPENAI_API_KEY",), **env))
    return f"$ bench {' '.join(args)} (exit {out.returncode})\n{out.stdout}\n{out.stderr}\n"


@pytest.fixture(scope="module")
def leaky(tmp_path_factory, fake_server):
    """Both sweeps (report and MLflow on) and a review export of each; return (tmp folder, everything printed)."""
    tmp = tmp_path_factory.mktemp("secrets")
    inputs = tmp_path_factory.mktemp("secrets-params")  # the params files hold the api_base password: not searched
    userinfo_url = fake_server.url.replace("http://", f"http://user:{PASSWORD}@")
    write_leak401(inputs / "a.yaml", fake_server.url, userinfo_url)
    write_leak500(inputs / "b.yaml", fake_server.url)
    printed = ""
    try:
        fake_server.reset()
        fake_server.configure(require_key=KEY_FAKE_WANTS, echo_auth=True)
        env_a = {"BENCH_GATEWAY_CRED": KEY_UNKNOWN, "BENCH_GOOD_CRED": KEY_FAKE_WANTS}
        printed += _run(tmp, env_a, "sweep", str(inputs / "a.yaml"))
        printed += _run(tmp, env_a, "review", "export", str(tmp / "runs" / "leak401"), str(tmp / "export-a.json"))
        fake_server.reset()
        fake_server.configure(require_key=KEY_RIGHT, echo_auth=True,
                              replies=[{"match": "sleep", "status": 500}, {"match": "actionability", "status": 500}])
        env_b = {"OPENAI_API_KEY": KEY_RIGHT}
        printed += _run(tmp, env_b, "sweep", str(inputs / "b.yaml"))
        printed += _run(tmp, env_b, "review", "export", str(tmp / "runs" / "leak500"), str(tmp / "export-b.json"))
    finally:
        fake_server.reset()
    return tmp, printed


def test_the_echo_happened_and_every_record_shows_it_redacted(leaky):
    tmp, printed = leaky
    a, b = RunStore(tmp / "runs" / "leak401"), RunStore(tmp / "runs" / "leak500")
    errors_a = {c.model_id: c.error for c in a.read(Candidate) if not c.ok}
    for model in ("m-direct", "m-litellm"):  # both transports copy the provider's text: the key, then the header
        assert "Incorrect API key provided: [redacted]" in errors_a[model], (model, errors_a[model], printed[-3000:])
        assert "received Authorization: [redacted]" in errors_a[model], errors_a[model]
    assert {"m-userinfo", "m-userinfo-litellm"} <= set(errors_a)  # reached the sweep (the preflight took the URL)
    assert any(c.ok for c in a.read(Candidate)) and any(j.ok for j in a.read(Judgment)), printed[-3000:]
    errors_b = {c.model_id: c.error for c in b.read(Candidate) if not c.ok}
    for model in ("m-direct", "m-litellm"):
        assert "HTTP 500" in errors_b[model] or "InternalServerError" in errors_b[model], errors_b[model]
        assert "received Authorization: [redacted]" in errors_b[model], errors_b[model]
    judged = [(j.judge_id, j.error) for j in b.read(Judgment) if not j.ok]
    assert "grader" in {judge for judge, _ in judged}, printed[-3000:]
    assert all("received Authorization: [redacted]" in e for _, e in judged), judged
    assert (tmp / "export-a.json").exists() and (tmp / "export-b.json").exists(), printed[-3000:]


def test_no_secret_in_any_file_or_anything_printed(leaky):
    tmp, printed = leaky
    files = [p for p in tmp.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"candidates.jsonl", "judgments.jsonl", "mlflow.db", "index.html"} <= names, names
    assert any(p.parent.name == "responses" and p.suffix == ".jsonl" for p in files)  # the response cache's files
    assert any("mlartifacts" in p.parts for p in files) and any(p.suffix == ".ipynb" for p in files)
    leaks = [(str(p.relative_to(tmp)), c) for p in files for c in CANARIES if c.encode() in p.read_bytes()]
    leaks += [("printed", c) for c in CANARIES if c in printed]
    assert leaks == []


# -- redact, fast ---------------------------------------------------------------------------------------
def test_redact_removes_known_values_urls_and_header_echoes(monkeypatch):
    monkeypatch.setenv("SOME_SERVICE_API_KEY", "svc-key-0a1b2c3d4e")  # by its name's suffix
    monkeypatch.setenv("SOME_SERVICE_PASSWORD", "hunter2-but-longer")
    monkeypatch.setenv("BENCH_T_ODD_NAME", "odd-name-value-77")  # only once registered as a key variable
    monkeypatch.setenv("SHORT_TOKEN", "abc123")  # under 8 characters: left alone
    secrets.refresh()
    assert redact("k=svc-key-0a1b2c3d4e p=hunter2-but-longer") == "k=[redacted] p=[redacted]"
    assert redact("odd-name-value-77") == "odd-name-value-77"
    secrets.watch_env("BENCH_T_ODD_NAME")
    assert redact("odd-name-value-77") == "[redacted]"
    assert_redacts([
        ("abc123 stays", "abc123 stays"),
        ("see http://ann:pw@10.0.0.1:8000/v1 and https://tok@host/x",
         "see http://***@10.0.0.1:8000/v1 and https://***@host/x"),
        ("https://host/path?mail=a@b.c", "https://host/path?mail=a@b.c"),
        ("received Authorization: Bearer zz-unknown-token-1", "received Authorization: [redacted]"),
        ("proxy said bearer zz-unknown-token-1 twice", "proxy said bearer [redacted] twice"),
        ("{'x-api-key': 'zz-unknown-key-22'}", "{'x-api-key': '[redacted]'}"),
        ('{"authorization":"Basic dXNlcjpwdw=="}', '{"authorization":"[redacted]"}'),
        ("Bearer authentication failed; send a Bearer token",
         "Bearer authentication failed; send a Bearer token"),  # prose is not a token
        ("plain text", "plain text"), ("", ""),
        ("Authorization: Bearer zz-unknown-token-1 at http://u:p@h/ svc-key-0a1b2c3d4e",
         "Authorization: [redacted] at http://***@h/ [redacted]"),
    ])


def assert_redacts(cases: list[tuple[str, str]]) -> None:
    """Each text is redacted as expected, and redacting it again changes nothing more (idempotent)."""
    for text, expected in cases:
        assert redact(text) == expected, text
        assert redact(expected) == expected, expected


def test_redacted_json_stays_valid_and_records_read_back(tmp_path, monkeypatch):
    odd = 'q"uo\\te-secret-99'  # quotes and backslashes are escaped inside JSON: that form is redacted too
    monkeypatch.setenv("BENCH_T_ODD_API_KEY", odd)
    secrets.refresh()
    echo = f"HTTP 401: bad key {odd}; received {{\"Authorization\": \"Bearer {odd}\"}} at http://u:{odd}@h/v1"
    cand = Candidate(model_id="m", model="openai/x", prompt_id="p", prompt_version="v1", prompt_hash="h",
                     scenario_id="s", messages=[{"role": "user", "content": f"key {odd}"}], error=echo)
    store = RunStore(tmp_path / "run")
    store.append([cand])
    data = store.path(Candidate).read_bytes()
    assert b"uo\\\\te-secret" not in data and b"uo\\te-secret" not in data and b"-secret-99" not in data
    (back,) = store.read(Candidate)
    assert back.id == cand.id and back.messages[0]["content"] == "key [redacted]"
    assert "bad key [redacted]" in back.error and "-secret-99" not in back.error
    json.loads(data)


def test_errors_are_redacted_at_construction_and_before_any_cut(monkeypatch):
    from bench.models._transport import http_error as _http_error, litellm_error as _litellm_error, parse_openai as _parse_openai
    from bench.models.routing import ModelSpec, resolve

    key = "sk-unit-" + "k" * 40 + "-tail"
    monkeypatch.setenv("BENCH_T_CUT_CRED", key)
    route = resolve(ModelSpec("openai/x", api_base="http://ann:route-pass-31337@127.0.0.1:9/v1",
                              api_key_env="BENCH_T_CUT_CRED"))  # registers the variable and the password
    assert "route-pass-31337" not in redact("echo route-pass-31337")
    body = ("x" * 185 + key + " and more").encode()  # the key straddles the 200-character cut
    for err in (_http_error(route, 502, body, None), _litellm_error(route, Exception(body.decode())),
                ProviderError(f"at {route.api_base}: {key}", kind="connection")):
        assert key[:12] not in str(err) and "route-pass" not in str(err), str(err)
    with pytest.raises(ProviderError) as malformed:
        _parse_openai(route, 200, ("y" * 100 + key).encode(), None)  # cut at 120 characters
    assert key[:12] not in str(malformed.value)
    problem = PreflightError([f"api_base {route.api_base} did not answer"])
    assert "route-pass" not in str(problem) and "http://***@127.0.0.1:9/v1" in str(problem)


def test_the_response_cache_stores_no_secret(tmp_path, monkeypatch):
    """A reply is redacted before it is written: what the file holds, and what it answers, holds no key."""
    monkeypatch.setenv("BENCH_T_CACHE_TOKEN", "cache-token-5f5f5f")
    secrets.refresh()
    cache = ResponseCache(tmp_path / "c")
    texts = {f"k{i}": f"plain reply {i}" for i in range(50)}
    texts["k1"] = "echo cache-token-5f5f5f"
    texts["k2"] = "Authorization: Bearer cache-token-5f5f5f"
    texts["k37"] = "a url https://user:pw-9@host.example/x"
    for key, text in texts.items():
        cache.put(key, {"text": text, "usage": {}})
    assert cache.get("k1")["text"] == "echo [redacted]" and cache.get("k2")["text"] == "Authorization: [redacted]"
    assert cache.get("k37")["text"] == "a url https://***@host.example/x" and cache.get("k5")["text"] == "plain reply 5"
    cache.close()
    reopened = ResponseCache(tmp_path / "c")
    assert reopened.get("k1")["text"] == "echo [redacted]" and len(reopened) == 50
    reopened.close()
    assert not any(b"cache-token" in p.read_bytes() or b"pw-9" in p.read_bytes()
                   for p in tmp_path.rglob("*") if p.is_file())


def test_the_tracking_uri_is_shown_without_credentials():
    from bench.tracking import shown_uri

    assert shown_uri("https://me:pw@mlflow.example/") == "https://***@mlflow.example/"
    assert shown_uri("sqlite:////tmp/x/mlflow.db") == "sqlite:////tmp/x/mlflow.db"


def test_credentials_in_a_uris_query_are_redacted_and_the_rest_is_kept():
    """libpq's ?password=, ?passwd=, a ?token= or Google's ?key=: the value goes, the name and other parameters stay
    (issue 28, point 4: `bench tracking-server` printed a libpq-form password)."""
    from bench.tracking import shown_uri

    assert shown_uri("https://mlflow.lab/?passwd=hunter2hunter2") == "https://mlflow.lab/?passwd=[redacted]"
    assert_redacts([
        ("postgresql://mlflow@db:5432/m?sslmode=require&password=Pg-Query-Pw-77",
         "postgresql://***@db:5432/m?sslmode=require&password=[redacted]"),
        ("GET https://g.api/v1/m:gen?key=AIzaSyQueryKey0123&alt=sse", "GET https://g.api/v1/m:gen?key=[redacted]&alt=sse"),
        ('{"url": "wss://h/x?access_token=tok.en-123;v=2"}', '{"url": "wss://h/x?access_token=[redacted];v=2"}'),
        ("s3://b/k?X-Amz-Signature=abcdef0123", "s3://b/k?X-Amz-Signature=[redacted]"),
        ("https://host/search?q=key+facts&page=2", "https://host/search?q=key+facts&page=2"),
        ("a monkey=3 and turkey: 4", "a monkey=3 and turkey: 4"),  # not a query parameter
        ("postgresql://u@h/d?password=p1p2p3p4&token=t1t2t3t4",
         "postgresql://***@h/d?password=[redacted]&token=[redacted]"),
    ])


def test_the_pattern_is_rebuilt_only_when_the_secrets_change(monkeypatch):
    secrets.refresh()
    first = secrets._current()[0]
    secrets.refresh()
    assert secrets._current()[0] is first  # a rescan finding the same values keeps the compiled regex
    monkeypatch.setenv("BENCH_T_NEW_SECRET", "a-new-secret-value")
    secrets.refresh()
    assert secrets._current()[0] is not first and redact("a-new-secret-value") == "[redacted]"
