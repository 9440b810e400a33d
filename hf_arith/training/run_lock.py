"""One training run per output folder at a time: a lock file that the running process holds.

The lock is `fcntl.flock` on `<output>/.hf-arith.lock`, a file that names its holder (pid and host).
flock rather than a lock file created with O_EXCL: the kernel releases a flock when its process ends,
however it ends (SIGKILL included), so a killed run never leaves a lock that blocks the next one, and
no pid has to be guessed alive or dead (pids are reused, and a pid from another host means nothing
here). The pid and host in the file only say who holds it, for the refusal, and name a killed run
whose lock was taken over. flock works on local file systems and on NFS (Linux emulates it with
POSIX locks there); on a system without `fcntl` (Windows) runs are not locked. The lock guards against
other processes: a run prepared again in the process that holds it takes it over.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from pathlib import Path

from .recipe import RecipeError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

LOCK_FILE = ".hf-arith.lock"
# The locks this process holds, by folder: a second run prepared in the same process (a `prepare_run`
# kept for inspection, then `train`) takes the lock over instead of refusing itself.
_HELD: dict[str, RunLock] = {}


class FolderLockedError(RecipeError):
    """Another live process is training into the output folder (a one-line RecipeError: the run cannot start)."""


def _holder(text: str) -> dict:
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


class RunLock:
    """The held lock of one output folder; `release()` (or the process ending) lets it go.

    `taken_over` is the holder a previous, dead run left in the file (its pid and host), or None."""

    def __init__(self, folder: Path, fd: int | None, taken_over: dict | None):
        self.folder, self._fd, self.taken_over = folder, fd, taken_over

    @property
    def path(self) -> Path:
        return self.folder / LOCK_FILE

    def release(self) -> None:
        if self._fd is None:
            return
        if _HELD.get(str(self.folder.resolve())) is self:
            del _HELD[str(self.folder.resolve())]
        with contextlib.suppress(OSError):
            self.path.unlink()  # before unlocking: a waiting opener re-checks that it locked the named file
        os.close(self._fd)  # closing the descriptor drops the flock
        self._fd = None

    def __del__(self):
        try:
            self.release()
        except Exception:  # noqa: BLE001 - at interpreter exit module globals may be gone; the kernel drops the flock
            pass


def lock_output(folder: str | os.PathLike) -> RunLock:
    """Lock `folder` (created if missing) for one training run, or raise FolderLockedError naming the
    process that holds it. A lock file left by a run that was killed is taken over (`RunLock.taken_over`);
    a lock this process holds already passes to the new run (the earlier `RunLock` no longer holds it)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_FILE
    if fcntl is None:
        return RunLock(folder, None, None)
    key = str(folder.resolve())
    held = _HELD.get(key)
    if held is not None and held._fd is not None:
        lock, held._fd = RunLock(folder, held._fd, None), None
        _HELD[key] = lock
        return lock
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _holder(os.read(fd, 4096).decode("utf-8", "replace"))
            os.close(fd)
            who = f"process {holder.get('pid', '?')} on {holder.get('host', 'an unknown host')}"
            raise FolderLockedError(f"output folder {folder} is in use: {who} is training into it ({path}); wait "
                                    "for it to end, or choose another --output-dir") from None
        # The holder may have released and unlinked the file between our open and our flock: then the
        # lock is on a file nobody else can see, and the next run would create and lock a new one.
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    previous = _holder(os.read(fd, 4096).decode("utf-8", "replace")) or None
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, (json.dumps({"pid": os.getpid(), "host": socket.gethostname()}) + "\n").encode())
    if previous is not None and previous.get("pid") == os.getpid() and previous.get("host") == socket.gethostname():
        previous = None  # this process's own earlier run, released
    lock = _HELD[key] = RunLock(folder, fd, previous)
    return lock


__all__ = ["LOCK_FILE", "FolderLockedError", "RunLock", "lock_output"]
