"""Human review of a run's judgments, the layer above tracking: ``Review`` records that override a judge.

:class:`ReviewSession` loads a run's items to review (filters in :data:`FILTERS`), validates and saves
overrides against the exact rubric version each judgment used, and exports / applies offline review
files (`bench review export|apply`); each saved review is logged to MLflow when the run was tracked.
:class:`ReviewPanel` is the same session as an ipywidgets panel in a notebook (``notebooks/04_review``).
``import bench.review`` imports neither ipywidgets nor mlflow: each is imported where it is used.
"""

from __future__ import annotations

from bench.review.panel import ReviewPanel
from bench.review.session import EXPORT_FORMAT, FILTERS, Applied, ReviewItem, ReviewSession, same_review

__all__ = ["EXPORT_FORMAT", "FILTERS", "Applied", "ReviewItem", "ReviewPanel", "ReviewSession", "same_review"]
