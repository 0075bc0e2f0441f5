"""The estimate's tokenizer is tiktoken's own, loaded offline from the encoding files LiteLLM bundles
(bench.models.tokens): its counts equal tiktoken's, and loading it opens no connection, even when
``TIKTOKEN_CACHE_DIR`` names an empty folder and the proxies are unreachable."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources

import tiktoken

from bench.testing import grids
from bench.testing.grids import ROOT

TEXTS = ["Hello, world!", "One tip about caching, number 7.", "naïve café, 東京 🚀 " * 3, "<|endoftext|> as text"]
COUNT = r"""
import json, sys

def no_network(event, args):
    if event in ("socket.connect", "socket.getaddrinfo"):
        raise RuntimeError(f"a network access was attempted: {event} {args}")

sys.addaudithook(no_network)
from bench.models.routing import ModelSpec, resolve
from bench.models.tokens import counter_for
out = {}
for model in ("openai/m1", "openai/gpt-4o"):  # self-hosted models: counted without importing LiteLLM
    counter = counter_for(resolve(ModelSpec(model, api_base="http://127.0.0.1:9/v1")))
    out[model] = {"tokenizer": counter.tokenizer, "note": counter.note, "counts": [counter.text(t) for t in TEXTS]}
print(json.dumps(out))
"""


def test_counts_equal_tiktokens_own_and_loading_them_never_reaches_the_network(tmp_path, monkeypatch):
    empty = tmp_path / "tiktoken-cache"
    empty.mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", f"TEXTS = {TEXTS!r}\n{COUNT}"], cwd=ROOT, capture_output=True, text=True, timeout=300,
        env=grids.env(tmp_path, TIKTOKEN_CACHE_DIR=str(empty), HTTPS_PROXY="http://127.0.0.1:9",
                      HTTP_PROXY="http://127.0.0.1:9", BENCH_CACHE_DIR=str(tmp_path / "cache")))
    assert proc.returncode == 0, proc.stderr
    counted = json.loads(proc.stdout)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(resources.files("litellm") / "litellm_core_utils" / "tokenizers"))
    for model, encoding in (("openai/m1", "cl100k_base"), ("openai/gpt-4o", "o200k_base")):
        own = tiktoken.get_encoding(encoding)
        assert counted[model] == {"tokenizer": encoding, "note": None,
                                  "counts": [len(own.encode(t, disallowed_special=())) for t in TEXTS]}
    assert not list(empty.iterdir())  # nothing was downloaded into the folder the environment named
    assert not (tmp_path / "cache" / "encodings").exists()  # and no parsed copy is kept
