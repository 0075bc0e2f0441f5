"""The fake provider's knobs: :data:`DEFAULT_CONFIG` lists every key with its default; :func:`validate_config`
rejects a config whose values have the wrong shape."""

from __future__ import annotations

from typing import Any

from bench.testing.fake_provider.replies import ENCODING_NAMES
from bench.testing.fake_provider.thinking import THINKING_DEFAULTS
from bench.testing.fake_provider.tool_calls import TOOL_DEFAULTS

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
    "echo_auth": False,         # errors echo the request's Authorization (a leaky gateway; a 401 names the key)
    "corrupt_items": 0.0,       # packed judge replies: this fraction of graded items gets an off-scale score
    "served_models": None,      # a list: GET /models lists these, another model gets a 404 (None: any model answered)
    "list_models": True,        # False: GET /models answers 404 (a server that cannot list its models)
    "packed_fault": None,       # packed judge replies: "truncate", "partial" (half the grades) or "wrong_ids" (half)
    "obey_injections": False,   # a judge obeys a grade demanded outside the prompt's data blocks (obedient.py)
    "logprob_alt": 0.3,         # with `logprobs: true`: the neighbouring score's probability (token_probs.py)
    "logprobs_supported": True,  # False: `logprobs: true` is ignored, no reply carries any (a server without them)
    "tokenizer": "words",       # usage counted in words, or "cl100k"/"o200k" tiktoken tokens (as litellm.token_counter)
    # Spend faults: every 200 chat reply is billed in stats "billed" (usage, sent or not; USD at bill_per_mtok).
    "over_limit_tokens": None,  # N: every chat reply is N words long (N tokens for "words"), whatever max_tokens says
    "omit_usage": False,        # chat replies carry no `usage` (still billed)
    "empty_first": 0,           # the first N attempts of every distinct request: an empty reply like rate_empty ...
    "empty_bills_limit": False,  # ... and every empty reply bills the request's max_tokens as completion tokens
    "bill_per_mtok": None,      # {"input", "output"[, "cached_input", "cache_write" (1.25 x input)]}: USD per Mtok
    "prefix_cache": False,      # OpenAI's prompt cache: a seen prefix (≥1,024 tokens) reported as cached_tokens
    "bill_hung_up": False,      # a request whose client hung up before its reply is billed all the same
    # How models differ (quality.py): a default answer names its model; a judge grades it at that model's quality.
    "model_quality": {},        # {model name: 0-1}: how good its answers are graded (default: from its name's hash)
    "judge_bias": {},           # {judge model name: -1..1}: a shift of all its grades, as a share of the scale
    "layout_blind": False,      # a judge's reading ignores message order: the same content reordered grades alike
    "noise": 0.0,               # sd (share of the scale) of a per-arrival draw; 0: same request, same reply
    # Judges with a known bias (biases.py), keyed by the judge model's name, for the bias audit's tests:
    "position_bias": {},        # {judge: p}: with probability p a pairwise verdict is turned to favour the first slot
    "length_bias": {},          # {judge: {"over_chars": N, "bonus": b}}: an answer over N chars gets b more levels
    "favour_model": {},         # {judge: {"model": name, "bonus": b}}: that model's answers likewise get b levels
    "pad_answers": {},          # {model: W}: its default answer gets 0..W filler words (hashed): varied lengths
    "misread_anchor": {},       # {judge: {"criterion", "value", "as", "unless"}}: says `as` for `value` (alignment.py)
    # The Files + Batch API: each batch line is answered like a chat request, never counted in `requests`.
    "batches_supported": True,  # False: every /files and /batches route answers 404 (like vLLM, llama.cpp)
    "batch_delays_s": {},       # seconds a batch stays in each of BATCH_STATUSES_DELAYED (a key left out is 0)
    "batch_line_ms": 0,         # time to answer each line (a poller sees request_counts.completed grow)
    "batch_fail_match": [],     # a line whose prompt contains one of these substrings goes to the error file ...
    "batch_fail_rate": 0.0,     # ... and so does this fraction of the others (drawn from the `seed`ed rng) ...
    "batch_fail_status": 500,   # ... with this HTTP status in its response
    "batch_expire_after": None,  # N: the batch ends "expired" after N lines, the rest error "batch_expired"
    "batch_max_requests": 50000,  # an input file with more lines fails validation (too_many_tasks)
    "batch_max_bytes": 200 * 1024 * 1024,  # a larger input file fails validation (file_too_large)
    "batch_route_fail": {},     # {route: N}: the first N calls of a BATCH_ROUTES route answer 503 (create_lost: after)
    # Output files a provider gets wrong, each line billed (stats batches "lines_billed"); N counts since reset:
    "batch_duplicate_lines": 0,  # the first N answered lines come twice, the second time with different content
    "batch_unknown_lines": 0,   # N extra answered lines whose custom_id no request has
    "batch_unreadable_lines": 0,  # the first N answered lines are written as broken JSON (custom_id, usage intact)
    "batch_drop_metadata": False,  # batches keep no `metadata` (a provider that ignores it)
    **THINKING_DEFAULTS,        # a reasoning model (thinking.py)
    **TOOL_DEFAULTS,            # a tool-using model (tool_calls.py)
}
PACKED_FAULTS = (None, "truncate", "partial", "wrong_ids")
FAULT_KINDS = ("429", "500", "hang", "malformed", "empty", "reset")
TOKENIZERS = tuple(ENCODING_NAMES)
BATCH_ROUTES = ("upload", "get_file", "content", "delete_file", "create", "create_lost", "list_batches",
                "get_batch", "cancel")
