"""The response cache: a folder of append-only JSONL files, one per process, read by every process.

Only successes are stored; each process appends whole redacted lines to its own 0600 file: no locks, so it is safe
on a network filesystem (docs/llm-seam.md#the-response-cache).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import re
import secrets
import socket
import threading
import time
import warnings
from binascii import unhexlify
from collections import OrderedDict
from pathlib import Path
from typing import Any

from bench.core.errors import CacheWriteWarning, StoreError
from bench.core.paths import CACHE_ENV, cache_path
from bench.core.secrets import redact
from bench.core.store import os_reason, write_all
from bench.models._json import cache_text, dumps_str, loads

SUFFIX = ".jsonl"
RESCAN_S = 1.0  # a miss re-scans the folder at most this often
RETRY_S = 2.0  # after a failed write, replies wait in memory this long (or for flush)
_CHUNK = 8 << 20  # bytes read at once while indexing
_READERS = 64  # read descriptors kept open (least recently used closed first)
# the start of a cache line: a request key (64 lowercase hex digits), or any key (a JSON string's body)
_KEY_HEX = re.compile(rb'\{"k":"([0-9a-f]{64})",')
_KEY_ANY = re.compile(rb'\{"k":"((?:[^"\\\n]|\\.)*)",')
_HEX64 = re.compile(r"[0-9a-f]{64}")
_OFF_BITS, _LEN_BITS = 48, 32  # a location: file id | line length | offset, packed in one int
_HOST = re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname() or "host")


def _ikey(key: str) -> bytes | str:
    """The index key of a cache key: a request key's 32 bytes (half the memory of its hex), else itself."""
    return bytes.fromhex(key) if len(key) == 64 and _HEX64.fullmatch(key) else key


def _ikey_of(raw: bytes) -> bytes | str:
    """The index key of a key as it is written in a line (the body of a JSON string)."""
    if b"\\" in raw:
        return _ikey(loads(b'"' + raw + b'"'))
    return _ikey(raw.decode("utf-8", "surrogatepass"))


def _pack(fid: int, offset: int, length: int) -> int:
    return (fid << (_OFF_BITS + _LEN_BITS)) | (length << _OFF_BITS) | offset


def _unpack(loc: int) -> tuple[int, int, int]:
    return loc >> (_OFF_BITS + _LEN_BITS), (loc >> _OFF_BITS) & ((1 << _LEN_BITS) - 1), loc & ((1 << _OFF_BITS) - 1)


def request_key(*parts: object) -> str:
    """Return the cache key (sha256 hex) of a request's identity parts (canonical strings and numbers)."""
    return hashlib.sha256("\x1e".join(map(str, parts)).encode("utf-8", "surrogatepass")).hexdigest()


def open_cache(path: str | os.PathLike[str] | None = None, *, root: Path | None = None) -> ResponseCache:
    """Open the response cache at ``path``, else ``$BENCH_CACHE``, else the folder under ``root``'s runs."""
    return ResponseCache(cache_path(root) if path is None else path)


def _line(key: str, value: dict[str, Any]) -> bytes:
    """The line stored for a reply: its value redacted (what is stored, and answered, holds no secret)."""
    encoded = redact(cache_text(value))
    return f'{{"k":{dumps_str(key)},"t":{time.time():.3f},"v":{encoded}}}\n'.encode("utf-8", "surrogatepass")


