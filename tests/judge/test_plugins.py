"""Plugins: a package, installed with pip into a folder on sys.path, registers a check kind (entry point group
`bench.checks`) and a provider (`bench.providers`); a sweep on the fake provider then routes the package's model
prefix through its provider and grades with its check, bench unedited."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from bench.core import plugins
from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.testing.grids import grid, judge, prompt
from bench.testing.in_process import run_stages

PLUGIN = '''
from typing import Literal

from bench.config.program_checks import PluginCheck
from bench.models.providers import Route
from bench.models.providers.network import SelfHostedProvider


class WordCount(PluginCheck):
    """Passes when the answer has at most max_words words."""
    kind: Literal["word_count"]
    max_words: int

    def score(self, output, reference, scenario):
        n = len(output.split())
        return {"score": n <= self.max_words, "explanation": f"{n} words (scenario {scenario['id']})"}


class Acme(SelfHostedProvider):
    """acme/<name> at an api_base: an OpenAI-compatible gateway of one's own."""
    name = "acme"

    def matches(self, spec):
        return spec.model.startswith("acme/") and bool(spec.api_base)

    def route(self, spec):
        base = spec.api_base.rstrip("/")
        return Route(spec, "direct", self, "acme", spec.model.split("/", 1)[1], base, identity=f"acme@{base}",
                     key_env=None)
'''
PYPROJECT = '''
[project]
name = "bench-acme"
version = "0.1"
[project.entry-points."bench.checks"]
word_count = "bench_acme:WordCount"
[project.entry-points."bench.providers"]
acme = "bench_acme:Acme"
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"
[tool.setuptools]
py-modules = ["bench_acme"]
'''


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """Install the plugin package (pip, no network) into a folder put on sys.path; forget it afterwards."""
    src, target = tmp_path / "src", tmp_path / "site"
    src.mkdir()
    (src / "bench_acme.py").write_text(PLUGIN)
    (src / "pyproject.toml").write_text(PYPROJECT)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "--target", str(target), str(src)], check=True, capture_output=True)
    monkeypatch.syspath_prepend(str(target))
    plugins.reload()
    yield
    sys.modules.pop("bench_acme", None)
    plugins.reload()


def test_an_installed_package_adds_a_check_kind_and_a_provider(installed, tmp_path, fake):
    fake.configure(replies=[{"match": "topic t0", "content": "short"},
                            {"match": "topic t1", "content": "far too many words for this check"}])
    (tmp_path / "words.md").write_text(textwrap.dedent('''\
        ---
        id: words
        version: "1"
        mode: automated
        checks:
          - {id: brief, kind: word_count, max_words: 3}
        ---
        '''))
    params = grid(tmp_path / "g.yaml", fake.url, topics=2,
                  models=[{"id": "gw", "model": "acme/m1", "api_base": fake.url}],
                  prompts=[prompt("p", "One line on topic {topic}.")],
                  judges=[judge("words", fake.url, rubric=str(tmp_path / "words.md"))])
    out = run_stages(tmp_path, params)
    assert out.returncode == 0, out.log
    store = RunStore(out.run_dir)
    cands = list(store.latest(Candidate).values())
    assert len(cands) == 2 and all(c.ok for c in cands)
    assert fake.stats()["by_model"] == {"m1": 2}  # the plugin's provider sent acme/m1 to its api_base as m1
    graded = {j.scenario_id: j.details["checks"][0] for j in store.latest(Judgment).values()}
    assert sorted((c["passed"], c["detail"].split(" (")[0]) for c in graded.values()) == [
        (False, "7 words"), (True, "1 words")]
    assert all(f"(scenario {sid})" in c["detail"] for sid, c in graded.items())


def test_without_the_package_the_kind_is_unknown(tmp_path):
    from bench.config.checks import parse_check
    with pytest.raises(ValueError, match="word_count"):
        parse_check({"id": "brief", "kind": "word_count", "max_words": 3})
