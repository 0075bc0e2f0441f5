"""The fake provider's knobs: :data:`DEFAULT_CONFIG` lists every key with its default; :func:`validate_config`
rejects a config whose values have the wrong shape."""

from __future__ import annotations

from typing import Any

from bench.testing.fake_provider.alignment import validate_alignment_config
from bench.testing.fake_provider.biases import validate_bias_config
from bench.testing.fake_provider.quality import validate_quality_config
from bench.testing.fake_provider.replies import ENCODING_NAMES
from bench.testing.fake_provider.thinking import THINKING_DEFAULTS, validate_thinking_config
from bench.testing.fake_provider.tool_calls import TOOL_DEFAULTS, validate_tools_config

DEFAULT_CONFIG: dict[str, Any] = {
    "latency_ms": 0,            # sleep before answering (the CLI --latency-ms sets the default)
    "latency_jitter_ms": 0,     # plus uniform(0, jitter)
    "rate_429": 0.0,            # random faults, drawn per request in this order of precedence
    "retry_after_s": None,      # Retry-After header value for every 429 (None: no header)
    "rate_500": 0.0,
    "rate_hang": 0.0,           # sleep hang_s, then answer normally (effectively: never)
    "hang_s": 3600.0,
    "rate_malformed": 0.0,      # HTTP 200 whose body is not valid JSON
    "rate_empty": 0.0,          # HTTP 200, content "" and finish_reason "length"
    "rate_reset": 0.0,          # abort the TCP connection (RST) without any HTTP response
    "seed": 0,                  # seed of the random.Random the faults are drawn from
    "fail_first": 0,            # the first N attempts of every distinct request fail ...
    "fail_status": 429,         # ... with this status
    "replies": [],              # [{"match": str, "content": str} | {"match": str, "status": int}], "model": only its
    "require_key": None,        # if set, "Authorization: Bearer <key>" is required (else 401)
    "echo_auth": False,         # error messages echo the request's Authorization header (a leaky gateway):
                                # "...; received Authorization: Bearer <key>" (a 401 also names the key)
    "corrupt_items": 0.0,       # packed judge replies (not the Batch API): this fraction of graded items
                                # gets an off-scale score
    "served_models": None,      # None: GET /models lists nothing and any model is answered; a list: /models
                                # lists these, and a chat request for another model gets a 404
    "list_models": True,        # False: GET /models answers 404 (a server that cannot list its models)
    "packed_fault": None,       # packed judge replies (not the Batch API): "truncate" (JSON cut in half),
                                # "partial" (last half of the grades missing), "wrong_ids" (half the grades
                                # under ids never shown)
    "obey_injections": False,   # a judge that obeys a grade demanded outside the prompt's declared data blocks
                                # (obedient.py: the worst case an injection defence must hold against)
    "logprob_alt": 0.3,         # with `logprobs: true` asked: the probability the reply's logprobs give the
                                # neighbouring allowed value at each JSON score (token_probs.py)
    "logprobs_supported": True,  # False: `logprobs: true` is ignored, no reply carries any (a server without them)
    "tokenizer": "words",       # usage: "words" (word counts), "cl100k" or "o200k" (OpenAI chat tokens counted
                                # with that tiktoken encoding, equal to litellm.token_counter; gpt-4o* use o200k)
    # Spend faults (a provider's bill, which the budget must hold against); every 200 chat reply is billed
    # in stats "billed" (its usage, sent or not; USD at `bill_per_mtok`), batch lines apart.
    "over_limit_tokens": None,  # N: every chat reply is N words long (N tokens for "words"), whatever max_tokens says
    "omit_usage": False,        # chat replies carry no `usage` (still billed)
    "empty_first": 0,           # the first N attempts of every distinct request: HTTP 200, content "" and
                                # finish_reason "length" (like rate_empty) ...
    "empty_bills_limit": False,  # ... and every empty reply bills the request's max_tokens as completion tokens
                                 # (a model that spent its limit before answering), not the usual 1
    "bill_per_mtok": None,      # {"input": USD, "output": USD[, "cached_input": USD, "cache_write": USD]} per million
                                # tokens: stats "billed" counts USD (cached input tokens at cached_input, default
                                # input; a native wire's cache writes at cache_write, default 1.25 x input)
    "prefix_cache": False,      # OpenAI's prompt cache: a prompt prefix seen before, from 1,024 tokens in 128-token
                                # blocks, is reported as usage.prompt_tokens_details.cached_tokens (prefix_cache.py)
    "bill_hung_up": False,      # a request whose client hung up (a kill) before its reply is billed all the same,
                                # as a provider that finishes a reply bills it (billed replies beyond statuses 200)
    # How models differ (quality.py): a default answer names its model; a judge grades it at that model's quality.
    "model_quality": {},        # {model name: 0-1}: how good its answers are graded (default: from its name's hash)
    "judge_bias": {},           # {judge model name: -1..1}: a shift of all its grades, as a share of the scale
    "layout_blind": False,      # a judge's own reading of a request is drawn from its messages in any order: the
                                # same content laid out otherwise gets the same grades (benchmarks/judge_cost.py)
    "noise": 0.0,               # sd (share of the scale) of a per-arrival draw: an identical request (a judge's
                                # repeat, a sample) answers differently, reproducibly; 0: same request, same reply
    # Judges with a known bias (biases.py), keyed by the judge model's name, for the bias audit's tests:
    "position_bias": {},        # {judge: p}: with probability p a pairwise verdict is turned to favour the first slot
    "length_bias": {},          # {judge: {"over_chars": N, "bonus": b}}: an answer over N characters (as shown)
                                # gets b more levels on every score; a pairwise verdict moves b labels towards it
    "favour_model": {},         # {judge: {"model": name, "bonus": b}}: that model's answers likewise get b levels
    "pad_answers": {},          # {model: W}: its default answer gets 0..W filler words (hashed): varied lengths
    "misread_anchor": {},       # {judge: {"criterion", "value", "as", "unless"}}: it says `as` for the true `value`
                                # unless an `unless` text is in its prompt (alignment.py: what `bench align` fixes)
    # The Files + Batch API (/v1/files, /v1/batches); each batch line is answered like a chat request
    # (served_models, replies incl. status matches, tokenizer), never counted in `requests`.
    "batches_supported": True,  # False: every /files and /batches route answers 404 (like vLLM, llama.cpp)
    "batch_delays_s": {},       # seconds a batch stays in a status: {"validating", "in_progress" (before its
                                # first line), "finalizing", "cancelling"}; a key left out is 0
    "batch_line_ms": 0,         # time to answer each line (a poller sees request_counts.completed grow)
    "batch_fail_match": [],     # a line whose prompt contains one of these substrings goes to the error file ...
    "batch_fail_rate": 0.0,     # ... and so does this fraction of the others (drawn from the `seed`ed rng) ...
    "batch_fail_status": 500,   # ... with this HTTP status in its response
    "batch_expire_after": None,  # N: the batch ends "expired" after answering N lines, the rest go to the error
                                 # file with error.code "batch_expired" (None: never expires)
    "batch_max_requests": 50000,  # an input file with more lines fails validation (too_many_tasks)
    "batch_max_bytes": 200 * 1024 * 1024,  # a larger input file fails validation (file_too_large)
    "batch_route_fail": {},     # {route: N}: the first N calls of a files/batches route answer 503, for route in
                                # BATCH_ROUTES; "create_lost" creates the batch, then answers 503 (a lost reply)
    # Output files a provider gets wrong, each line billed all the same (stats batches "lines_billed"); N counts
    # lines since the counters were reset, over all batches:
    "batch_duplicate_lines": 0,  # the first N answered lines come twice, the second time with different content
    "batch_unknown_lines": 0,   # N extra answered lines whose custom_id no request has
    "batch_unreadable_lines": 0,  # the first N answered lines are written as broken JSON (custom_id, usage intact)
    "batch_drop_metadata": False,  # batches keep no `metadata` (a provider that ignores it)
    # A reasoning model (thinking.py): which models think, in `reasoning_content` or inline, and how long.
    **THINKING_DEFAULTS,
    # A tool-using model (tool_calls.py): scripted tool calls, and whether a request may carry `tools` at all.
    **TOOL_DEFAULTS,
}
PACKED_FAULTS = (None, "truncate", "partial", "wrong_ids")
FAULT_KINDS = ("429", "500", "hang", "malformed", "empty", "reset")
TOKENIZERS = tuple(ENCODING_NAMES)
BATCH_ROUTES = ("upload", "get_file", "content", "delete_file", "create", "create_lost", "list_batches",
                "get_batch", "cancel")
