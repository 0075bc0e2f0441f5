"""The bias audit's verdicts: one plain line per measure saying what the number means and what to do about it.
A bias is called only when the whole interval lies beyond the unbiased value; else the line says it is too wide."""

from __future__ import annotations

from collections.abc import Callable

from bench.analysis.bias_estimates import Estimate

FLIP_WARN = 0.10  # GPT-4 on MT-Bench flips 12.9% of pairs (FastChat #3911): above this, say what to do
MODAL_WARN = 0.60  # more than this share of grades on one level: the scale has collapsed
ENTROPY_WARN = 0.50  # less than half of the scale's possible spread
DISAGREE_WARN = 0.25  # a quarter of the scale (a point on 1–5) or more from the jury's median on average


def entry(measure: str, e: Estimate, family: str | None, pairwise: bool = False, flips: Estimate | None = None
          ) -> dict:
    """Return the audit entry of one measure: value, interval, n, state and its one-line verdict."""
    return {"value": e.value, "ci_low": e.ci_low, "ci_high": e.ci_high, "n": e.n, "state": e.state,
            "verdict": verdict(measure, e, family, pairwise, flips)}


def verdict(measure: str, e: Estimate, family: str | None = None, pairwise: bool = False,
            flips: Estimate | None = None) -> str:
    """Return the one-line verdict of a measure's estimate (the reason when it has no value); ``pairwise``: the
    judge gives verdicts, not scores; ``flips``: the judge's flip rate, which the first-slot line names."""
    if e.state == "not_applicable":
        return f"not applicable: {e.why}"
    if e.state != "ok" or e.value is None:
        return f"not enough data: {e.why}"
    if measure == "first_slot_preference":
        return _first_slot(e, flips)
    return _WORDS[measure](e, family, pairwise)


def _ci(e: Estimate, pct: bool = False) -> str:
    if e.ci_low is None or e.ci_high is None:
        return "no interval"
    return f"CI {_pct(e.ci_low)}–{_pct(e.ci_high)}" if pct else f"CI {e.ci_low:+.2f} to {e.ci_high:+.2f}"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _side(e: Estimate, unbiased: float) -> int:
    """Return +1 when the interval lies above ``unbiased``, −1 below, 0 when it covers it."""
    if e.ci_low is not None and e.ci_low > unbiased:
        return 1
    if e.ci_high is not None and e.ci_high < unbiased:
        return -1
    return 0


def _beyond(e: Estimate, threshold: float, above: bool) -> str:
    """Return "yes" when the whole interval lies beyond ``threshold``, "maybe" when only the point does, else "no"."""
    point = e.value > threshold if above else e.value < threshold
    whole = _side(e, threshold) == (1 if above else -1)
    return "yes" if whole else "maybe" if point else "no"


def _signed(e: Estimate, null: float, nothing: str, shown: str, found: Callable[[int], str]) -> str:
    """Return "no <nothing> shown: <shown>" when the interval covers ``null``, else ``found(side)``: ``side`` is +1
    when the whole interval lies above ``null``, −1 below."""
    side = _side(e, null)
    return f"no {nothing} shown: {shown}" if side == 0 else found(side)


def _warned(e: Estimate, line: str, threshold: float, above: bool, yes: str, maybe: str) -> str:
    """Return ``line`` followed by ``yes`` when the whole interval lies beyond ``threshold`` (above it, or below
    with ``above`` False), by ``maybe`` when only the point does, by nothing otherwise."""
    found = _beyond(e, threshold, above)
    return line + (yes if found == "yes" else maybe if found == "maybe" else "")


def _first_slot(e: Estimate, flips: Estimate | None = None) -> str:
    shown = (f"the answer shown first wins {_pct(e.value)} of {e.n} decisive verdicts ({_ci(e, True)}); 50% is "
             f"unbiased")
    if _side(e, 0.5) == 0:  # balanced seats say nothing of how often the seats decide: a flip in each direction
        flipped = (f"; flips {_pct(flips.value)} of pairs" if flips is not None and flips.state == "ok"
                   and flips.value is not None else "")
        warn = (" (the seats decide those verdicts, both ways: see flip_rate)" if flipped and flips is not None
                and flips.value > FLIP_WARN else "")
        return f"no net preference for either seat{flipped}{warn}: {shown}"
    return _signed(e, 0.5, "position bias", shown, lambda side: (
        f"prefers the answer shown {'first' if side > 0 else 'second'}: {shown}: trust only swap-consistent "
        f"verdicts (bench asks both orders; count a pair that flips as a tie) or use a less biased judge"))


