"""Checks that run code: a researcher's Python function (`kind: python`: its return kinds, an exception, a time
limit, results cached by the module's source and the inputs) and an answer's code against tests in bubblewrap
(`kind: code`: a pass, a failure, an endless loop, no network to a listener on loopback, no file written outside
the sandbox, no environment), and the refusal of a code check where bubblewrap is missing."""

from __future__ import annotations

import os
import socket
import textwrap
import uuid
from pathlib import Path

import pytest

from bench.config.checks import parse_check, run_check
from bench.config.program_checks import CheckContext
from bench.config.sandbox import bwrap
from bench.core.errors import ParamsError
from bench.models.cache import ResponseCache
from bench.judge.judgments import load_judges
from bench.run import open_run
from bench.testing.grids import grid, judge, model, prompt

needs_bwrap = pytest.mark.skipif(bwrap() is None, reason="bubblewrap is not installed (make setup installs it)")
TESTS = "def test_small():\n    assert add(2, 3) == 5\n\ndef test_zero():\n    assert add(0, 0) == 0\n"


def fenced(code: str) -> str:
    return f"Here it is:\n```python\n{textwrap.dedent(code).strip()}\n```\nDone."


def code_check(**extra) -> object:
    return parse_check({"id": "t", "kind": "code", "tests": TESTS, "timeout_s": 5, **extra})


FUNCTIONS = '''
import os, time
def exact(output, reference, scenario):
    with open(os.path.join(os.path.dirname(__file__), "calls.log"), "a") as fh:
        fh.write(output + "\\n")
    return output.strip() == reference["answer"]
def ratio(output, reference, scenario):
    return {"score": 0.25, "explanation": f"scenario {scenario['id']}"}
def broken(output, reference, scenario):
    raise ValueError("no answer line\\nin " + output)
def slow(output, reference, scenario):
    time.sleep(60)
def wrong(output, reference, scenario):
    return "yes"
'''


def function_check(name: str, **extra) -> object:
    return parse_check({"id": "f", "kind": "python", "function": f"mychecks:{name}", **extra})


def test_a_function_check_scores_what_the_function_returns_and_is_cached(tmp_path):
    (tmp_path / "mychecks.py").write_text(FUNCTIONS)
    ctx = CheckContext({"id": "s1"}, tmp_path, ResponseCache(tmp_path / "cache"))
    ref = {"answer": "Paris"}
    ok = run_check(function_check("exact"), "Paris", ref, context=ctx)
    assert (ok.passed, ok.score, ok.detail) == (True, 1.0, "returned True")
    assert run_check(function_check("exact"), "Rome", ref, context=ctx).score == 0.0
    partial = run_check(function_check("ratio"), "x", ref, context=ctx)
    assert (partial.score, partial.passed, partial.detail) == (0.25, False, "scenario s1")
    assert run_check(function_check("ratio", threshold=0.2), "x", ref, context=ctx).passed
    bad = run_check(function_check("wrong"), "x", ref, context=ctx)
    assert not bad.passed and "not a bool, a number in 0..1" in bad.detail
    # cached by the module's source and the inputs: the same call runs nothing, an edited module runs again
    assert run_check(function_check("exact"), "Paris", ref, context=ctx).passed
    assert (tmp_path / "calls.log").read_text().splitlines() == ["Paris", "Rome"]
    edited = FUNCTIONS.replace('fh.write(output + "\\n")', 'fh.write("v2 " + output + "\\n")')
    (tmp_path / "mychecks.py").write_text(edited)
    assert run_check(function_check("exact"), "Paris", ref, context=ctx).passed
    assert (tmp_path / "calls.log").read_text().splitlines() == ["Paris", "Rome", "v2 Paris"]


def test_a_raising_or_endless_function_fails_its_check_and_grading_goes_on(tmp_path):
    (tmp_path / "mychecks.py").write_text(FUNCTIONS)
    ctx = CheckContext({"id": "s1"}, tmp_path)
    raised = run_check(function_check("broken"), "the output", {}, context=ctx)
    assert not raised.passed and raised.score == 0.0
    assert raised.detail == "mychecks:broken raised ValueError: no answer line\nin the output"
    slow = run_check(function_check("slow", timeout_s=1), "x", {}, context=ctx)
    assert not slow.passed and slow.detail == "mychecks:slow timed out after 1 s"
    assert run_check(function_check("ratio"), "x", {}, context=ctx).score == 0.25  # a fresh worker after the kill
    missing = run_check(parse_check({"id": "f", "kind": "python", "function": "nowhere_at_all:f"}), "x", {},
                        context=ctx)
    assert not missing.passed and "its module is found neither" in missing.detail


