"""The `bench` command: `python -m bench` itself (its help, a usage error), the smoke job through the real seam, and
one clear line for bad input (the smoke job in-process, through ``bench.cli.main``)."""

import subprocess
import sys

from bench.testing.in_process import command


def test_python_m_bench_is_the_command_and_a_usage_error_is_one_message(tmp_path):
    def bench(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, cwd=tmp_path,
                              timeout=120)

    shown = bench("--help")
    assert shown.returncode == 0 and "serve-local" in shown.stdout and "sweep" in shown.stdout
    wrong = bench("smoke", "--no-such-option")
    assert wrong.returncode == 2 and "unrecognized arguments: --no-such-option" in wrong.stderr
    assert "usage: bench" in wrong.stderr and "Traceback" not in wrong.stderr and wrong.stdout == ""


def test_smoke_answers_then_the_cache_answers(fake, tmp_path):
    runs = str(tmp_path / "runs")
    first = command(tmp_path, "smoke", "--model", "openai/fake-model", "--api-base", fake.url, "--runs", runs)
    assert first.returncode == 0, first.stderr
    assert "[plain] 'fake answer" in first.stdout and "[json] '{" in first.stdout
    assert "model calls made: 2" in first.stdout
    again = command(tmp_path, "smoke", "--model", "openai/fake-model", "--api-base", fake.url, "--runs", runs)
    assert "model calls made: 0" in again.stdout and "cached True" in again.stdout
    assert fake.stats()["requests"] == 2


def test_unknown_model_is_one_actionable_line(tmp_path):
    out = command(tmp_path, "smoke", "--model", "nonsense-model", "--runs", str(tmp_path / "runs"))
    assert out.returncode == 2
    assert "nonsense-model" in out.stderr and "provider/model" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "runs").exists()  # nothing half-written


def test_missing_key_is_named_before_any_call(tmp_path):
    out = command(tmp_path, "smoke", "--model", "openai/gpt-4o-mini", "--runs", str(tmp_path / "runs"),
                  drop=("OPENAI_API_KEY",))
    assert out.returncode == 2 and "OPENAI_API_KEY" in out.stderr and "nothing was called" in out.stderr
    assert not (tmp_path / "runs").exists()
