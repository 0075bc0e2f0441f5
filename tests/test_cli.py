"""The `bench` command: the smoke job through the real seam, and one clear line for bad input."""

import subprocess
import sys


def bench(*args, cwd):
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def test_smoke_answers_then_the_cache_answers(fake, tmp_path):
    first = bench("smoke", "--model", "openai/fake-model", "--api-base", fake.url, "--runs", "runs", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "[plain] 'fake answer" in first.stdout and "[json] '{" in first.stdout
    assert "model calls made: 2" in first.stdout
    again = bench("smoke", "--model", "openai/fake-model", "--api-base", fake.url, "--runs", "runs", cwd=tmp_path)
    assert "model calls made: 0" in again.stdout and "cached True" in again.stdout
    assert fake.stats()["requests"] == 2


def test_unknown_model_is_one_actionable_line(tmp_path):
    out = bench("smoke", "--model", "nonsense-model", cwd=tmp_path)
    assert out.returncode == 2
    assert "nonsense-model" in out.stderr and "provider/model" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "runs").exists()  # nothing half-written


def test_missing_key_is_named_before_any_call(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = bench("smoke", "--model", "openai/gpt-4o-mini", cwd=tmp_path)
    assert out.returncode == 2 and "OPENAI_API_KEY" in out.stderr and "nothing was called" in out.stderr
