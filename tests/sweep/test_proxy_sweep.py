"""A sweep whose model only an HTTP proxy can reach (issue 46): its api_base's host name resolves nowhere
(``provider.invalid``), a loopback forwarding proxy maps it onto the fake provider, and the sweep (its preflight,
then its stages' requests, in-process: bench.testing.in_process) goes through ``HTTP_PROXY``.
"""

from __future__ import annotations

from bench.analysis import load_run
from bench.testing.grids import grid
from bench.testing.in_process import run_stages
from bench.testing.proxy import forwarding_proxy

PROXY_VARS = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY",
              "all_proxy")


def test_a_sweep_reaches_an_api_base_only_a_proxy_can_reach(fake, tmp_path):
    port = fake.port
    base = f"http://provider.invalid:{port}/v1"
    params = grid(tmp_path / "proxied.yaml", base, name="proxied", topics=3)
    with forwarding_proxy({f"provider.invalid:{port}": ("127.0.0.1", port)}) as proxy:
        done = run_stages(tmp_path, params, drop=PROXY_VARS, HTTP_PROXY=proxy.url)
    assert done.returncode == 0, done.log
    assert f"{base}/models" in proxy.asked  # the preflight went where the requests went
    assert proxy.asked.count(f"{base}/chat/completions") == 3 == fake.stats()["requests"]
    assert load_run(tmp_path / "runs" / "proxied").candidates.height == 3