BATCH_STATUSES_DELAYED = ("validating", "in_progress", "finalizing", "cancelling")


def validate_config(cfg: dict[str, Any]) -> None:
    """Raise ValueError when a config value has the wrong shape."""
    for key in ("latency_ms", "latency_jitter_ms", "hang_s", "corrupt_items", *(f"rate_{k}" for k in FAULT_KINDS)):
        if not isinstance(cfg[key], (int, float)) or cfg[key] < 0:
            raise ValueError(f"{key} must be a non-negative number, got {cfg[key]!r}")
    served = cfg["served_models"]
    if served is not None and not (isinstance(served, list) and all(isinstance(m, str) for m in served)):
        raise ValueError(f"served_models must be null or a list of model names, got {served!r}")
    validate_spend_config(cfg)
    validate_quality_config(cfg)
    validate_bias_config(cfg)
    validate_alignment_config(cfg)
    validate_thinking_config(cfg)
    validate_tools_config(cfg)
    for key in ("fail_first", "fail_status", "seed"):
        if not isinstance(cfg[key], int):
            raise ValueError(f"{key} must be an integer, got {cfg[key]!r}")
    if not isinstance(cfg["echo_auth"], bool):
        raise ValueError(f"echo_auth must be true or false, got {cfg['echo_auth']!r}")
    if cfg["packed_fault"] not in PACKED_FAULTS:
        raise ValueError(f"packed_fault must be one of {PACKED_FAULTS}, got {cfg['packed_fault']!r}")
    validate_batch_config(cfg)
    replies = cfg["replies"]
    if not isinstance(replies, list) or not all(
        isinstance(r, dict) and isinstance(r.get("match"), str) and ("content" in r or "status" in r)
        for r in replies
    ):
        raise ValueError('replies must be a list of {"match": str, "content": str | "status": int}')


