"""tiktoken encodings for the estimate's token counts, read from a parsed copy once one was made.

tiktoken parses an encoding's file (base64 lines, 100,000 of them for cl100k_base) each time a process first
uses it: 0.3 s of CPU, on the critical path of every `bench sweep` and `bench estimate` (a sweep's kernels start
at the same moment on the same cores). The parsed ranks are kept in bench's cache folder (``marshal``: read in a
few ms, and unable to run code), named by the SHA-256 of the file they come from and tiktoken's version: either changed, the file is parsed again.
A copy that cannot be read or written is no error: the file is parsed, as without one.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import marshal
import os
import tempfile
from pathlib import Path
from typing import Any

from bench.models.local.weights import cache_dir


@functools.cache
def load_encoding(name: str, source: Path) -> Any:
    """Return tiktoken's encoding ``name`` whose file is ``source`` (in a tiktoken cache folder: never downloaded)."""
    import tiktoken  # noqa: PLC0415 (heavy for `import bench`: only a prompt to count needs it)

    try:
        digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    except OSError:
        digest = None
    version = getattr(tiktoken, "__version__", "")  # its pattern and special tokens come from tiktoken's own code
    copy = cache_dir() / "encodings" / f"{name}-{digest}-{version}.marshal"
    if digest is not None:
        with contextlib.suppress(Exception):  # any copy that does not make an encoding is parsed anew
            return tiktoken.Encoding(**marshal.loads(copy.read_bytes()))
    spec = _parse(name, source.parent)
    if digest is not None:
        with contextlib.suppress(OSError, ValueError):
            _write(copy, marshal.dumps(spec))
    return tiktoken.Encoding(**spec)


def _parse(name: str, folder: Path) -> dict[str, Any]:
    """Return the arguments of ``tiktoken.Encoding`` for ``name``, parsed from its file in ``folder``."""
    from tiktoken_ext.openai_public import ENCODING_CONSTRUCTORS  # noqa: PLC0415 (with tiktoken: heavy)

    before = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)  # where LiteLLM itself points tiktoken when it is imported
    try:
        return ENCODING_CONSTRUCTORS[name]()
    finally:
        if before is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = before


def _write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all, readable by this user only."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
