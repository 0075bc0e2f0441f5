"""Progress bars that work in JupyterLab (widgets) and in papermill logs and terminals (text lines)."""

from __future__ import annotations

import sys
import time


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython  # noqa: PLC0415
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


class Progress:
    """Overall and per-group counters (e.g. per model), shown as bars or as periodic text lines.

    ``mode``: "widgets" (tqdm bars in a notebook), "text" (a line at most every
    ``every_s`` seconds: what papermill's ``--log-output`` streams), "none", or "auto"
    (widgets inside a Jupyter kernel, text elsewhere). `bench sweep` passes "text".
    """

    def __init__(self, title: str, totals: dict[str, int], mode: str = "auto", every_s: float = 2.0):
        self.title, self.totals, self.every_s = title, dict(totals), every_s
        self.done = {k: 0 for k in totals}
        self.failed = 0
        self.mode = ("widgets" if _in_kernel() else "text") if mode == "auto" else mode
        self._t0 = self._last = time.monotonic()
        self._bars = self._make_bars() if self.mode == "widgets" else {}

    def _make_bars(self) -> dict:
        from tqdm.auto import tqdm  # noqa: PLC0415

        bars = {"": tqdm(total=sum(self.totals.values()), desc=self.title)}
        for key, total in self.totals.items():
            bars[key] = tqdm(total=total, desc=f"  {key}", leave=True)
        return bars

    def update(self, key: str, n: int = 1, failed: bool = False) -> None:
        """Count ``n`` finished items of group ``key`` (and whether they failed)."""
        self.done[key] = self.done.get(key, 0) + n
        self.failed += n if failed else 0
        if self._bars:
            self._bars[""].update(n)
            self._bars[key].update(n)
            if failed:
                self._bars[""].set_postfix(failed=self.failed)
        elif self.mode == "text" and time.monotonic() - self._last >= self.every_s:
            self._print()

    def line(self) -> str:
        """Return the one-line summary: overall, per group, failures and rate."""
        done, total = sum(self.done.values()), sum(self.totals.values())
        rate = done / max(time.monotonic() - self._t0, 1e-9)
        groups = " | ".join(f"{k} {self.done[k]}/{t}" for k, t in self.totals.items())
        pct = 100 * done / total if total else 100.0
        return f"{self.title}: {done}/{total} ({pct:.0f}%) | {groups} | failed {self.failed} | {rate:.1f}/s"

    def _print(self) -> None:
        self._last = time.monotonic()
        print(self.line(), file=sys.stdout, flush=True)

    def close(self) -> None:
        """Finish the bars, or print the final line."""
        for bar in self._bars.values():
            bar.close()
        if self.mode == "text":
            self._print()
