"""Provider Batch APIs: a batched model's requests gathered into batches, submitted once, adopted on resume.

``policy`` (the settings of ``batch:``), ``wire`` (LiteLLM's files/batches calls), ``ledger`` (the run
folder's record of every batch), ``lookup`` (whether a batch whose creation is in doubt exists at the
provider), ``outputs`` (a finished batch's files, read line by line), ``lines`` (one request's answer
from them, every billed line counted), ``queue`` (one endpoint's queue: gathering, splitting, polling,
answering, retrying). ``LLM.complete`` (bench.models.client) is the only caller. README, Batch APIs.
"""

from bench.models.batches.ledger import BatchInfo, Ledger, batches_of, summary_line
from bench.models.batches.policy import BatchPolicy

__all__ = ["BatchInfo", "BatchPolicy", "Ledger", "batches_of", "summary_line"]