@needs_bwrap
def test_code_that_passes_fails_or_partly_passes_scores_so():
    right = run_check(code_check(), fenced("def add(a, b):\n    return a + b"))
    assert (right.passed, right.score, right.detail) == (True, 1.0, "2/2 tests passed")
    wrong = run_check(code_check(), fenced("def add(a, b):\n    print('adding')\n    return a * b"))
    assert (wrong.passed, wrong.score) == (False, 0.0)
    assert wrong.detail == "1/2 tests passed; test_small: AssertionError"
    assert "adding" in wrong.to_dict()["stdout"]
    half = run_check(code_check(partial=True), fenced("def add(a, b):\n    return a * b"))
    assert (half.passed, half.score) == (False, 0.5)
    crashed = run_check(code_check(), fenced("def add(a, b) return 1"))
    assert not crashed.passed and crashed.detail.startswith("failed: SyntaxError")
    asserts = parse_check({"id": "t", "kind": "code", "tests": "assert add(1, 1) == 2"})  # no test_*: the asserts
    assert run_check(asserts, fenced("def add(a, b):\n    return a + b")).passed
    extracted = parse_check({"id": "t", "kind": "code", "tests": TESTS, "extract": "CODE:(.*)"})
    assert run_check(extracted, "CODE:add = lambda a, b: a + b").passed


@needs_bwrap
def test_an_endless_loop_is_killed_at_the_time_limit():
    looping = run_check(code_check(timeout_s=1), fenced("import os\nos.fork()\nwhile True:\n    pass"))
    assert (looping.passed, looping.score) == (False, 0.0)
    assert looping.detail == "timed out after 1 s" and looping.to_dict()["exit"] is None


@needs_bwrap
def test_the_sandbox_reaches_no_listener_on_loopback():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        code = f"""
        import socket
        def add(a, b):
            return a + b
        s = socket.socket()
        s.settimeout(2)
        s.connect(("127.0.0.1", {port}))
        """
        result = run_check(code_check(), fenced(code))
        assert not result.passed and result.detail.startswith("failed: ") and "Error" in result.detail, result
        with pytest.raises(BlockingIOError):
            listener.accept()  # no connection ever reached it
    finally:
        listener.close()


@needs_bwrap
def test_the_sandbox_writes_nowhere_outside_its_folder_and_sees_no_environment(tmp_path):
    outside = tmp_path / f"escaped-{uuid.uuid4().hex}.txt"
    in_tmp = Path("/tmp") / f"bench-escape-{uuid.uuid4().hex}"
    home = Path.home() / f"bench-escape-{uuid.uuid4().hex}"
    os.environ["BENCH_TEST_SECRET"] = "sk-not-for-the-sandbox"
    try:
        code = f"""
        import os
        def add(a, b):
            return a + b
        for target in ({str(outside)!r}, {str(in_tmp)!r}, {str(home)!r}, "/usr/escaped.txt"):
            try:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                open(target, "w").write("x")
            except OSError as exc:
                print("refused", target, exc)
        print("env:", sorted(os.environ))
        open("inside.txt", "w").write("fine")
        """
        result = run_check(code_check(), fenced(code))
    finally:
        del os.environ["BENCH_TEST_SECRET"]
    assert result.passed, result  # the code ran to the end, its tests passed
    for target in (outside, in_tmp, home, Path("/usr/escaped.txt")):
        assert not target.exists(), target
    stdout = result.to_dict()["stdout"]
    assert "BENCH_TEST_SECRET" not in stdout and "sk-not" not in stdout and "env: [" in stdout


def test_a_code_check_without_bubblewrap_is_refused_unless_the_judge_says_sandbox_none(tmp_path, monkeypatch):
    (tmp_path / "code.md").write_text('---\nid: code\nversion: "1"\nmode: automated\nchecks:\n'
                                      '  - {id: t, kind: code, tests: "assert True"}\n---\n')
    for sandbox in ("bwrap", "none"):
        grid(tmp_path / f"{sandbox}.yaml", "http://127.0.0.1:9", name=f"g{sandbox}",
             models=[model("m1", "http://127.0.0.1:9")], prompts=[prompt("p", "Write {topic}.")],
             judges=[judge("j", "http://127.0.0.1:9", rubric=str(tmp_path / "code.md"), sandbox=sandbox)])
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    with pytest.raises(ParamsError, match=r"judge 'j' .*check 't' \(kind: code\) runs answers in bubblewrap, "
                                          r"which is not installed.*sandbox: none"):
        load_judges(open_run(tmp_path / "bwrap.yaml", run_dir=tmp_path / "runs" / "a"))
    assert load_judges(open_run(tmp_path / "none.yaml", run_dir=tmp_path / "runs" / "b"))[0].entry.sandbox == "none"


def test_a_function_whose_module_is_nowhere_is_refused_before_any_request(tmp_path):
    (tmp_path / "fn.md").write_text('---\nid: fn\nversion: "1"\nmode: automated\nchecks:\n'
                                    '  - {id: f, kind: python, function: "mychecks:exact"}\n---\n')
    url = "http://127.0.0.1:9"
    params = grid(tmp_path / "g.yaml", url, models=[model("m1", url)], prompts=[prompt("p", "Write {topic}.")],
                  judges=[judge("j", url, rubric=str(tmp_path / "fn.md"))])
    with pytest.raises(ParamsError, match=r"judge 'j' .*check 'f' \(kind: python\): the module of mychecks:exact "
                                          r"is neither beside the params file"):
        load_judges(open_run(params, run_dir=tmp_path / "runs" / "a"))
    (tmp_path / "mychecks.py").write_text(FUNCTIONS)  # beside the params file: found
    assert load_judges(open_run(params, run_dir=tmp_path / "runs" / "a"))[0].folder == tmp_path
