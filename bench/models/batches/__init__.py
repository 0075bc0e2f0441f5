"""Provider Batch APIs: a batched model's requests gathered into batches, submitted once, adopted on resume.

``wire`` (LiteLLM's files/batches calls), ``ledger`` (the run
folder's record of every batch), ``lookup`` (whether a batch whose creation is in doubt exists at the
provider), ``outputs`` (a finished batch's files, read line by line), ``lines`` (one request's answer
from them, every billed line counted), ``queue`` (one endpoint's queue: gathering, splitting, polling,
answering, retrying). ``LLM.complete`` (bench.models.client) sends every batched request through ``queue``,
``ledger`` and ``wire``; ``bench.models.batch_policy`` (beside this package) holds the settings of ``batch:`` and
the discount, ``bench.models.preflight`` asks ``wire`` whether a provider has a Batch API, and
``bench sweep`` prints the ledger's ``summary_line``. See docs/batch-apis.md.
"""

from bench.models.batches.ledger import BatchInfo, Ledger, batches_of, summary_line
from bench.models.batch_policy import BatchPolicy

__all__ = ["BatchInfo", "BatchPolicy", "Ledger", "batches_of", "summary_line"]
