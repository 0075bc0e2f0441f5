"""The review panel: an ipywidgets view of a ReviewSession, one item at a time, everything HTML-escaped. Blind by
default: judges' grades appear after a save, or on "Show the judges", which records the review as not blind."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError
from bench.core.flags import flags
from bench.report.display import visible
from bench.report.thumbnails import thumbnail_strip
from bench.report.transcripts import CSS as TRANSCRIPT_CSS, candidate_transcript_html
from bench.review.session import FILTERS, ReviewItem, ReviewSession

KEYS_JS = """
if (!window.__benchReviewKeys) {
  window.__benchReviewKeys = true;
  document.addEventListener('keydown', (e) => {
    if (!e.altKey) return;
    const cls = {KeyN: 'bench-review-next', KeyP: 'bench-review-prev', KeyS: 'bench-review-save'}[e.code];
    const button = cls && document.querySelector('.' + cls);
    if (button) { e.preventDefault(); e.stopPropagation(); button.click(); }
  }, true);
}
"""
STYLE = ("<style>.bench-review pre{white-space:pre-wrap;max-height:16em;overflow:auto;background:#f7f7f9;"
         "padding:6px;margin:2px 0}.bench-review table{border-collapse:collapse;font-size:12px}"
         ".bench-review td,.bench-review th{border-bottom:1px solid #ddd;padding:2px 6px;vertical-align:top;"
         "text-align:left}.bench-review .bench-flag{color:#a33;font-size:12px}"
         ".bench-review .bench-review-hidden{color:#666;font-size:12px}</style>")
PANEL_PX = 320  # the scenario's images, large enough to review an answer about them
HIDDEN = ("<div class='bench-review-hidden'>Judges' grades hidden until you save: a blind review is the only kind "
          "that calibrates the leaderboard. “Show the judges” reveals them, and your review of this item is then "
          "recorded as not blind.</div>")


def _e(value: Any) -> str:
    return html.escape(visible("" if value is None else str(value), None))


def _flag_note(text: str) -> str:
    """A warning beside an answer whose text looks like a verdict or an instruction to the judge."""
    found = flags(text)
    return f' <span class="bench-flag">⚠ {_e(", ".join(found))}</span>' if found else ""


def _answer_html(text: str, cand: Any, judge_saw_thinking: bool = False) -> str:
    """Return an answer as the panel shows it: its transcript, else its text after its thinking folded."""
    if cand is not None and cand.transcript:
        return candidate_transcript_html(cand, css=False)
    thinking = getattr(cand, "reasoning", None)
    fold = (f"<details class='bench-thinking'><summary>thinking ({len(thinking)} characters; "
            f"{'shown' if judge_saw_thinking else 'not shown'} to the judge)</summary><pre>{_e(thinking)}</pre>"
            f"</details>") if thinking else ""
    return f"{fold}<pre>{_e(text)}</pre>"


def _reference_html(reference: dict[str, Any]) -> str:
    """The reference values the judge was shown (``reference:`` in its rubric), a value that is not text as JSON."""
    rows = "".join(f"<tr><th>{_e(k)}</th><td><pre>{_e(v if isinstance(v, str) else json.dumps(v, sort_keys=True))}"
                   f"</pre></td></tr>" for k, v in reference.items())
    return f"<div class='bench-review-reference'><b>Reference shown to the judge</b><table>{rows}</table></div>" \
        if rows else ""


class ReviewPanel:
    """The widgets of one reviewer's session over a run folder; ``show()`` displays them."""

    def __init__(self, run_dir: str | Path, reviewer: str | None = None, filter: str = "random"):
        import ipywidgets as w  # noqa: PLC0415 (only a notebook's panel needs widgets)
        self.session = ReviewSession(run_dir, reviewer)
        self.filter = w.Dropdown(options=[(v, k) for k, v in FILTERS.items()], value=filter, description="Show")
        every = [("every judge", "")] + [(j, j) for j in self.session.judge_ids]
        self.judge = w.Dropdown(options=every, value="", description="Judge")
        self.rubric = w.Dropdown(options=[("every rubric", "")] + [(r, r) for r in self.session.rubric_keys],
                                 value="", description="Rubric")
        self.reviewer = w.Text(value=self.session.reviewer, description="Reviewer", placeholder="your name")
        self.progress = w.HTML()
        self.item_html = w.HTML()
        self.show_judges = w.ToggleButton(value=False, description="Show the judges", icon="eye",
                                          tooltip="reveal the judges' grades before saving: the review is then "
                                                  "recorded as not blind and does not calibrate the leaderboard")
        self.show_judges.add_class("bench-review-show-judges")
        self.judges_html = w.HTML()
        self.controls = w.VBox()
        self.note = w.Textarea(placeholder="note (why the override)", layout=w.Layout(width="60%"))
        self.prev = self._button("◀ Previous (Alt+P)", "bench-review-prev", lambda _: self.move(-1))
        self.save_button = self._button("Save (Alt+S)", "bench-review-save", lambda _: self.save(), style="primary")
        self.next = self._button("Next ▶ (Alt+N)", "bench-review-next", lambda _: self.move(1))
        self.status = w.HTML()
        self.history = w.HTML()
        self.box = w.VBox([w.HTML(STYLE), w.HBox([self.filter, self.judge, self.rubric, self.reviewer]), self.progress, self.item_html,
                           self.controls, self.note, w.HBox([self.prev, self.save_button, self.next]),
                           self.status, self.show_judges, self.judges_html, self.history])
        self.box.add_class("bench-review")
        for box in (self.filter, self.judge, self.rubric):
            box.observe(lambda _: self._refilter(), names="value")
        self.show_judges.observe(lambda _: self._show_judges(), names="value")
        self.items: list[ReviewItem] = []
        self.index = 0
        self._refilter()

    @staticmethod
    def _button(label: str, cls: str, on_click: Any, style: str = "") -> Any:
        import ipywidgets as w  # noqa: PLC0415 (only a notebook's panel needs widgets)
        b = w.Button(description=label, button_style=style, layout=w.Layout(width="auto"))
        b.add_class(cls)
        b.on_click(on_click)
        return b

    def show(self) -> None:
        """Display the panel and install the keyboard shortcuts."""
        from IPython.display import Javascript, display  # noqa: PLC0415 (IPython: only inside a notebook kernel)
        display(self.box)
        display(Javascript(KEYS_JS))

    def _refilter(self) -> None:
        self.items = self.session.select(self.filter.value, judge=self.judge.value or None,
                                         rubric=self.rubric.value or None)
        self.index = 0
        self._render()

    def move(self, step: int) -> None:
        """Go to the next (+1) or previous (−1) item of the filter."""
        if self.items:
            self.index = (self.index + step) % len(self.items)
        self.status.value = ""
        self._render()

    @property
    def item(self) -> ReviewItem | None:
        return self.items[self.index] if self.items else None

    def _render(self) -> None:
        done, total = self.session.progress()
        it = self.item
        where = (f"item {self.index + 1} of {len(self.items)} ({_e(FILTERS[self.filter.value])}) · "
                 f"{_e(it.rubric)}") if it else f"no item matches “{_e(FILTERS[self.filter.value])}”"
        blind = len(self.session.reviewed.blind)  # bench.core.reviewed: the count the report gives
        self.progress.value = f"<b>{done} of {total} answers reviewed</b> ({blind} blind) · {where}"
        self.item_html.value = self._item_html(it) if it else ""
        self.show_judges.value = False  # each item starts blind
        self._show_controls()
        self._show_judges()

    def judges_visible(self) -> bool:
        """Return whether the judges' grades are shown (on purpose, or after this reviewer's review): then not blind."""
        it = self.item
        return it is not None and (self.show_judges.value or
                                   it.latest_review(self.reviewer.value.strip() or None) is not None)

    def _item_html(self, it: ReviewItem) -> str:
        fields = it.scenario.fields if it.scenario else {}
        scen = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in fields.items()
                       if k not in ("response_A", "response_B"))
        sides = ["A", "B"] if it.pairwise else [""]
        records = it.answers or [None] * len(it.texts)
        answers = "".join(f"<div><b>{'Conversation' if c is not None and c.transcript else 'Answer'} {s}</b>"
                          f"{_flag_note(t)}{_answer_html(t, c, it.judge_reasoning)}</div>" for s, t, c in zip(sides, it.texts, records))
        images = thumbnail_strip(self.session.run_dir, it.scenario.images, PANEL_PX) if it.scenario else ""
        if images:
            images = f"<div><b>Images</b> ({'shown' if it.judge_images else 'not shown'} to the judge)</div>{images}"
        style = TRANSCRIPT_CSS if any(c is not None and c.transcript for c in records) else ""
        return f"{style}<table>{scen}</table>{_reference_html(it.reference)}{images}{answers}"

    def _show_judges(self) -> None:
        """Show the judges' grades when :meth:`judges_visible`, else say that they are hidden and why."""
        it = self.item
        if it is None:
            self.judges_html.value = ""
            return
        if not self.judges_visible():
            self.judges_html.value = HIDDEN
            return
        rows = []
        for j in it.judgments:
            grade = (_e(j.verdict) if j.mode == "pairwise" else
                     ", ".join(f"{_e(k)} {v:g}" for k, v in (j.scores or {}).items())
                     + (f" → <b>{j.score:.2f}</b>" if j.score is not None else ""))
            rows.append(f"<tr><td>{_e(j.judge_id)}</td><td>{j.repeat}</td><td>{_e(j.order or j.mode)}</td>"
                        f"<td>{grade or '<i>failed</i>'}</td><td>{_e(j.rationale or j.error)}</td></tr>")
        self.judges_html.value = (f"<table class='bench-review-judges'><tr><th>judge</th><th>repeat</th>"
                                  f"<th>mode/order</th><th>grade</th><th>rationale</th></tr>{''.join(rows)}</table>")

    def _show_controls(self) -> None:
        import ipywidgets as w  # noqa: PLC0415 (only a notebook's panel needs widgets)
        it = self.item
        if it is None:
            self.controls.children, self.history.value = (), ""
            return
        j = it.anchor
        rubric = self.session.rubric(j)
        latest = it.latest_review(self.reviewer.value.strip() or None)  # your own review: never a judge's grade
        if j.mode == "pairwise":
            self.controls.children = (w.ToggleButtons(options=list(rubric.labels),
                                                      value=latest.verdict if latest else None,
                                                      description="verdict"),)
        else:
            current = (latest.scores if latest else None) or {}
            self.controls.children = tuple(
                w.ToggleButtons(options=c.levels, value=int(current[c.id]) if c.id in current else None,
                                description=c.id, tooltips=[c.anchors[level][:200] for level in c.levels],
                                style={"button_width": "42px"})
                for c in rubric.criteria)
        self.note.value = latest.note if latest else ""
        self.history.value = self._history_html(it)

    def _history_html(self, it: ReviewItem) -> str:
        rows = [f"<li>{_e(r.created_at[:19])} <b>{_e(r.reviewer)}</b>: "
                f"{_e(r.verdict) if r.verdict else ', '.join(f'{_e(k)} {v:g}' for k, v in (r.scores or {}).items())}"
                f"{' — ' + _e(r.note) if r.note else ''}{'' if r.blind else ' (judges shown)'}</li>"
                for r in it.reviews]
        return f"<div class='bench-review-history'><b>Reviews</b><ul>{''.join(reversed(rows))}</ul></div>" if rows else ""

    def values(self) -> dict[str, Any]:
        """Return what the controls say: ``{"verdict": …}`` or ``{"scores": {criterion: value}}``."""
        controls = self.controls.children
        if len(controls) == 1 and controls[0].description == "verdict":
            return {"verdict": controls[0].value}
        return {"scores": {c.description: c.value for c in controls if c.value is not None}}

    def save(self) -> None:
        """Save a Review of the current item with the controls' values (blind unless the judges were shown)."""
        it = self.item
        if it is None:
            return
        try:
            review = self.session.save(it.anchor.id, note=self.note.value, reviewer=self.reviewer.value.strip(),
                                       blind=not self.judges_visible(), **self.values())
        except BenchError as err:
            self.status.value = f"<span style='color:#b00'>Not saved: {_e(err)}</span>"
            return
        key = self.item.key if self.item else None
        self.items = [next((i for i in self.session.items if i.key == it.key), it) for it in self.items]
        self.status.value = (f"<span class='bench-review-saved'>Saved {_e(review.id)} by {_e(review.reviewer)}"
                             f"{' (blind)' if review.blind else ' (judges shown: not blind)'}: "
                             f"{_e(review.verdict or ', '.join(f'{k} {v:g}' for k, v in (review.scores or {}).items()))}"
                             f"</span>")
        self.index = next((n for n, it in enumerate(self.items) if it.key == key), self.index)
        status = self.status.value
        self._render()
        self.status.value = status
