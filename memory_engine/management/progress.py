"""A small terminal progress bar for long management commands (no extra dependency)."""

from __future__ import annotations

import sys
import time
from typing import TextIO, cast

from django.core.management.base import BaseCommand


class ProgressBar:
    """``bar = ProgressBar(total, label); bar.advance(n); bar.close()`` — redraws in place on a
    terminal, prints a line every 10% otherwise (logs stay readable). With ``every=N`` it draws
    each time N more items are done instead (a terminal's bar and a log's lines alike), and at
    the end."""

    def __init__(self, total: int, label: str = "", stream: TextIO | None = None, width: int = 30,
                 every: int | None = None) -> None:
        self.total = max(total, 0)
        self.label = label
        self.stream = stream or sys.stderr
        self.width = width
        self.every = every if every and every > 0 else None
        self.done = 0
        self.started = time.monotonic()
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last_decile = -1
        self._last_step = 0
        self._drawn: int | None = None  # how many the last line drawn with ``every`` said were done

    @classmethod
    def for_command(cls, command: BaseCommand, total: int, label: str = "", every: int | None = None) -> ProgressBar:
        """A bar on the command's stderr: the stream under its OutputWrapper, which would end
        every redraw with a newline."""
        return cls(total, label=label, stream=cast(TextIO, command.stderr._out), every=every)

    def advance(self, count: int = 1) -> None:
        self.done += count
        self._draw()

    def _draw(self, final: bool = False) -> None:
        fraction = 1.0 if self.total == 0 else min(self.done / self.total, 1.0)
        elapsed = time.monotonic() - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        filled = int(self.width * fraction)
        line = (f"{self.label} [{'#' * filled}{'.' * (self.width - filled)}] "
                f"{self.done}/{self.total} {fraction:6.1%} {rate:7.1f}/s")
        if self.every is not None:
            # a line (or a redraw) each time ``every`` more are done, and the closing one unless
            # the last already said all
            step = self.done // self.every
            if (step == self._last_step and not final) or (final and not self._tty and self._drawn == self.done):
                return
            self._last_step, self._drawn = step, self.done
            self.stream.write("\r" + line + ("\n" if final else "") if self._tty else line + "\n")
            self.stream.flush()
        elif self._tty:
            self.stream.write("\r" + line + ("\n" if final else ""))
            self.stream.flush()
        else:
            decile = int(fraction * 10)
            # the closing line, unless the last one already said 100%
            if decile != self._last_decile or (final and decile < 10):
                self._last_decile = decile
                self.stream.write(line + "\n")

    def close(self) -> None:
        self._draw(final=True)