BATCH_STATUSES_DELAYED = ("validating", "in_progress", "finalizing", "cancelling")
_SCRIPT_KEYS = {"match", "model", "name", "arguments", "until"}  # of a tool_calls script
_ANCHOR_KEYS = {"criterion", "value", "as", "unless"}  # of a misread_anchor rule


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _require(cfg: dict[str, Any], keys: tuple[str, ...], ok: Any, what: str) -> None:
    """Raise ValueError naming the first of ``keys`` whose value fails ``ok``: it must ``what``."""
    for key in keys:
        if not ok(cfg[key]):
            raise ValueError(f"{key} must {what}, got {cfg[key]!r}")


def validate_config(cfg: dict[str, Any]) -> None:
    """Raise ValueError when a config value has the wrong shape."""
    _require(cfg, ("latency_ms", "latency_jitter_ms", "hang_s", "corrupt_items", *(f"rate_{k}" for k in FAULT_KINDS)),
             lambda v: isinstance(v, (int, float)) and v >= 0, "be a non-negative number")
    _require(cfg, ("served_models",), lambda v: v is None or isinstance(v, list) and all(isinstance(m, str) for m in v),
             "be null or a list of model names")
    validate_spend_config(cfg)
    validate_model_config(cfg)
    _require(cfg, ("fail_first", "fail_status", "seed"), lambda v: isinstance(v, int), "be an integer")
    _require(cfg, ("echo_auth", "layout_blind", "tools_supported"), lambda v: isinstance(v, bool), "be true or false")
    _require(cfg, ("packed_fault",), lambda v: v in PACKED_FAULTS, f"be one of {PACKED_FAULTS}")
    validate_batch_config(cfg)
    replies = cfg["replies"]
    if not isinstance(replies, list) or not all(
        isinstance(r, dict) and isinstance(r.get("match"), str) and ("content" in r or "status" in r)
        for r in replies
    ):
        raise ValueError('replies must be a list of {"match": str, "content": str | "status": int}')


def _by_model(ok: Any) -> Any:
    """A check that a value maps model names to values passing ``ok``."""
    return lambda v: isinstance(v, dict) and all(isinstance(k, str) and ok(x) for k, x in v.items())


def validate_model_config(cfg: dict[str, Any]) -> None:
    """Raise ValueError when a knob of how models differ (quality, biases, thinking, tools) is malformed."""
    for key, lo, hi in (("model_quality", 0.0, 1.0), ("judge_bias", -1.0, 1.0)):
        _require(cfg, (key,), _by_model(lambda x: _number(x) and lo <= x <= hi),
                 f"map model names to numbers in [{lo:g}, {hi:g}]")
    _require(cfg, ("noise",), lambda v: _number(v) and 0 <= v <= 1,
             "be a number in [0, 1] (the sd of a grade's draw, as a share of its scale)")
    _require(cfg, ("position_bias",), _by_model(lambda x: _number(x) and 0 <= x <= 1),
             "map model names to probabilities in [0, 1]")
    _require(cfg, ("length_bias",), _by_model(lambda x: isinstance(x, dict) and set(x) == {"over_chars", "bonus"}
                                              and _int(x["over_chars"]) and x["over_chars"] >= 0 and _int(x["bonus"])),
             'map model names to {"over_chars": N ≥ 0, "bonus": integer levels}')
    _require(cfg, ("favour_model",), _by_model(lambda x: isinstance(x, dict) and set(x) == {"model", "bonus"}
                                               and isinstance(x["model"], str) and _int(x["bonus"])),
             'map model names to {"model": name, "bonus": integer levels}')
    _require(cfg, ("pad_answers",), _by_model(lambda x: _int(x) and x >= 0),
             "map model names to a non-negative number of filler words")
    validate_alignment_config(cfg)
    _require(cfg, ("reasoning_content", "think_tags"), lambda v: isinstance(v, bool) or isinstance(v, list) and all(
        isinstance(m, str) for m in v), "be true, false or a list of model names")
    _require(cfg, ("think_markers",), lambda v: isinstance(v, list) and len(v) == 2 and v[1]
             and all(isinstance(m, str) for m in v), "be [start, end] (end not empty)")
    _require(cfg, ("reasoning_words",), lambda v: _int(v) and v > 0, "be a positive integer")
    _require(cfg, ("tool_calls",), lambda v: isinstance(v, list), "be a list of scripts")
    for n, script in enumerate(cfg["tool_calls"]):
        until = script.get("until", 1) if isinstance(script, dict) else None
        if not (isinstance(script, dict) and set(script) <= _SCRIPT_KEYS and isinstance(script.get("match"), str)
                and isinstance(script.get("name"), str) and script["name"]
                and isinstance(script.get("arguments", {}), (dict, str))
                and isinstance(script.get("model"), (str, type(None))) and _int(until) and until >= 1):
            raise ValueError(f'tool_calls[{n}] must be {{"match": str, "name": str, "arguments": dict | str, '
                             f'"until": int >= 1, "model": str | null}}, got {script!r}')


