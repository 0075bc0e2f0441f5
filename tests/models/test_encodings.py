"""The estimate's tokenizer is parsed once and read from its copy after (bench.models.encodings): the same counts
from the bundled file, from the copy, and from a damaged copy (which is made anew)."""

from __future__ import annotations

import json
import marshal
import subprocess
import sys

from bench.testing import grids
from bench.testing.grids import ROOT

COUNT = r"""
import json
from bench.models.routing import ModelSpec, resolve
from bench.models.tokens import counter_for
counter = counter_for(resolve(ModelSpec("openai/m1", api_base="http://127.0.0.1:9/v1")))  # a self-hosted model
texts = ["Hello, world!", "One tip about caching, number 7.", "naïve café, 東京 🚀 " * 3, "<|endoftext|> as text"]
print(json.dumps({"tokenizer": counter.tokenizer, "counts": [counter.text(t) for t in texts]}))
"""


def counts(tmp_path) -> dict:
    """Count in a fresh process whose cache folder is under ``tmp_path``."""
    proc = subprocess.run([sys.executable, "-c", COUNT], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=grids.env(tmp_path, BENCH_CACHE_DIR=str(tmp_path / "cache")))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_parsed_copy_counts_as_the_bundled_file_and_a_damaged_one_is_made_anew(tmp_path):
    parsed = counts(tmp_path)  # no copy yet: parsed from LiteLLM's bundled file
    assert parsed["tokenizer"] == "cl100k_base" and all(n > 0 for n in parsed["counts"])
    [copy] = (tmp_path / "cache" / "encodings").glob("cl100k_base-*.marshal")
    assert copy.stat().st_mode & 0o077 == 0  # this user's only
    assert counts(tmp_path) == parsed  # read from the copy
    copy.write_bytes(b"\x00 not what marshal wrote")
    assert counts(tmp_path) == parsed  # parsed again
    assert marshal.loads(copy.read_bytes())["name"] == "cl100k_base"  # and the copy made anew
