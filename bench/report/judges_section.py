"""The report's Judges section: how far each judge can be trusted, as `bench judges` says it. Each part with
nothing to show says why in one line ("no reviews yet", …)."""

from __future__ import annotations

import polars as pl

from bench.analysis import Summary
from bench.analysis.judge_audit import audit_table
from bench.report import display as rv
from bench.report.judge_figures import bias_figure, confusion_heatmaps

ABOUT = ("A judge stands in for people: how well it agrees with them is what makes its grades worth reading. Per "
         "judge and criterion, on the answers humans reviewed: Cohen's kappa (quadratic-weighted on rubric scores, "
         "and on pairwise verdicts by their order A>>B … B>>A: 1 is perfect, 0 is chance), exact agreement and "
         "adjacent agreement (within one point; for verdicts, never opposite winners), each with a 95% bootstrap "
         "interval over the reviewed answers. Only blind reviews count (a reviewer who saw the judge's grade is "
         "anchored on it): `not_blind` counts the pairs left out. `state` is `not_enough_reviews` below 10 reviewed "
         "answers (no statistic is given then) and `undefined` when every grade is the same. Then each judge's "
         "confusion with the reviewers, its bias at each human grade, the reviewers' own agreement (the ceiling a "
         "judge can reach) and the bias audit. docs/judges.md says how to read each number and what to do about a "
         "biased judge.")
NO_REVIEWS = ("no reviews yet: every judge reads not_enough_reviews. Review at least 10 answers per judge in "
              "notebooks/04_review.ipynb or with bench review export/apply, then render the report again.")
AGREEMENT_SHOWN = ("judge", "criterion", "n", "items", "kappa", "ci_low", "ci_high", "exact", "exact_ci_low",
                   "exact_ci_high", "adjacent", "adjacent_ci_low", "adjacent_ci_high", "state", "note", "not_blind")


def judges_section(s: Summary) -> None:
    """Display the Judges section: a heading, then each part or why it is empty."""
    ja = s.judges
    if not rv.section("Judges: agreement with human reviews and bias audit", ABOUT,
                      empty=None if s.tables.judgments.height else "no judgments in this run yet."):
        return
    if rv.section("Agreement with human reviews", level=4, empty=None if ja.reviews else _no_reviews(ja.not_blind)):
        rv.note(s.tables.reviewed.line() if s.tables.reviewed is not None else f"{ja.reviews} reviews")
        rv.table(ja.agreement.select(AGREEMENT_SHOWN))
        _confusions(ja.confusions)
    if ja.reviews and rv.section(
            "Bias by human grade", "The judge's mean (judge − human) at each grade the reviewers gave, with a 95% "
            "interval: below 0 the judge is harsher than the reviewers at that grade, above 0 more lenient. A judge "
            "lenient at the bottom and harsh at the top squeezes the scale: its leaderboard differences shrink.",
            level=4, empty=None if ja.bias.height else "no reviewed score (only pairwise verdicts were reviewed)."):
        for judge in ja.bias["judge"].unique(maintain_order=True).to_list():
            rv.figure(bias_figure(ja.bias, judge))
        rv.table(ja.bias)
    if rv.section("Reviewers' own agreement (the ceiling)",
                  "Krippendorff's alpha of the reviewers with each other on the answers two or more of them "
                  "reviewed blind (interval on scores and on verdicts by their order), with a 95% interval over "
                  "those answers: a judge whose kappa reaches it agrees with the reviewers as well as they agree "
                  "among themselves.",
                  level=4, empty=_no_ceiling(ja.ceiling)):
        rv.table(ja.ceiling)
    _audit(s)


def _no_reviews(not_blind: int) -> str:
    """Return the empty state of the agreement table: no review at all, or only reviews that showed the judges."""
    if not not_blind:
        return NO_REVIEWS
    return (f"no blind reviews yet: the {not_blind} review(s) of this run were saved with the judges' grades shown, "
            f"and a reviewer who saw the grade is anchored on it. Review blind (the panel, or bench review export "
            f"without --show-judges) to measure agreement.")


def _confusions(confusions: dict[tuple[str, str], pl.DataFrame]) -> None:
    """Display one figure of heatmaps per judge: its grade (rows) against the reviewers' (columns), counted."""
    judges: dict[str, dict[str, pl.DataFrame]] = {}
    for (judge, criterion), matrix in confusions.items():
        judges.setdefault(judge, {})[criterion] = matrix
    for judge, matrices in judges.items():
        rv.figure(confusion_heatmaps(judge, matrices))


def _no_ceiling(ceiling: pl.DataFrame) -> str | None:
    """Return why the ceiling has nothing to show, or None when some criterion has a value."""
    if ceiling.is_empty():
        return "no reviews yet: the ceiling needs two or more reviewers of the same answers."
    if (ceiling["state"] == "not_enough_reviews").all():
        return "; ".join(sorted(set(ceiling["note"].drop_nulls().to_list())))
    return None


def _audit(s: Summary) -> None:
    """Display the bias audit: one row per judge and measure with its value, interval, state and verdict."""
    table = audit_table(s.audit)
    about = ("Where each judge is biased, whatever the reviews: position (`first_slot_preference`, `flip_rate`), "
             "length (`length_correlation`, `length_gap`, `style_length_coefficient`), self-preference, score collapse "
             "(`modal_share`, `entropy`) and disagreement with the rest of the jury; each with a 95% interval and a "
             "one-line verdict. A measure that does not apply to a judge (no pairwise battles, no jury) says so in "
             "`state`.")
    if rv.section("Bias audit", about, level=4, empty=None if table.height else "no judge to audit."):
        rv.table(table, max_rows=200)