def validate_spend_config(cfg: dict[str, Any]) -> None:
    """Raise ValueError when a spend fault knob (over-limit replies, no usage, paid empty replies) is malformed."""
    n = cfg["over_limit_tokens"]
    if n is not None and not (isinstance(n, int) and not isinstance(n, bool) and n > 0):
        raise ValueError(f"over_limit_tokens must be null or a positive integer, got {n!r}")
    for key in ("omit_usage", "empty_bills_limit", "bill_hung_up", "prefix_cache"):
        if not isinstance(cfg[key], bool):
            raise ValueError(f"{key} must be true or false, got {cfg[key]!r}")
    first = cfg["empty_first"]
    if not (isinstance(first, int) and not isinstance(first, bool) and first >= 0):
        raise ValueError(f"empty_first must be a non-negative integer, got {cfg['empty_first']!r}")
    price = cfg["bill_per_mtok"]
    if price is not None and not (isinstance(price, dict) and {"input", "output"} <= set(price) <= {
            "input", "output", "cached_input", "cache_write"} and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in price.values())):
        raise ValueError(f'bill_per_mtok must be null or {{"input": USD, "output": USD, "cached_input": USD, '
                         f'"cache_write": USD (both optional)}}, got {price!r}')


def validate_batch_config(cfg: dict[str, Any]) -> None:
    """Raise ValueError when a Batch API knob (or ``tokenizer``) has the wrong shape."""
    alt = cfg["logprob_alt"]
    if not (isinstance(alt, (int, float)) and not isinstance(alt, bool) and 0 <= alt < 1):
        raise ValueError(f"logprob_alt must be a number in [0, 1), got {alt!r}")
    if not isinstance(cfg["obey_injections"], bool):
        raise ValueError(f"obey_injections must be true or false, got {cfg['obey_injections']!r}")
    if cfg["tokenizer"] not in TOKENIZERS:
        raise ValueError(f"tokenizer must be one of {TOKENIZERS}, got {cfg['tokenizer']!r}")
    for key in ("batches_supported", "batch_drop_metadata", "logprobs_supported"):
        if not isinstance(cfg[key], bool):
            raise ValueError(f"{key} must be true or false, got {cfg[key]!r}")
    delays = cfg["batch_delays_s"]
    if not (isinstance(delays, dict) and set(delays) <= set(BATCH_STATUSES_DELAYED) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in delays.values())):
        raise ValueError(f"batch_delays_s must map some of {', '.join(BATCH_STATUSES_DELAYED)} to non-negative "
                         f"seconds, got {delays!r}")
    for key in ("batch_line_ms", "batch_fail_rate"):
        if not isinstance(cfg[key], (int, float)) or isinstance(cfg[key], bool) or cfg[key] < 0:
            raise ValueError(f"{key} must be a non-negative number, got {cfg[key]!r}")
    if cfg["batch_fail_rate"] > 1:
        raise ValueError(f"batch_fail_rate must be at most 1, got {cfg['batch_fail_rate']!r}")
    match = cfg["batch_fail_match"]
    if not (isinstance(match, list) and all(isinstance(m, str) and m for m in match)):
        raise ValueError(f"batch_fail_match must be a list of non-empty strings, got {match!r}")
    status = cfg["batch_fail_status"]
    if not (isinstance(status, int) and not isinstance(status, bool) and 400 <= status <= 599):
        raise ValueError(f"batch_fail_status must be an HTTP error status (400-599), got {status!r}")
    expire = cfg["batch_expire_after"]
    if expire is not None and not (isinstance(expire, int) and not isinstance(expire, bool) and expire >= 0):
        raise ValueError(f"batch_expire_after must be null or a non-negative integer, got {expire!r}")
    fails = cfg["batch_route_fail"]
    if not (isinstance(fails, dict) and set(fails) <= set(BATCH_ROUTES) and all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in fails.values())):
        raise ValueError(f"batch_route_fail must map some of {', '.join(BATCH_ROUTES)} to a non-negative count, "
                         f"got {fails!r}")
    for key in ("batch_duplicate_lines", "batch_unknown_lines", "batch_unreadable_lines"):
        if not (isinstance(cfg[key], int) and not isinstance(cfg[key], bool) and cfg[key] >= 0):
            raise ValueError(f"{key} must be a non-negative integer, got {cfg[key]!r}")
    for key in ("batch_max_requests", "batch_max_bytes"):
        if not (isinstance(cfg[key], int) and not isinstance(cfg[key], bool) and cfg[key] > 0):
            raise ValueError(f"{key} must be a positive integer, got {cfg[key]!r}")
