"""Small text helpers for messages: a share as a percentage, and the progress bar of long jobs (an
exception on one line is `errors.one_line`, which travels with the remote code)."""

from __future__ import annotations

import sys

PROGRESS_DELAY = 2.0  # seconds a job runs before its bar appears: quick commands print nothing
PROGRESS_INTERVAL_NO_TTY = 30.0  # without a terminal (a log file, CI): one progress line at most this often


class _LineWriter:
    """A file for tqdm that writes each refresh as a line of its own: in a log (no terminal), in-place
    refreshes by carriage return pile up into one unreadable line."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> None:
        text = text.replace("\r", "").rstrip()
        if text:
            self.stream.write(text + "\n")

    def flush(self) -> None:
        self.stream.flush()


def progress_bar(total: int, desc: str, unit: str, enabled: bool = True):
    """The progress bar of a long job, on stderr (a tqdm bar): redrawn in place on a terminal; without one,
    a line at most every PROGRESS_INTERVAL_NO_TTY seconds, so a log holds a few lines rather than thousands.
    Nothing for a job done within PROGRESS_DELAY seconds, or with `enabled=False`."""
    from tqdm import tqdm

    tty = sys.stderr.isatty()
    interval = 0.1 if tty else PROGRESS_INTERVAL_NO_TTY
    return tqdm(total=total, desc=desc, unit=f" {unit}", disable=not enabled,
                file=sys.stderr if tty else _LineWriter(sys.stderr), delay=PROGRESS_DELAY, mininterval=interval, maxinterval=max(10.0, interval), dynamic_ncols=tty,
                ascii=not tty)


def pct(x: float, spaced: bool = True) -> str:
    """A share as a percentage with two decimals: '99.50 %' (spaced=False: '99.50%')."""
    return f"{100 * x:.2f}{' ' if spaced else ''}%"