def _flips(e: Estimate, *_: object) -> str:
    line = (f"the verdict changes when the answers swap seats in {_pct(e.value)} of {e.n} pairs ({_ci(e, True)}); "
            f"0% is fully consistent")
    return _warned(e, line, FLIP_WARN, True,
                   f", and over {_pct(FLIP_WARN)} is a lot: a flipped pair was decided by the seats, so count it as a "
                   f"tie and read the both-order win rates",
                   f"; possibly over {_pct(FLIP_WARN)} (a lot): the interval is too wide to tell, judge more pairs")


def _length(e: Estimate, *_: object) -> str:
    shown = f"Spearman ρ {e.value:+.2f} with answer length over {e.n} answers ({_ci(e)}); 0 is length-blind"
    return _signed(e, 0.0, "length bias", shown, lambda side: (
        f"scores {'rise' if side > 0 else 'fall'} with answer length: {shown}: longer answers may also be "
        f"better, so compare with human scores of the same answers, and anchor the rubric against padding"))


def _length_gap(e: Estimate, *_: object) -> str:
    shown = (f"{e.value:+.2f} points on the longer half of the answers against the other judges, relative to the "
             f"shorter half, over {e.n} answers ({_ci(e)}); 0 is length-blind")
    return _signed(e, 0.0, "length bias against the jury", shown, lambda side: (
        f"gives {'longer' if side > 0 else 'shorter'} answers more than the other judges do: {shown}: the others "
        f"grade the same answers, so this is its own lean, not the answers' worth; anchor the rubric against "
        f"padding or leave it out of the jury"))


def _style(e: Estimate, *_: object) -> str:
    shown = (f"log-odds {e.value:+.2f} per sd of length difference over {e.n} battles ({_ci(e)}); 0 is "
             f"length-blind")
    return _signed(e, 0.0, "length bias", shown, lambda side: (
        f"favours the {'longer' if side > 0 else 'shorter'} answer: {shown}: rank cells by the style-controlled "
        f"ratings"))


def _self(e: Estimate, family: str | None, _: bool) -> str:
    shown = (f"{e.value:+.2f} points on its own family's ({family}) answers against judges of third families, over "
             f"{e.n} answers ({_ci(e)}); 0 is unbiased")
    return _signed(e, 0.0, "self-preference", shown, lambda side: (
        f"grades its own family's answers lower than the other judges do: {shown}" if side < 0 else
        f"prefers its own family's answers: {shown}: do not let it grade its own family's models, or use a "
        f"jury of other families"))


def _collapsed(pairwise: bool) -> str:
    """Return what a collapsed scale means and what to do, for a pairwise or a scoring judge."""
    if pairwise:
        return ("most verdicts are one label: either one side is much stronger or the judge does not discriminate; "
                "compare with human verdicts of the same pairs")
    return ("its grades collapse onto few levels: compare with the reviewers' own spread on the same answers (the "
            "answers may really be alike); if theirs is wider, sharpen the rubric's anchors (an example per level)")


def _modal(e: Estimate, _: str | None, pairwise: bool) -> str:
    what = "verdict" if pairwise else "grade"
    line = f"gives its most common {what} {_pct(e.value)} of the time over {e.n} {what}s ({_ci(e, True)})"
    return _warned(e, line, MODAL_WARN, True, f"; over {_pct(MODAL_WARN)}: {_collapsed(pairwise)}",
                   f"; possibly over {_pct(MODAL_WARN)} (collapsed): the interval is too wide to tell")


def _entropy(e: Estimate, _: str | None, pairwise: bool) -> str:
    scale = "the verdict labels'" if pairwise else "the scale's"
    line = (f"spreads its {'verdicts' if pairwise else 'grades'} over {_pct(e.value)} of {scale} possible entropy "
            f"({_ci(e, True)}); 100% is every level equally often, 0% one level always")
    return _warned(e, line, ENTROPY_WARN, False, f"; under {_pct(ENTROPY_WARN)}: {_collapsed(pairwise)}",
                   f"; possibly under {_pct(ENTROPY_WARN)} (collapsed): the interval is too wide to tell")


def _jury(e: Estimate, _: str | None, pairwise: bool) -> str:
    units = e.unit or ("pairs" if pairwise else "answers")
    line = (f"differs from the median of the other judges by {_pct(e.value)} of the scale on average over {e.n} "
            f"{units} ({_ci(e, True)})")
    return _warned(e, line, DISAGREE_WARN, True,
                   f"; over {_pct(DISAGREE_WARN)} of the scale: read its disagreements with reviews before trusting it",
                   f"; possibly over {_pct(DISAGREE_WARN)} of the scale: the interval is too wide to tell")


_WORDS = {"first_slot_preference": _first_slot, "flip_rate": _flips, "length_correlation": _length,
          "length_gap": _length_gap, "style_length_coefficient": _style, "self_preference": _self, "modal_share": _modal, "entropy": _entropy,
          "jury_disagreement": _jury}
