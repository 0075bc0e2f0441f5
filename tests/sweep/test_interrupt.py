"""Ctrl-C typed on the terminal of a `bench sweep`, as a user presses it (bench.testing.terminal: a pty whose
interrupt character the test writes), with requests held in flight by the fake provider's latency.

A request "started after the Ctrl-C" is one the fake provider began to receive after the moment the interrupt
character was written (its timeline's start, same clock). A request whose send had begun before may arrive after:
there can be at most as many of those as the sweep's cap had slots the provider did not hold at that moment
(``cap - in_flight(T)``, from the same timeline), and the tests press Ctrl-C while the provider holds the whole cap.
"""

from __future__ import annotations

import re
import shlex
import time
from datetime import datetime

import pytest

from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.testing import grids
from bench.testing.grids import bench
from bench.testing.terminal import Terminal
from bench.tracking.mlflow_store import _import_mlflow

CAP, TOPICS = 4, 12  # two prompts: 24 answers, each graded as it arrives (24 judgments), at most 4 requests at once
LINE = re.compile(r"^interrupted: (\d+) of 24 answers and (\d+) of 24 judgments saved in (\S+); (?:(\d+) replies? in "
                  r"flight lost \(paid, and asked again on resume\); )?(\d+) answers and (\d+) judgments left; "
                  r"resume with: (bench sweep .+?)\s*$", re.M)


def judged_grid(tmp_path, url):
    prompts = [grids.prompt("p", "One tip about {topic}."), grids.prompt("q", "Another tip about {topic}.")]
    return grids.grid(tmp_path / "g.yaml", url, topics=TOPICS, prompts=prompts, judges=[grids.judge("grader", url)],
                      limits={"max_concurrency": CAP, "timeout_s": 120, "retries": 0})


def ctrl_c_when_the_cap_is_held(term: Terminal, fake, requests: int) -> float:
    """Press Ctrl-C once ``requests`` were sent and the provider holds the whole cap; return when."""
    term.wait_for(lambda: (s := fake.stats())["requests"] >= requests and s["in_flight"] == CAP,
                  f"{requests} requests and {CAP} in flight")
    return term.press_ctrl_c()


def requests_after(fake, t: float) -> tuple[int, int]:
    """Return (requests the provider began to receive after ``t``, those it held at ``t``), once none is in flight."""
    deadline = time.monotonic() + 60
    while fake.stats()["in_flight"]:  # a request given up by the client ends when the provider sees it go
        assert time.monotonic() < deadline, fake.stats()
        time.sleep(0.05)
    spans = fake.timeline()["spans"]
    return sum(start > t for _m, start, _e in spans), sum(start <= t < end for _m, start, end in spans)


def test_the_first_ctrl_c_sends_nothing_new_saves_what_was_in_flight_and_the_resume_finishes(tmp_path, fake):
    """The default path (MLflow tracking on, a judge grading each answer as it arrives), which went on sending
    until the end before this fix (36 more requests of 48 here): nothing is sent after the Ctrl-C, what was in
    flight is answered and saved, 130 and the resume line; the printed command then finishes without repaying."""
    fake.configure(latency_ms=1500)
    params = judged_grid(tmp_path, fake.url)
    with Terminal(tmp_path, "sweep", str(params)) as term:
        t = ctrl_c_when_the_cap_is_held(term, fake, 10)
        code = term.wait()
    out = term.output.replace("\r", "")
    assert code == 130, out[-3000:]
    started, held = requests_after(fake, t)
    assert started <= CAP - held, (started, held, out[-3000:])
    assert "[collect] Ctrl-C: no new request is sent; waiting up to 10s for the " in out
    assert "Traceback" not in out and "FAILED" not in out and "report:" not in out
    found = LINE.search(out)
    assert found and found[4] is None, out[-2000:]  # nothing lost
    store = RunStore(tmp_path / "runs/g")
    answers, judgments = len(store.done_ids(Candidate)), len(store.done_ids(Judgment))
    assert [int(found[i]) for i in (1, 2, 5, 6)] == [answers, judgments, 24 - answers, 24 - judgments]
    assert answers + judgments == fake.stats()["requests"] < 48  # every reply the provider sent was saved
    assert set(fake.stats()["statuses"]) == {"200"}  # none was given up
    mlflow = _import_mlflow().MlflowClient(f"sqlite:///{tmp_path / 'runs/g/mlflow.db'}")  # the live run: KILLED
    (parent,) = mlflow.search_runs([mlflow.get_experiment_by_name("bench/g").experiment_id],
                                   filter_string="tags.`bench.level` = 'sweep'")
    assert parent.info.status == "KILLED" and parent.data.tags["bench.exit_code"] == "130"

    fake.reset()  # the resume, as printed (without its report and MLflow run): what was saved is not asked again
    resumed = bench(tmp_path, *shlex.split(found[7])[1:], "--no-report", "--no-track")
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert fake.stats()["requests"] == 48 - answers - judgments
    ok = [c.id for c in store.read(Candidate) if c.ok]
    assert len(ok) == len(set(ok)) == 24 and len(store.done_ids(Judgment)) == 24


