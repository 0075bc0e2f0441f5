"""Human review of a run's judgments, the layer above tracking: ``Review`` records of answers, blind by default.
``import bench.review`` imports neither ipywidgets nor mlflow."""

from __future__ import annotations

from bench.review.offline import EXPORT_FORMAT, Applied, same_review
from bench.review.panel import ReviewPanel
from bench.review.session import FILTERS, ReviewItem, ReviewSession

__all__ = ["EXPORT_FORMAT", "FILTERS", "Applied", "ReviewItem", "ReviewPanel", "ReviewSession", "same_review"]