class ResponseCache:
    """Maps request keys to stored replies (JSON dicts: text, usage with cost, logprobs, ...) in per-process files."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path).expanduser()
        try:
            if self.path.exists() and not self.path.is_dir():
                raise NotADirectoryError(20, "not a folder (the response cache is a folder of files)")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.mkdir(mode=0o700, exist_ok=True)  # its replies hold the user's prompts: no other user reads
            os.listdir(self.path)
        except OSError as exc:
            raise StoreError(f"cannot open the response cache {self.path}: {os_reason(exc)}; fix its permissions, "
                             f"or point {CACHE_ENV} at another folder (the cache only saves repeated calls)") from exc
        self._lock = threading.RLock()
        self._index: dict[bytes | str, int] = {}  # key → packed (file id, length, offset) of its line
        self._files: list[str] = []  # file id → file name
        self._seen: dict[str, list[int]] = {}  # file name → [file id, offset read up to, size last seen]
        self._memory: dict[str, bytes] = {}  # lines not written yet (a failed write): answered, retried
        self._own: str | None = None  # this process's file, once it wrote a reply
        self._fd: int | None = None
        self._pid = os.getpid()
        self._size = 0  # of this process's file: the offset of its next line (its only writer)
        self._readers: OrderedDict[int, int] = OrderedDict()  # file id → read descriptor
        self._next_scan = 0.0
        self._retry_at = 0.0
        self._warned = self._warned_read = False  # a failing cache warns once, not per reply
        self._failure: OSError | None = None  # the last write's error, said at ``flush`` (see ``_write_failed``)
        self.hits = 0
        self.misses = 0
        self._scan()
        atexit.register(self.flush)

    def get(self, key: str) -> dict[str, Any] | None:
        """Return the stored reply for ``key`` (a miss re-scans, at most every ``RESCAN_S``), or None; count it."""
        with self._lock:
            value = self._lookup(key)
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value

    def _lookup(self, key: str) -> dict[str, Any] | None:
        ik = _ikey(key)
        loc = self._index.get(ik)
        if loc is None:
            line = self._memory.get(key)
            if line is not None:
                return self._decode(line, key, ik)
            if time.monotonic() < self._next_scan:
                return None
            self._scan()
            if (loc := self._index.get(ik)) is None:
                return None
        fid, length, offset = _unpack(loc)
        try:
            line = os.pread(self._reader(fid), length, offset)
        except OSError as exc:
            self._readers.pop(fid, None)
            self._read_failed(f"{self._files[fid]}: {os_reason(exc)}")
            return None
        return self._decode(line, key, ik)

    def _decode(self, line: bytes, key: str, ik: bytes | str) -> dict[str, Any] | None:
        """Parse a stored line; an unreadable one is a miss (warned once) and forgotten, so a new reply replaces it."""
        try:
            entry = loads(line.decode("utf-8", "surrogatepass"))
            if entry["k"] == key and isinstance(entry["v"], dict):
                return entry["v"]
            problem = "it holds another key or no reply"
        except (ValueError, KeyError, TypeError) as exc:  # UnicodeDecodeError is a ValueError
            problem = str(exc)
        self._index.pop(ik, None)
        self._read_failed(f"an entry cannot be read ({problem})")
        return None

    def _read_failed(self, problem: str) -> None:
        if not self._warned_read:
            self._warned_read = True
            warnings.warn(f"response cache {self.path}: {problem}; such entries are asked again instead",
                          RuntimeWarning, stacklevel=4)

    def _reader(self, fid: int) -> int:
        fd = self._readers.pop(fid, None)
        if fd is None:
            fd = os.open(self.path / self._files[fid], os.O_RDONLY | os.O_CLOEXEC)
            if len(self._readers) >= _READERS:
                os.close(self._readers.popitem(last=False)[1])
        self._readers[fid] = fd
        return fd

    def held(self, keys: list[str]) -> set[str]:
        """Return which of ``keys`` are cached (re-scanning once if some are not); counts nothing."""
        with self._lock:
            found = {k for k in keys if _ikey(k) in self._index or k in self._memory}
            if len(found) < len(set(keys)):
                self._scan()
                found = {k for k in keys if _ikey(k) in self._index or k in self._memory}
        return found

    def __len__(self) -> int:
        """The number of replies stored in the folder (re-scanned first), not those kept in memory."""
        with self._lock:
            self._scan()
            return len(self._index)

    def _scan(self) -> None:
        """Index the complete lines appended to every file since the last scan (new files too)."""
        started = time.monotonic()
        try:
            names = sorted(n for n in os.listdir(self.path) if n.endswith(SUFFIX) and not n.startswith("."))
        except OSError as exc:
            self._read_failed(f"the folder cannot be listed ({os_reason(exc)})")
            names = []
        bad = 0
        for name in names:
            state = self._seen.get(name)
            if state is None:
                state = self._seen[name] = [len(self._files), 0, -1]
                self._files.append(name)
            if name != self._own:
                bad += self._scan_file(name, state)
        if bad:
            self._read_failed(f"{bad} damaged line(s) skipped")
        self._next_scan = time.monotonic() + max(RESCAN_S, 20 * (time.monotonic() - started))

    def _scan_file(self, name: str, state: list[int]) -> int:
        """Index one file's new complete lines; return how many complete lines were not cache lines."""
        fid, offset, seen = state
        try:
            fd = os.open(self.path / name, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return 0  # removed meanwhile (by hand): its indexed lines fail to read, as misses
        bad, chunk = 0, _CHUNK
        try:
            size = os.fstat(fd).st_size
            while offset < size and size != seen:
                data = os.pread(fd, min(chunk, size - offset), offset)
                end = data.rfind(b"\n") + 1
                if end == 0:  # no whole line: the torn or unfinished last one, or a line longer than a chunk
                    if offset + len(data) >= size or not data:
                        break
                    chunk *= 2
                    continue
                bad += self._index_lines(fid, data, offset, end)
                offset, chunk = offset + end, _CHUNK
            state[1], state[2] = offset, size
        except OSError as exc:
            self._read_failed(f"{name}: {os_reason(exc)}")
        finally:
            os.close(fd)
        return bad

    def _index_lines(self, fid: int, data: bytes, base: int, end: int) -> int:
        """Index the cache lines of ``data[:end]`` (read at ``base``); return how many lines were not cache lines."""
        index, pos, bad, high = self._index, 0, 0, _pack(fid, 0, 0)
        find, fast, slow = data.find, _KEY_HEX.match, _KEY_ANY.match
        while pos < end:
            stop = find(b"\n", pos) + 1  # memchr: much faster than a regular expression over the whole line
            m = fast(data, pos, stop) or slow(data, pos, stop)
            try:
                if m is None:
                    raise ValueError("not a cache line")
                ik = unhexlify(m.group(1)) if m.re is _KEY_HEX else _ikey_of(m.group(1))
                index.setdefault(ik, high | ((stop - pos) << _OFF_BITS) | (base + pos))  # _pack, inlined
            except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
                bad += 1
            pos = stop
        return bad

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store a reply in this process's file before returning (a failed write keeps it in memory for later)."""
        if _ikey(key) in self._index or key in self._memory:
            return
        try:
            line = _line(key, value)
        except (TypeError, ValueError) as exc:
            warnings.warn(f"response cache: a reply cannot be stored ({exc}); it will be asked again",
                          CacheWriteWarning, stacklevel=2)
            return
        with self._lock:
            if _ikey(key) in self._index or key in self._memory:
                return
            self._memory[key] = line  # answered from memory until written
            if time.monotonic() >= self._retry_at:
                self._write_memory()

    def flush(self) -> None:
        """Write the replies a failed write kept in memory; if some still cannot be written, warn once per cache."""
        with self._lock:
            if self._memory:
                self._write_memory()
            exc, warn = self._failure, bool(self._memory) and not self._warned
            self._warned = self._warned or warn
        if warn and exc is not None:
            warnings.warn(f"cannot write the response cache {self.path}: {os_reason(exc)}; replies are kept in "
                          f"memory and written when it can be written (this warning is shown once)",
                          CacheWriteWarning, stacklevel=2)

    def _write_memory(self) -> None:
        """Append every reply kept in memory to this process's file, one line per write."""
        for key, line in list(self._memory.items()):
            ik = _ikey(key)
            if ik in self._index:  # another process's reply was indexed meanwhile: it won
                del self._memory[key]
                continue
            try:
                fd = self._writer()
            except OSError as exc:
                self._write_failed(exc)
                return
            start = self._size
            done, exc = write_all(fd, line)
            if exc is not None:
                self._cut_back(fd, start, done)
                self._write_failed(exc)
                return
            self._size += len(line)
            self._index[ik] = _pack(self._seen[self._own][0], start, len(line))
            del self._memory[key]
        self._retry_at = 0.0

    def _writer(self) -> int:
        """This process's file descriptor, its file created on first use (again in a forked child)."""
        if self._fd is not None and self._pid == os.getpid():
            return self._fd
        if self._fd is not None:  # a forked child: the parent's file stays the parent's
            os.close(self._fd)
            self._fd, self._own = None, None
        name = f"{_HOST}-{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}"
        fd = os.open(self.path / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o600)
        self._fd, self._own, self._pid, self._size = fd, name, os.getpid(), 0
        self._seen[name] = [len(self._files), 0, -1]
        self._files.append(name)
        return fd

    def _cut_back(self, fd: int, start: int, done: int) -> None:
        """Remove the part of a line a failed write left; if that fails too, leave the file for a new one."""
        if not done:
            return
        try:
            os.ftruncate(fd, start)
        except OSError:
            os.close(fd)  # the torn line stays, followed by nothing: readers skip it
            self._fd, self._own = None, None

    def _write_failed(self, exc: OSError) -> None:
        """Keep the error for ``flush`` to say (a stage's own failure message comes first)."""
        self._retry_at = time.monotonic() + RETRY_S
        self._failure = exc

    def close(self) -> None:
        """Write what is kept in memory (if it can be), then close every file."""
        self.flush()
        atexit.unregister(self.flush)
        with self._lock:
            if self._fd is not None and self._pid == os.getpid():
                os.close(self._fd)
            self._fd = None
            while self._readers:
                os.close(self._readers.popitem()[1])
