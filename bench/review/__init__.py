"""Human review of a run's judgments, the layer above tracking: ``Review`` records of answers.

:class:`ReviewSession` loads a run's items to review (one per answer and rubric version, whichever
judges and repeats graded it; filters in :data:`FILTERS`), validates and saves reviews against the
exact rubric version the item was graded with, and exports / applies offline review files
(`bench review export|apply`, :mod:`bench.review.offline`); each saved review is logged to MLflow when
the run was tracked. Reviewing is blind by default: the judges' grades stay hidden until the review is
saved, and ``Review.blind`` records it. :class:`ReviewPanel` is the same session as an ipywidgets panel
in a notebook (``notebooks/04_review``). ``import bench.review`` imports neither ipywidgets nor mlflow.
"""

from __future__ import annotations

from bench.review.offline import EXPORT_FORMAT, Applied, same_review
from bench.review.panel import ReviewPanel
from bench.review.session import FILTERS, ReviewItem, ReviewSession

__all__ = ["EXPORT_FORMAT", "FILTERS", "Applied", "ReviewItem", "ReviewPanel", "ReviewSession", "same_review"]