def validate_alignment_config(cfg: dict[str, Any]) -> None:
    """Raise ValueError when ``misread_anchor`` is malformed."""
    rules = cfg["misread_anchor"]
    shape = ('misread_anchor must map judge model names to {"criterion": str, "value": int, "as": int, '
             '"unless": str or [str, ...]}')
    if not isinstance(rules, dict):
        raise ValueError(f"{shape}, got {rules!r}")
    for name, rule in rules.items():
        ok = (isinstance(name, str) and isinstance(rule, dict) and set(rule) == _ANCHOR_KEYS
              and isinstance(rule["criterion"], str) and _int(rule["value"]) and _int(rule["as"])
              and rule["value"] != rule["as"]
              and (isinstance(rule["unless"], str) and rule["unless"]
                   or isinstance(rule["unless"], list) and rule["unless"]
                   and all(isinstance(t, str) and t for t in rule["unless"])))
        if not ok:
            raise ValueError(f"{shape} (value and as different), got {name!r}: {rule!r}")


def validate_spend_config(cfg: dict[str, Any]) -> None:
    """Raise ValueError when a spend fault knob (over-limit replies, no usage, paid empty replies) is malformed."""
    _require(cfg, ("over_limit_tokens",), lambda v: v is None or _int(v) and v > 0, "be null or a positive integer")
    _require(cfg, ("omit_usage", "empty_bills_limit", "bill_hung_up", "prefix_cache"), lambda v: isinstance(v, bool),
             "be true or false")
    _require(cfg, ("empty_first",), lambda v: _int(v) and v >= 0, "be a non-negative integer")
    _require(cfg, ("bill_per_mtok",), lambda v: v is None or isinstance(v, dict) and {"input", "output"} <= set(v) <= {
        "input", "output", "cached_input", "cache_write"} and all(_number(x) and x >= 0 for x in v.values()),
             'be null or {"input": USD, "output": USD, "cached_input": USD, "cache_write": USD (both optional)}')


def validate_batch_config(cfg: dict[str, Any]) -> None:
    """Raise ValueError when a Batch API knob (or ``tokenizer``) has the wrong shape."""
    _require(cfg, ("logprob_alt",), lambda v: _number(v) and 0 <= v < 1, "be a number in [0, 1)")
    _require(cfg, ("obey_injections", "batches_supported", "batch_drop_metadata", "logprobs_supported"),
             lambda v: isinstance(v, bool), "be true or false")
    _require(cfg, ("tokenizer",), lambda v: v in TOKENIZERS, f"be one of {TOKENIZERS}")
    _require(cfg, ("batch_delays_s",), lambda v: isinstance(v, dict) and set(v) <= set(BATCH_STATUSES_DELAYED)
             and all(_number(s) and s >= 0 for s in v.values()),
             f"map some of {', '.join(BATCH_STATUSES_DELAYED)} to non-negative seconds")
    _require(cfg, ("batch_line_ms", "batch_fail_rate"), lambda v: _number(v) and v >= 0, "be a non-negative number")
    _require(cfg, ("batch_fail_rate",), lambda v: v <= 1, "be at most 1")
    _require(cfg, ("batch_fail_match",), lambda v: isinstance(v, list) and all(isinstance(m, str) and m for m in v),
             "be a list of non-empty strings")
    _require(cfg, ("batch_fail_status",), lambda v: _int(v) and 400 <= v <= 599, "be an HTTP error status (400-599)")
    _require(cfg, ("batch_expire_after",), lambda v: v is None or _int(v) and v >= 0,
             "be null or a non-negative integer")
    _require(cfg, ("batch_route_fail",), lambda v: isinstance(v, dict) and set(v) <= set(BATCH_ROUTES)
             and all(_int(n) and n >= 0 for n in v.values()),
             f"map some of {', '.join(BATCH_ROUTES)} to a non-negative count")
    _require(cfg, ("batch_duplicate_lines", "batch_unknown_lines", "batch_unreadable_lines"),
             lambda v: _int(v) and v >= 0, "be a non-negative integer")
    _require(cfg, ("batch_max_requests", "batch_max_bytes"), lambda v: _int(v) and v > 0, "be a positive integer")
