"""Provider Batch APIs: a batched model's requests gathered into batches, submitted once, adopted on resume
(docs/batch-apis.md)."""

from bench.models.batches.ledger import BatchInfo, Ledger, batches_of, summary_line
from bench.models.batch_policy import BatchPolicy

__all__ = ["BatchInfo", "BatchPolicy", "Ledger", "batches_of", "summary_line"]
