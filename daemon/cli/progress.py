"""Progress of the CLI's long steps on stderr: a bar on a terminal, plain lines otherwise.

:class:`StageProgress` is a ``progress(stage, done, total)`` callback (the signature
:meth:`daemon.engine.Engine.refresh` and :meth:`~daemon.engine.Engine.embed_pending` call)
for ``bsl-lens index`` and for the CLI's waits on a daemon (``search`` waiting for a first
index, ``daemon start --wait``), fed there from the daemon's ``status``. On a terminal each
stage gets a `tqdm <https://tqdm.github.io/>`_ bar (count, rate, ETA); when stderr is a file
or a pipe it prints a dense line per stage at most every :data:`LINE_EVERY_S` seconds and
when the stage ends, e.g. ``dense: embedding 1200/38570 chunks (3%), 11.2/s, ETA 56m 41s``.
Nothing goes to stdout.
"""

from __future__ import annotations

import shutil
import sys
import time
from typing import TextIO

from ..notes import STAGES, UNCOUNTED, duration, progress_line

__all__ = ["LINE_EVERY_S", "STAGES", "UNCOUNTED", "StageProgress", "duration", "progress_line"]

#: Plain (non-terminal) lines: at most one per stage this often (seconds).
LINE_EVERY_S = 10.0


class StageProgress:
    """``progress(stage, done, total)`` on ``stream`` (default stderr): a tqdm bar per stage
    when ``tty`` (default: ``stream.isatty()``), else plain lines (see the module docstring).
    Rate and ETA are measured over the stage's own calls. :meth:`close` ends the bar."""

    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None, every: float = LINE_EVERY_S) -> None:
        self.stream = stream or sys.stderr
        try:
            self.tty = self.stream.isatty() if tty is None else tty
        except (AttributeError, ValueError):
            self.tty = False
        self.every = every
        self._stage = ""
        self._t0 = 0.0
        self._done0 = 0
        self._last_line = 0.0
        self._ended = False
        self._bar = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        """Show ``done`` of ``total`` for ``stage`` (a new stage ends the previous bar or line)."""
        now = time.monotonic()
        if stage != self._stage or done < self._done0:
            self.close()
            self._stage, self._t0, self._done0, self._last_line, self._ended = stage, now, done, 0.0, False
        if self.tty:
            self._draw(stage, done, total)
            return
        if self._ended:
            return
        end = bool(total) and done >= total and stage not in UNCOUNTED
        if end or now - self._last_line >= self.every:
            elapsed = now - self._t0
            rate = (done - self._done0) / elapsed if elapsed >= 1.0 and done > self._done0 else None
            eta = (total - done) / rate if rate and total else None
            print(progress_line(stage, done, total, rate, eta), file=self.stream, flush=True)
            self._last_line = now
            self._ended = end

    def _draw(self, stage: str, done: int, total: int) -> None:
        from tqdm import tqdm

        label, unit = STAGES.get(stage, (stage, ""))
        uncounted = stage in UNCOUNTED or not total
        if self._bar is None or (not uncounted and self._bar.total != total):
            if self._bar is not None:
                self._bar.close()
            size = shutil.get_terminal_size((100, 20))
            extra = {"bar_format": "{desc}... {elapsed}", "total": None} if uncounted else {"total": total}
            if uncounted and total:
                label = f"{label} ({total} {unit})"
            self._bar = tqdm(
                initial=0 if uncounted else done,
                desc=label,
                unit=unit or "it",
                **extra,
                # the size explicitly: a terminal that reports 0x0 (a pty without a size) would
                # make tqdm hide the bar
                file=self.stream,
                ncols=min(size.columns, 120),
                nrows=max(size.lines, 2),
                leave=True,
                mininterval=0.2,
            )
        if not uncounted and done > self._bar.n:
            self._bar.update(done - self._bar.n)
        else:
            self._bar.refresh()

    def close(self) -> None:
        """End the current bar (if any); the next call starts a new stage."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        self._stage = ""
