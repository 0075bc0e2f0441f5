"""The command line and environment of llama.cpp's server (``python -m llama_cpp.server``) for one local model."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from bench.core.errors import LocalModelError
from bench.models.local.weights import INSTALL_HINT, LocalModel

HOST = "127.0.0.1"

# Settings llama_cpp.server reads from the environment (case-insensitive; HOST/PORT override --host/--port, CONFIG_FILE
# every flag): a stray API_KEY or PORT in the user's shell would silently break our server.
_SERVER_ENV_NAMES = frozenset("""
    host port config_file ssl_keyfile ssl_certfile api_key interrupt_requests disable_ping_events
    root_path model model_alias n_gpu_layers split_mode main_gpu tensor_split vocab_only use_mmap
    use_mlock kv_overrides rpc_servers seed n_ctx n_batch n_ubatch n_threads n_threads_batch
    rope_scaling_type rope_freq_base rope_freq_scale yarn_ext_factor yarn_attn_factor
    yarn_beta_fast yarn_beta_slow yarn_orig_ctx mul_mat_q logits_all embedding offload_kqv
    flash_attn last_n_tokens_size lora_base lora_path numa chat_format chat_template_kwargs
    clip_model_path cache cache_type cache_size hf_tokenizer_config_path
    hf_pretrained_model_name_or_path hf_model_repo_id draft_model draft_model_num_pred_tokens
    type_k type_v verbose
""".split())

_SERVER_MODULES = {"llama_cpp": "llama-cpp-python", **dict.fromkeys(
    ("uvicorn", "fastapi", "sse_starlette", "pydantic_settings"), "llama-cpp-python[server]")}


def require_server_packages() -> None:
    """Raise LocalModelError naming the package if llama_cpp's server can't run (without importing it)."""
    for module, package in _SERVER_MODULES.items():
        if importlib.util.find_spec(module) is None:
            raise LocalModelError(f"serving local models needs the Python package {package} (module {module!r} is "
                                  f"not installed); {INSTALL_HINT}")


def child_env() -> dict[str, str]:
    """Return the server's environment: ours minus every variable llama_cpp.server would read as a setting."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in _SERVER_ENV_NAMES}
    env["PYTHONUNBUFFERED"] = "1"  # so the log tail shows the latest messages
    return env


def _cpu_threads() -> int:
    """Return the threads to generate with: $BENCH_LOCAL_THREADS, else every CPU we may use (llama's default: half)."""
    configured = os.environ.get("BENCH_LOCAL_THREADS", "").strip()
    if configured:
        if not configured.isdigit() or int(configured) < 1:
            raise LocalModelError(f"BENCH_LOCAL_THREADS={configured!r} is not a positive number of threads")
        return int(configured)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def logprobs_wanted() -> bool:
    """Return whether the embedded server must serve token logprobs (BENCH_LOCAL_LOGPROBS=1)."""
    return os.environ.get("BENCH_LOCAL_LOGPROBS", "").strip().lower() in ("1", "true", "yes")


def embeddings_wanted() -> bool:
    """Return whether the embedded server must serve /v1/embeddings (BENCH_LOCAL_EMBEDDINGS=1)."""
    return os.environ.get("BENCH_LOCAL_EMBEDDINGS", "").strip().lower() in ("1", "true", "yes")


def server_command(path: Path, port: int, model: LocalModel, n_ctx: int) -> list[str]:
    """Return the argv that serves ``path`` as ``model.name`` on 127.0.0.1:``port``."""
    argv = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--model_alias", model.name,
        "--host", HOST, "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(_cpu_threads()),
        # Default True: a queued request cuts the running *stream* short with [DONE] (silent truncation).
        "--interrupt_requests", "false",
        # Default True where supported: pins the whole model in RAM, fails under low RLIMIT_MEMLOCK.
        "--use_mlock", "false",
        # Default True: vocabulary-wide logits per prompt token (docs/embedded-model.md); logprobs need it
        "--logits_all", "true" if logprobs_wanted() else "false",
        # Default False: /v1/embeddings answers only with it, and the server's memory triples (0.47 -> 1.45 GB
        # after a 1,500-token prompt): BENCH_LOCAL_EMBEDDINGS=1 (docs/judging.md#similarity).
        "--embedding", "true" if embeddings_wanted() else "false",
    ]
    if model.chat_format:
        argv += ["--chat_format", model.chat_format]
    return argv
