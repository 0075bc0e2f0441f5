"""Where `kind: code` checks run an answer's program: bubblewrap with no network, an empty environment, one
writable temporary folder, rlimits, killed at the time limit. Runners are pluggable: ``RUNNERS[language]``."""

from __future__ import annotations

import math
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

TAIL = 1500  # characters of stdout and stderr kept in a check's details
# root runs each sandbox as a user of its own (no name, no files): only then does the kernel enforce RLIMIT_NPROC,
# and one program's processes never count against another's
_UIDS = 1_000_000 + (os.getpid() % 4096) * 256
_free: list[int] = list(range(_UIDS, _UIDS + 256))
_lock = threading.Lock()
MARK = "\x1ebench-result "  # the harness's last stdout line: the marker, then its JSON


@dataclass(frozen=True)
class Limits:
    seconds: float = 10.0
    memory_mb: int = 512
    file_mb: int = 16
    processes: int = 32


@dataclass(frozen=True)
class Runner:
    """How one language runs: ``files(code, tests)`` names the files written into the sandbox, ``argv`` runs them
    there (its stdout ends with a ``MARK`` line, see the Python harness), ``binds`` are more read-only folders."""

    files: object  # Callable[[str, str], dict[str, str]]
    argv: tuple[str, ...]
    binds: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Ran:
    returncode: int | None  # None: killed at the time limit
    stdout: str
    stderr: str


def bwrap() -> str | None:
    """Return bubblewrap's path, None when it is not installed."""
    return shutil.which("bwrap")


def tail(text: str, n: int = TAIL) -> str:
    return text if len(text) <= n else "…" + text[-n:]


def run(runner: Runner, code: str, tests: str, limits: Limits, sandbox: str = "bwrap") -> Ran:
    """Run ``runner`` on ``code`` and ``tests`` in a fresh folder; ``sandbox: none`` skips bwrap (no isolation)."""
    work, logs = Path(tempfile.mkdtemp(prefix="bench-code-")), Path(tempfile.mkdtemp(prefix="bench-logs-"))
    uid = _take_uid() if os.geteuid() == 0 else None
    try:
        for name, text in runner.files(code, tests).items():  # type: ignore[operator]
            (work / name).write_text(text, encoding="utf-8")
        if uid is not None:
            for p in (work, *work.iterdir()):
                os.chown(p, uid, uid)
        inner = ["/usr/bin/env", "-i"] if sandbox == "none" else _bwrap_argv(work, runner.binds)
        argv = [*_prlimit(limits), *inner, *runner.argv]
        with open(logs / "out", "wb") as out, open(logs / "err", "wb") as err:
            proc = subprocess.Popen(argv, cwd=work, env={}, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    start_new_session=True,
                                    **({"user": uid, "group": uid, "extra_groups": []} if uid is not None else {}))
            try:
                code_ = proc.returncode if _ended(proc, limits.seconds) else None
            finally:
                _kill_group(proc)
        read = lambda n: (logs / n).read_bytes()[-64 * TAIL:].decode("utf-8", "replace")  # noqa: E731
        return Ran(code_, read("out"), read("err"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(logs, ignore_errors=True)
        if uid is not None:
            with _lock:
                _free.append(uid)


def _take_uid() -> int:
    with _lock:
        return _free.pop(0)  # 256 sandboxes at once at most: the threads that run them are fewer


def _ended(proc: subprocess.Popen, seconds: float) -> bool:
    """Wait for ``proc`` up to ``seconds`` on its pidfd (Popen.wait polls, adding up to 50 ms a run)."""
    fd = os.pidfd_open(proc.pid)
    try:
        ready = select.select([fd], [], [], seconds)[0]
    finally:
        os.close(fd)
    return bool(ready) and proc.wait() is not None


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the sandbox's process group (bwrap's pid namespace dies with its init, --die-with-parent)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _prlimit(limits: Limits) -> list[str]:
    mb = 1 << 20
    cpu = math.ceil(limits.seconds) + 1
    return ["prlimit", f"--cpu={cpu}:{cpu}", f"--as={limits.memory_mb * mb}", f"--fsize={limits.file_mb * mb}",
            f"--nproc={limits.processes}", "--core=0", "--"]


def _bwrap_argv(work: Path, binds: tuple[str, ...]) -> list[str]:
    argv = [bwrap() or "bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    for b in binds:
        if not b.startswith("/usr/"):
            argv += ["--ro-bind", b, b]
    return [*argv, "--bind", str(work), "/sandbox", "--chdir", "/sandbox", "--setenv", "HOME", "/sandbox"]


# -- Python: the answer is solution.py; the tests run with its names in scope (HumanEval/MBPP style), and each
# test_* function they define is one test; without any, the tests' own asserts passing is the one test.
_PY_HARNESS = r'''
import json, sys, traceback, types
def last(e): return traceback.format_exception_only(type(e), e)[-1].strip()
out = {"tests": [], "error": None}
try:
    mod = types.ModuleType("solution"); mod.__file__ = "solution.py"; sys.modules["solution"] = mod
    exec(compile(open("solution.py", encoding="utf-8").read(), "solution.py", "exec"), mod.__dict__)
    ns = dict(mod.__dict__, __name__="tests")
    exec(compile(open("tests.py", encoding="utf-8").read(), "tests.py", "exec"), ns)
    for name, fn in list(ns.items()):
        if name.startswith("test_") and getattr(getattr(fn, "__code__", None), "co_filename", "") == "tests.py":
            try:
                fn(); out["tests"].append([name, None])
            except BaseException as e:
                out["tests"].append([name, last(e) or type(e).__name__])
except BaseException as e:
    out["error"] = last(e) or type(e).__name__
sys.stdout.flush()
sys.stdout.write("\n%s%s\n" % (MARK, json.dumps(out)))
'''.replace("MARK", repr(MARK))


def _python() -> tuple[str, tuple[str, ...]]:
    """Return the interpreter answers run on (the system's python3, else this one's base) and what to bind for it."""
    if os.path.exists("/usr/bin/python3"):
        return "/usr/bin/python3", ()
    exe = os.path.realpath(sys.executable)
    return exe, (sys.base_prefix,)


_EXE, _BINDS = _python()
RUNNERS: dict[str, Runner] = {
    "python": Runner(lambda code, tests: {"solution.py": code, "tests.py": tests, "harness.py": _PY_HARNESS},
                     (_EXE, "-I", "-B", "harness.py"), _BINDS),
}
