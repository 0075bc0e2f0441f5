"""The preflight's probes follow no redirect (issue 47): an api_base that answers 307 to another host would have
received ``GET /models`` with the api_base's Basic credentials and ``GET /batches`` with the model's Bearer key.
Both servers are loopback listeners on two ports; the one the redirect points to must receive nothing.
"""

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from bench.core.errors import PreflightError
from bench.models.batch_policy import BatchPolicy
from bench.models.preflight import _check_batches, preflight
from bench.models.routing import ModelSpec


@contextmanager
def listener(answer):
    """A loopback HTTP server answering each GET with ``answer(handler)``; yield (its base URL, the heads it read)."""
    heads: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            heads.append(dict(self.headers))
            answer(self)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", heads
    finally:
        server.shutdown()
        server.server_close()
        thread.join(30)


def listing(handler):
    body = json.dumps({"data": [{"id": "m"}]}).encode()
    handler.send_response(200)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def test_the_preflights_probes_send_no_credential_where_a_redirect_points(monkeypatch):
    for var in ("HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("BENCH_T_BATCH_KEY", "sk-batch-secret")
    with listener(listing) as (elsewhere, stolen):
        def moved(handler):
            handler.send_response(307)
            handler.send_header("Location", f"{elsewhere}{handler.path}")
            handler.send_header("Content-Length", "0")
            handler.end_headers()

        with listener(moved) as (base, asked):
            try:
                preflight([ModelSpec("openai/m", api_base=base.replace("http://", "http://ann:pw@") + "/v1")])
                problem = ""
            except PreflightError as err:
                problem = str(err)
            batched = ModelSpec("openai/m", api_base=f"{base}/v1", api_key_env="BENCH_T_BATCH_KEY",
                                batch=BatchPolicy())
            batch_problem = _check_batches(batched, 3.0) or ""
    assert [h.get("Authorization") for h in stolen] == []  # neither credential went where the redirects pointed
    assert [h.get("Authorization", "")[:6] for h in asked] == ["Basic ", "Bearer"]
    assert f"redirects to {elsewhere}/v1/models" in problem
    assert f"redirects to {elsewhere}/v1/batches" in batch_problem
