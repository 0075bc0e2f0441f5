"""Human review of a run's judgments, the layer above tracking: ``Review`` records of answers.

:class:`ReviewSession` loads the items, filters them, validates and saves reviews against the item's rubric
version, and exports / applies offline files; :class:`ReviewPanel` is the same in a notebook. Reviewing is blind
by default (``Review.blind``). ``import bench.review`` imports neither ipywidgets nor mlflow.
"""

from __future__ import annotations

from bench.review.offline import EXPORT_FORMAT, Applied, same_review
from bench.review.panel import ReviewPanel
from bench.review.session import FILTERS, ReviewItem, ReviewSession

__all__ = ["EXPORT_FORMAT", "FILTERS", "Applied", "ReviewItem", "ReviewPanel", "ReviewSession", "same_review"]
