"""Where a command's output goes, and how it lands there without losing anything.

The policy every command follows (``-o FILE``, ``--out DIR``, MPI's per-rank files):

* an output is never one of the command's inputs — the same file by inode or by resolved path,
  so ``./a.hlo``, a symlink or a hard link to it count: ``check_output_file`` /
  ``check_output_directory`` refuse it before the command runs (exit 2, nothing written);
* a regular file is replaced atomically: the data lands in a hidden temporary file in the
  target's directory, is flushed to disk and renamed over the target, so a reader (or a Ctrl-C)
  never sees half a file. A new file gets mode ``0666 & ~umask`` (``0777`` for scripts), as any
  Unix tool's output does; a replaced file keeps its permission bits; a read-only file is
  refused, not replaced;
* a symlink is written through: its target gets the data, the link stays;
* a character device or a FIFO (``/dev/null``, ``/dev/stdout``, a named pipe) is written in
  place; a directory, block device or socket is refused;
* a directory of outputs (``verify --out DIR``) is new or empty, and each file in it is created
  exclusively: nothing that was there before is ever replaced;
* every error is one sentence naming the path the user gave, never a temporary file.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO, Callable, Iterable, Optional, Union

from neuron_sim.errors import UserError

PathLike = Union[str, "os.PathLike[str]"]

__all__ = ["OutputError", "atomic_write", "atomic_write_text",
           "check_output_directory", "check_output_file", "discard_pending_writes",
           "make_output_directory", "same_file"]

_PENDING: set[str] = set()
"""Temporary files of writes in progress (removed by ``discard_pending_writes``)."""


class OutputError(UserError):
    """An output path that cannot or must not be written (one sentence naming the path)."""


# --------------------------------------------------------------------------------------------
# Checking an output path before the command runs.


def same_file(a: PathLike, b: PathLike) -> bool:
    """Do ``a`` and ``b`` name the same file (same inode, or the same resolved path)?"""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _inputs(inputs: Iterable[Optional[PathLike]]) -> list[PathLike]:
    return [path for path in inputs if path is not None]


def check_output_file(path: PathLike, inputs: Iterable[Optional[PathLike]] = (), *,
                      option: str = "-o") -> None:
    """Refuse ``path`` as the output of ``option`` if it is one of ``inputs`` (None entries
    are skipped), a directory, a block device or socket, read-only, or in a directory that
    does not exist. Raises OutputError."""
    for source in _inputs(inputs):
        if same_file(path, source):
            raise OutputError(f"{option} {path}: is the input {source} of this command; "
                              "writing it would destroy the input, give another path")
    try:
        info = os.stat(path)
    except FileNotFoundError:
        parent = os.path.dirname(os.path.realpath(path))
        if not os.path.isdir(parent):
            raise OutputError(f"{option} {path}: its directory does not exist") from None
        return
    except OSError as exc:
        raise OutputError(f"{option} {path}: cannot be written: {_reason(exc)}") from None
    _refuse_unwritable(path, info, f"{option} {path}")


def _refuse_unwritable(path: PathLike, info: os.stat_result, name: str) -> None:
    """OutputError (the sentence starting with ``name``) for what is never written."""
    if stat.S_ISDIR(info.st_mode):
        raise OutputError(f"{name}: is a directory, not a file")
    if not (stat.S_ISREG(info.st_mode) or _written_in_place(info)):
        raise OutputError(f"{name}: is a {_kind(info)}; only a regular file, a character "
                          "device or a FIFO is written")
    if stat.S_ISREG(info.st_mode) and not os.access(path, os.W_OK):
        raise OutputError(f"{name}: is read-only; refusing to replace it")


def check_output_directory(path: PathLike, inputs: Iterable[Optional[PathLike]] = (), *,
                           option: str = "--out") -> None:
    """Refuse ``path`` as an output directory unless it is new or an empty directory and
    holds none of ``inputs``. Raises OutputError."""
    directory = os.path.realpath(path)
    for source in _inputs(inputs):
        if os.path.commonpath([directory, os.path.realpath(source)]) == directory:
            raise OutputError(f"{option} {path}: holds {source}, an input of this command; "
                              "give a new or empty directory")
    if not os.path.lexists(path):
        return
    if not os.path.isdir(path):
        raise OutputError(f"{option} {path}: is a file, not a directory; give a new or empty "
                          "directory")
    try:
        empty = next(os.scandir(path), None) is None
    except OSError as exc:
        raise OutputError(f"{option} {path}: cannot be read: {_reason(exc)}") from None
    if not empty:
        raise OutputError(f"{option} {path}: is not empty; {option} writes into a new or empty "
                          "directory and never replaces files, give another one")


def make_output_directory(path: PathLike, *, option: str = "--out") -> Path:
    """Create the output directory ``path`` (and its parents) after ``check_output_directory``
    accepted it; an empty directory already there is used as it is."""
    check_output_directory(path, option=option)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{option} {path}: cannot be created: {_reason(exc)}") from None
    return Path(path)


# --------------------------------------------------------------------------------------------
# Writing.


def atomic_write(path: PathLike, write: Callable[[IO[bytes]], None], *, mode: int = 0o666,
                 exclusive: bool = False) -> None:
    """Call ``write`` on a file handle whose data ends up at ``path``, under the policy above.

    ``mode`` is the permission of a new file before the umask (``0o777`` for a script).
    ``exclusive``: never replace anything at ``path`` (OutputError if something is there).
    Raises OutputError naming ``path`` for every failure of the file system.
    """
    if exclusive and os.path.lexists(path):
        raise OutputError(f"{path}: already exists; refusing to replace it")
    target = os.path.realpath(path)
    try:
        info: Optional[os.stat_result] = os.stat(target)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise OutputError(f"{path}: cannot be written: {_reason(exc)}") from None
    if info is not None:
        _refuse_unwritable(path, info, str(path))
        if _written_in_place(info):
            _write_in_place(path, target, write)
            return
    tmp, fd = _create_temporary(path, target, mode)
    try:
        try:
            with os.fdopen(fd, "wb") as handle:
                if info is not None:
                    os.fchmod(handle.fileno(), stat.S_IMODE(info.st_mode))
                write(handle)
                handle.flush()
                os.fsync(handle.fileno())
            _commit(path, tmp, target, exclusive)
        except OSError as exc:
            raise OutputError(f"{path}: cannot be written: {_reason(exc)}") from None
    finally:
        _discard(tmp)


def atomic_write_text(path: PathLike, text: str, *, mode: int = 0o666,
                      exclusive: bool = False) -> None:
    """``text`` as UTF-8 at ``path`` (``atomic_write``)."""
    atomic_write(path, lambda handle: handle.write(text.encode("utf-8")), mode=mode,
                 exclusive=exclusive)


def discard_pending_writes() -> None:
    """Remove the temporary files of writes still in progress: for a process that must end at
    once (an interrupt that native code kept from unwinding) without leaving them behind."""
    for tmp in list(_PENDING):
        _discard(tmp)


def _written_in_place(info: os.stat_result) -> bool:
    return stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode)


def _kind(info: os.stat_result) -> str:
    if stat.S_ISBLK(info.st_mode):
        return "block device"
    if stat.S_ISSOCK(info.st_mode):
        return "socket"
    return "special file"


def _write_in_place(path: PathLike, target: str, write: Callable[[IO[bytes]], None]) -> None:
    """A device or FIFO: written as it is (it has no directory entry to replace)."""
    try:
        with open(target, "wb") as handle:
            write(handle)
            handle.flush()
    except OSError as exc:
        raise OutputError(f"{path}: cannot be written: {_reason(exc)}") from None


def _create_temporary(path: PathLike, target: str, mode: int) -> tuple[str, int]:
    """A new hidden file next to ``target`` and its descriptor, created with ``mode`` (the
    kernel applies the umask); its name is in ``_PENDING`` until it is renamed or removed."""
    directory, name = os.path.split(target)
    while True:
        # Random like secrets.token_hex(4), without importing secrets (and with it hmac,
        # hashlib, random) on every start.
        tmp = os.path.join(directory, f".{name}.{os.urandom(4).hex()}.tmp")
        _PENDING.add(tmp)
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        except FileExistsError:
            _PENDING.discard(tmp)
        except OSError as exc:
            _PENDING.discard(tmp)
            raise OutputError(f"{path}: cannot be written: {_reason(exc)}") from None


def _commit(path: PathLike, tmp: str, target: str, exclusive: bool) -> None:
    """Rename ``tmp`` to ``target``; ``exclusive``: only if nothing is there (a hard link
    fails if the name exists, where a rename would replace it)."""
    if exclusive:
        try:
            os.link(tmp, target)
        except FileExistsError:
            raise OutputError(f"{path}: already exists; refusing to replace it") from None
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                raise
            if os.path.lexists(target):  # a file system without hard links
                raise OutputError(f"{path}: already exists; refusing to replace it") from None
            os.replace(tmp, target)
    else:
        os.replace(tmp, target)
    _sync_directory(os.path.dirname(target))


def _sync_directory(directory: str) -> None:
    """Make the rename durable; a file system that cannot sync a directory is left as it is."""
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _discard(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    except OSError:
        return
    _PENDING.discard(tmp)


def _reason(exc: OSError) -> str:
    """``[Errno 28] No space left on device: '.x.tmp'`` -> ``no space left on device``."""
    text = exc.strerror or type(exc).__name__
    return text[:1].lower() + text[1:]
