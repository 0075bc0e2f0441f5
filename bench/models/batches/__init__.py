"""Provider Batch APIs: a batched model's requests gathered into batches, submitted once, adopted on resume.

``batch_api`` (LiteLLM's files/batches calls), ``ledger`` (the run folder's record of every batch), ``lookup``,
``outputs`` and ``lines`` (reading a finished batch's files) and ``queue`` (one endpoint's queue), used by
``LLM.complete`` for every batched request. See docs/batch-apis.md.
"""

from bench.models.batches.ledger import BatchInfo, Ledger, batches_of, summary_line
from bench.models.batch_policy import BatchPolicy

__all__ = ["BatchInfo", "BatchPolicy", "Ledger", "batches_of", "summary_line"]
