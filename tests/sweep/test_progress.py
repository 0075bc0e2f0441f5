"""ClusterProgress: a sweep's progress in the driver, read from the run folder the executions write.

Terminal: plain lines, when the counts changed or a heartbeat is due; in a Jupyter kernel: one display,
updated. A real `bench sweep --jobs 3` followed from its run folder: tests/sweep/test_jobs.py.
"""

from __future__ import annotations

import io
import os
import re

import pytest

from bench.core.store import RunStore
from bench.sweep.cluster import ClusterProgress
from bench.testing.grids import ROOT
from bench.testing.records import candidate, judgment
from tests.core.test_progress import outputs



TIMED = r" · \d+:\d\d elapsed( · \d+\.\d records/s)?$"  # the time elapsed and the rate: they depend on time


def shown(out: io.StringIO) -> list[str]:
    """The lines printed, each checked to end with the time elapsed, without it and the rate."""
    lines = out.getvalue().splitlines()
    assert all(re.search(TIMED, line) for line in lines), lines
    return [re.sub(TIMED, "", line) for line in lines]


def test_terminal_lines_only_when_counts_change_or_a_heartbeat_is_due(tmp_path):
    out = io.StringIO()
    progress = ClusterProgress(tmp_path, {"gpt-x": 4, "llama": 4}, 8, mode="text", every_s=0, heartbeat_s=3600,
                               out=out)
    a, b = RunStore(tmp_path, shard="a"), RunStore(tmp_path, shard="b")
    a.append([candidate("s0", model_id="gpt-x"), candidate("s1", model_id="gpt-x")])
    progress.update()
    progress.update()  # nothing changed, no heartbeat due: no line
    b.append([candidate("s0", model_id="llama", error="HTTP 500")])
    b.append([judgment(candidate("s0", model_id="gpt-x"), judge_id="grader")])
    progress.update()
    lines = shown(out)
    assert lines == ["collect 2/8 (25%) · gpt-x 2/4 · llama 0/4 · judged 0/8 (0%) · failed 0",
                     "collect 3/8 (38%) · gpt-x 2/4 · llama 1/4 · judged 1/8 (12%) · failed 1"], lines
    assert progress.printed == 2

    progress.heartbeat_s = 0  # a heartbeat due at every update: the same counts shown again
    progress.update()
    assert shown(out)[-1] == lines[-1] and progress.printed == 3

    a.append([candidate(f"s{i}", model_id="gpt-x") for i in (2, 3)]
             + [candidate(f"s{i}", model_id="llama") for i in (0, 1, 2, 3)])
    final = progress.close()
    assert re.fullmatch(r"collect 8/8 \(100%\) · gpt-x 4/4 · llama 4/4 · judged 1/8 \(12%\) · failed 0 · "
                        r"\d+:\d\d elapsed · \d+\.\d records/s", final), final  # llama's failure was retried: a success now; the rate
    assert out.getvalue().splitlines()[-1] == final and progress.printed == 4
    assert progress.close() == final and progress.printed == 4  # closed once


def test_updates_closer_than_every_s_read_nothing(tmp_path):
    out = io.StringIO()
    progress = ClusterProgress(tmp_path, {"m": 3}, mode="text", every_s=3600, out=out)
    RunStore(tmp_path, shard="a").append([candidate("s0")])
    progress.update()
    read = progress.tally.bytes_read
    RunStore(tmp_path, shard="b").append([candidate("s1")])
    progress.update()  # called again right away: the folder is not read
    assert progress.tally.bytes_read == read and shown(out) == ["collect 1/3 (33%) · m 1/3 · failed 0"]
    progress.update(force=True)
    assert progress.tally.bytes_read > read and shown(out)[-1] == "collect 2/3 (67%) · m 2/3 · failed 0"


def test_mode_none_shows_nothing_and_a_bad_mode_is_refused(tmp_path, capsys):
    progress = ClusterProgress(tmp_path, {"m": 1}, mode="none", every_s=0)
    RunStore(tmp_path).append([candidate("s0")])
    assert re.fullmatch(r"collect 1/1 \(100%\) · m 1/1 · failed 0 · 0:\d\d elapsed", progress.update())
    assert progress.printed == 0
    assert progress.close().startswith("collect 1/1 (100%)") and capsys.readouterr().out == ""
    with pytest.raises(ValueError, match="progress mode 'bars'"):
        ClusterProgress(tmp_path, {"m": 1}, mode="bars")


# -- in a Jupyter kernel: one display, updated ------------------------------------------------------------------

@pytest.fixture
def kernel():
    from jupyter_client.manager import KernelManager

    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(ROOT), env=dict(os.environ))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)




def test_in_a_kernel_one_display_is_updated(tmp_path, kernel):
    cell = f"""
from bench.core.store import RunStore
from bench.sweep.cluster import ClusterProgress
from bench.testing.records import candidate
progress = ClusterProgress({str(tmp_path)!r}, {{"gpt-x": 2, "llama": 2}}, every_s=0)
RunStore({str(tmp_path)!r}, shard="a").append([candidate("s0", model_id="gpt-x")])
progress.update()
RunStore({str(tmp_path)!r}, shard="b").append([candidate("s0", model_id="llama"),
                                                candidate("s1", model_id="llama", error="HTTP 500")])
progress.update()
RunStore({str(tmp_path)!r}, shard="a").append([candidate("s1", model_id="gpt-x")])
progress.close()
"""
    msgs = outputs(kernel, kernel.execute(cell))
    assert not [m for m in msgs if m["msg_type"] == "error"], msgs
    assert not [m for m in msgs if m["msg_type"] == "stream"], msgs  # no text lines in a notebook
    shown = [m for m in msgs if m["msg_type"] in ("display_data", "update_display_data")]
    assert [m["msg_type"] for m in shown] == ["display_data", "update_display_data", "update_display_data"]
    assert len({m["content"]["transient"]["display_id"] for m in shown}) == 1  # one display
    texts = [m["content"]["data"]["text/plain"] for m in shown]
    assert re.fullmatch(r"collect 1/4 \(25%\) · gpt-x 1/2 · llama 0/2 · failed 0 · 0:\d\d elapsed", texts[0])
    assert texts[1].startswith("collect 3/4 (75%) · gpt-x 1/2 · llama 2/2 · failed 1")
    assert texts[2].startswith("collect 4/4 (100%) · gpt-x 2/2 · llama 2/2 · failed 1")
    html = shown[-1]["content"]["data"]["text/html"]
    assert html.count("<progress") == 3 and "value='2' max='2'" in html and "4/4 (100%)" in html
