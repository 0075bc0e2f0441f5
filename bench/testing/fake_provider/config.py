"""The fake provider's knobs: latency, injected faults, canned replies, auth and served models.

:data:`DEFAULT_CONFIG` lists every key with its default; :func:`validate_config` rejects a
config whose values have the wrong shape. ``POST /_admin/config`` merges keys over the
current config; ``FakeProvider(**config)`` and ``--config JSON`` set the initial one.
"""

from __future__ import annotations

from typing import Any

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
    "replies": [],              # [{"match": str, "content": str} | {"match": str, "status": int}]
    "require_key": None,        # if set, "Authorization: Bearer <key>" is required (else 401)
    "echo_auth": False,         # error messages echo the request's Authorization header (a leaky gateway):
                                # "...; received Authorization: Bearer <key>" (a 401 also names the key)
    "corrupt_items": 0.0,       # batch replies: this fraction of graded items gets an off-scale score
    "served_models": None,      # None: GET /models lists nothing and any model is answered; a list: /models
                                # lists these, and a chat request for another model gets a 404
    "list_models": True,        # False: GET /models answers 404 (a server that cannot list its models)
    "batch_fault": None,        # batch replies: "truncate" (JSON cut in half), "partial" (last half of the
                                # grades missing), "wrong_ids" (half the grades under ids never shown)
}
BATCH_FAULTS = (None, "truncate", "partial", "wrong_ids")
FAULT_KINDS = ("429", "500", "hang", "malformed", "empty", "reset")


def validate_config(cfg: dict[str, Any]) -> None:
    """Raise ValueError when a config value has the wrong shape."""
    for key in ("latency_ms", "latency_jitter_ms", "hang_s", "corrupt_items", *(f"rate_{k}" for k in FAULT_KINDS)):
        if not isinstance(cfg[key], (int, float)) or cfg[key] < 0:
            raise ValueError(f"{key} must be a non-negative number, got {cfg[key]!r}")
    served = cfg["served_models"]
    if served is not None and not (isinstance(served, list) and all(isinstance(m, str) for m in served)):
        raise ValueError(f"served_models must be null or a list of model names, got {served!r}")
    for key in ("fail_first", "fail_status", "seed"):
        if not isinstance(cfg[key], int):
            raise ValueError(f"{key} must be an integer, got {cfg[key]!r}")
    if not isinstance(cfg["echo_auth"], bool):
        raise ValueError(f"echo_auth must be true or false, got {cfg['echo_auth']!r}")
    if cfg["batch_fault"] not in BATCH_FAULTS:
        raise ValueError(f"batch_fault must be one of {BATCH_FAULTS}, got {cfg['batch_fault']!r}")
    replies = cfg["replies"]
    if not isinstance(replies, list) or not all(
        isinstance(r, dict) and isinstance(r.get("match"), str) and ("content" in r or "status" in r)
        for r in replies
    ):
        raise ValueError('replies must be a list of {"match": str, "content": str | "status": int}')