def test_a_second_ctrl_c_stops_at_once_and_says_how_many_replies_in_flight_it_lost(tmp_path, fake):
    """--jobs 2 (two kernels, one cap held by the driver's lease server), replies that take a minute: the first
    Ctrl-C sends nothing new and waits; the second gives up the replies in flight at once, and says so."""
    fake.configure(latency_ms=60_000)
    params = judged_grid(tmp_path, fake.url)
    with Terminal(tmp_path, "sweep", str(params), "--jobs", "2", "--no-track") as term:
        t = ctrl_c_when_the_cap_is_held(term, fake, CAP)
        term.wait_for(r"^\[collect\.job\d\] Ctrl-C: no new request is sent; waiting", "a kernel waiting")
        term.press_ctrl_c()
        code = term.wait()
    out = term.output.replace("\r", "")
    assert code == 130, out[-3000:]
    started, held = requests_after(fake, t)
    assert started <= CAP - held and held == CAP, (started, held, out[-3000:])
    given_up = [int(n) for n in re.findall(r"^\[collect\.job\d\] Ctrl-C again: stopping at once; the (\d+) "
                                           r"requests in flight are given up", out, re.M)]
    assert sum(given_up) == CAP and "still in flight after" not in out, out[-3000:]  # by the second Ctrl-C, not the
    # drain's timer (an execution still preparing when the first came stopped then, with nothing sent)
    assert "Ctrl-C again: stopping at once; the replies still in flight are lost" in out
    # an execution still preparing at the second Ctrl-C (it had sent nothing) may not have ended yet: the line names
    # it as still stopping; never the one that gave up the requests in flight
    stopping = re.findall(r"; replies in flight in (\S+), still stopping, may be lost", out)
    assert not set(stopping) & set(re.findall(r"^\[(collect\.job\d)\] Ctrl-C again: stopping at once; the [1-9]", out,
                                               re.M)), out[-2000:]
    found = LINE.search(re.sub(r"; replies in flight in \S+, still stopping, may be lost", "", out))
    assert found and int(found[4]) == CAP and (int(found[1]), int(found[2])) == (0, 0), out[-2000:]
    assert "--jobs 2" in found[7]


@pytest.mark.local_model
def test_the_embedded_model_answers_what_it_has_in_flight_and_starts_nothing_after_the_ctrl_c(tmp_path):
    """Collect by the embedded model (llama.cpp, started by the driver in a session of its own): the requests its
    stage had in flight (it says how many) are answered and saved, none lost, and no answer comes after them."""
    gemma = {"id": "gemma", "model": "local/gemma-3-270m", "params": {"temperature": 0.0, "max_tokens": 8}}
    params = grids.grid(tmp_path / "g.yaml", "http://127.0.0.1:9/v1", topics=8, models=[gemma],
                        limits={"max_concurrency": 2, "timeout_s": 120, "retries": 0})
    store = RunStore(tmp_path / "runs/g")
    with Terminal(tmp_path, "sweep", str(params), "--no-track") as term:
        term.wait_for(lambda: store.root.exists() and store.done_ids(Candidate), "a first answer", 600)
        t = term.press_ctrl_c()
        code = term.wait()
    out = term.output.replace("\r", "")
    assert code == 130, out[-3000:]
    drained = re.search(r"^\[collect\] Ctrl-C: no new request is sent; waiting up to 10s for the (\d+) ", out, re.M)
    assert drained, out[-3000:]  # before: the stage cancelled what was in flight, and its replies were lost
    in_flight = int(drained[1])
    late = [c for c in store.read(Candidate) if datetime.fromisoformat(c.created_at).timestamp() > t]  # replies since
    assert len(late) <= in_flight <= 2 and all(c.ok for c in late), out[-3000:]
    found = re.search(r"^interrupted: (\d+) of 8 answers saved in \S+; (\d+) answers left; resume with: bench sweep ",
                      out, re.M)  # and no reply in flight lost
    assert found and int(found[1]) == len(store.done_ids(Candidate)) < 8, out[-3000:]
