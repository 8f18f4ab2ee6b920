"""Writing an output without damaging what is at its path, and reading an input within bounds.

An output path is looked at before anything is written (`check_output`), and written the way
that keeps what the user has there (`write_file`):

* a new file, or an existing regular file we may replace: a temporary file beside it, renamed
  over it, with the old file's mode and owner (atomic: a reader sees the old or the new file);
* a symbolic link: the file it points to is written as above; the link stays a link;
* a regular file with several hard links, or owned by someone whose ownership we cannot give
  the new file, or in a directory we may not write: rewritten in place (same inode, mode,
  owner and links; not atomic);
* `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`: written through the
  descriptor the process holds, whatever it is (a log opened with `>>` is appended to, a pipe
  is written); never reopened or replaced;
* a character or block device or a FIFO (`/dev/null`, a named pipe): opened
  and written, never replaced (a FIFO that no process reads within `FIFO_WAIT_SECONDS` is
  an error rather than a hang);
* a directory, a socket, or a read-only file: an error; nothing is written.

While a temporary file exists, SIGINT, SIGTERM and SIGHUP are held back (and delivered right
after it is renamed or removed), so a signal never leaves a `.tmp` fragment behind. Errors
are OSErrors whose `filename` is the path the user gave, never the temporary file.

Inputs: a regular file is read whole once its first bytes pass the caller's check; a pipe, a FIFO or standard input is read up to
`STREAM_LIMIT` bytes; a named FIFO that no process writes to within `FIFO_WAIT_SECONDS` is an
error rather than a hang; character and block devices (`/dev/zero`, a terminal) are refused.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import select
import signal
import stat
import time
from typing import BinaryIO, Callable, Iterable, Iterator

#: The most bytes read from a pipe, a FIFO or standard input (their size is not known ahead).
STREAM_LIMIT = 2 << 30
#: How much of an input `check_head` sees before the rest is read.
HEAD_BYTES = 64 << 10
#: Looks at the first bytes of an input and raises if they cannot start a module.
HeadCheck = Callable[[bytes], None]
#: How long a named FIFO may stay without a writer (an input) or a reader (an output)
#: before it is an error.
FIFO_WAIT_SECONDS = 10.0
_CHUNK = 1 << 20
_HELD_SIGNALS = frozenset(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


def _error(code: int, message: str, path: str) -> OSError:
    return OSError(code, message, path)


# ------------------------------------------------------------------------------------------
# Outputs


class OutputTarget:
    """Where and how an output path is written (see the module docstring).

    `how`: "replace" (temporary file + rename over `target`), "in_place" (truncate and
    write `target`), "stream" (open and write: a device or FIFO) or "descriptor" (write
    through descriptor `target`, which the process holds: `/dev/stdout`, `/dev/fd/N`). `target` is `path` with
    symbolic links resolved; `existing` its status, None for a new file.
    """

    __slots__ = ("existing", "how", "path", "target")

    def __init__(self, path: str, target: str, how: str, existing: os.stat_result | None = None) -> None:
        self.path = path
        self.target = target
        self.how = how
        self.existing = existing


def _directory_of(path: str) -> str:
    return os.path.dirname(path) or "."


#: Names of a descriptor this process already holds: `/dev/stdout`, `/dev/fd/3`, ...
_DESCRIPTOR_PATH = re.compile(r"/dev/(?:(stdout)|(stderr)|fd/(\d{1,9}))|/proc/(?:self|thread-self|\d{1,9})/fd/(\d{1,9})")


def _descriptor_named(path: str) -> int | None:
    """The descriptor a path names when it is one of ours (`-o /dev/stdout >> log` must
    append to the log through descriptor 1, not replace the file it points to)."""
    m = _DESCRIPTOR_PATH.fullmatch(path)
    if m is None:
        return None
    if m.group(1) or m.group(2):
        return 1 if m.group(1) else 2
    if path.startswith("/proc/") and not path.startswith(("/proc/self/", "/proc/thread-self/", f"/proc/{os.getpid()}/")):
        return None  # another process's descriptor: only its file can be written
    return int(m.group(3) or m.group(4))


def check_output(path: str | os.PathLike[str]) -> OutputTarget:
    """How `path` would be written; OSError (naming `path`) if it cannot be."""
    path = os.fspath(path)
    fd = _descriptor_named(path)
    if fd is not None:
        try:
            existing = os.fstat(fd)
        except OSError:
            raise _error(errno.EBADF, f"cannot write: descriptor {fd} is not open", path) from None
        return OutputTarget(path, str(fd), "descriptor", existing)
    target = os.path.realpath(path) if os.path.islink(path) else path
    try:
        existing = os.stat(target)
    except FileNotFoundError:
        existing = None
    except OSError as exc:  # a symlink loop, a component that is not a directory, ...
        raise _error(exc.errno or errno.EINVAL, exc.strerror or str(exc), path) from None
    directory = _directory_of(target)
    if existing is None:
        if not os.path.isdir(directory):
            raise _error(errno.ENOENT, f"cannot write: directory {directory!r} does not exist", path)
        if not os.access(directory, os.W_OK | os.X_OK):
            raise _error(errno.EACCES, f"cannot write: directory {directory!r} is not writable", path)
        return OutputTarget(path, target, "replace")
    mode = existing.st_mode
    if stat.S_ISDIR(mode):
        raise _error(errno.EISDIR, "cannot write: is a directory", path)
    if stat.S_ISSOCK(mode):
        raise _error(errno.EINVAL, "cannot write: is a socket", path)
    if not os.access(target, os.W_OK) or (stat.S_ISREG(mode) and not mode & 0o222):
        raise _error(errno.EACCES, "cannot write: the file is read-only (not overwritten)", path)
    if not stat.S_ISREG(mode):
        return OutputTarget(path, target, "stream", existing)
    if existing.st_nlink > 1 or not _can_give_owner(existing) or not os.access(directory, os.W_OK | os.X_OK):
        return OutputTarget(path, target, "in_place", existing)
    return OutputTarget(path, target, "replace", existing)


def _can_give_owner(st: os.stat_result) -> bool:
    """Whether a new file of ours can be given `st`'s owner and group."""
    if not hasattr(os, "geteuid"):
        return True
    uid = os.geteuid()
    if uid == 0:
        return True
    return st.st_uid == uid and (st.st_gid == os.getegid() or st.st_gid in os.getgroups())


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold back SIGINT, SIGTERM and SIGHUP for the block (in this thread); they are
    delivered when it ends."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def write_file(path: str | os.PathLike[str], data: str | bytes | Iterable[bytes]) -> int:
    """Write `data` (or its chunks, in order) to `path` as `check_output` decides; returns
    the number of bytes written. Chunks are written as they come into a temporary file or a
    device; a file rewritten in place gets them only once all exist (it is not atomic)."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    chunks: Iterable[bytes] = (data,) if isinstance(data, bytes) else data
    plan = check_output(path)
    if plan.how == "in_place":
        chunks = (b"".join(chunks),)
    try:
        if plan.how == "replace":
            return _replace(plan, chunks)
        return _write_through(plan, chunks)
    except OSError as exc:
        raise _error(exc.errno or errno.EIO, exc.strerror or str(exc), plan.path) from None


def _write_all(fd: int, chunks: Iterable[bytes]) -> int:
    written = 0
    for chunk in chunks:
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd, view):]
        written += len(chunk)
    return written


def _open_fifo_for_writing(plan: OutputTarget, flags: int) -> int:
    """Open a FIFO once a process reads it, waiting at most FIFO_WAIT_SECONDS (a FIFO
    without a reader would block the open for ever)."""
    deadline = time.monotonic() + FIFO_WAIT_SECONDS
    while True:
        try:
            fd = os.open(plan.target, flags | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: no reader yet
                raise
            if time.monotonic() >= deadline:
                raise _error(errno.ETIMEDOUT, f"no process read this FIFO within {FIFO_WAIT_SECONDS:g} s",
                             plan.path) from None
            time.sleep(0.05)
            continue
        os.set_blocking(fd, True)  # a slow reader is fine once there is one
        return fd


def _write_through(plan: OutputTarget, chunks: Iterable[bytes]) -> int:
    flags = os.O_WRONLY | getattr(os, "O_CLOEXEC", 0)
    if plan.how == "descriptor":  # as the caller opened it: appended to where it appends
        return _write_all(int(plan.target), chunks)
    if plan.how == "stream":  # devices and FIFOs: written through, never replaced
        existing = plan.existing
        if existing is not None and stat.S_ISFIFO(existing.st_mode):
            fd = _open_fifo_for_writing(plan, flags)
        else:
            fd = os.open(plan.target, flags)
        try:
            return _write_all(fd, chunks)
        finally:
            os.close(fd)
    data = b"".join(chunks)
    with signals_held():  # a half-written file is what a signal here would leave
        fd = os.open(plan.target, flags)
        try:
            _reserve(fd, len(data), plan.path)
            written = _write_all(fd, (data,))
            os.ftruncate(fd, written)
            os.fsync(fd)
        finally:
            os.close(fd)
    return written


def _reserve(fd: int, size: int, path: str) -> None:
    """Make sure `size` bytes fit in the file before any of its bytes is overwritten: a full
    disk then refuses the write instead of leaving a fragment where the file was."""
    if not hasattr(os, "posix_fallocate"):
        return
    try:
        os.posix_fallocate(fd, 0, max(size, 1))
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENODEV, errno.ESPIPE):
            return  # a file system without reservations: written as before
        raise _error(exc.errno or errno.ENOSPC, f"{exc.strerror or exc}: not written, the file is unchanged", path) from None


#: Names tried for a temporary file before giving up (each one random: a clash is rare).
_TEMPORARY_NAME_ATTEMPTS = 100


#: What ends a temporary file's name; with the writer's process id before it, a later run
#: recognises the temporaries of writers that died (SIGKILL) and removes them.
TEMPORARY_SUFFIX = ".hlo-dedup.tmp"
_NAME_MAX = 255


def _temporary_stem(target: str) -> str:
    """`.NAME.` for the temporaries beside `target`, NAME cut so that the whole name stays
    within 255 bytes (an output name of 238-255 bytes was refused)."""
    name = os.fsencode(os.path.basename(target))
    room = _NAME_MAX - len(b"..") - len(b"4194304.") - 12 - len(TEMPORARY_SUFFIX) - 1
    if len(name) > room:
        name = name[:room]
    return "." + os.fsdecode(name) + "."


def _create_temporary(target: str) -> tuple[int, str]:
    """A new empty file beside `target`, `.NAME.PID.<random>.hlo-dedup.tmp`, readable and
    writable by its owner only, and its descriptor: `tempfile.mkstemp`'s contract, whose
    module would add shutil, random and the compression modules to every run's start-up.
    Temporaries that writers which died left for the same target are removed first."""
    directory, stem = _directory_of(target), _temporary_stem(target)
    _remove_stale_temporaries(directory, stem)
    flags = (os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
             | getattr(os, "O_BINARY", 0))
    for _ in range(_TEMPORARY_NAME_ATTEMPTS):
        path = os.path.join(directory, f"{stem}{os.getpid()}.{os.urandom(6).hex()}{TEMPORARY_SUFFIX}")
        try:
            return os.open(path, flags, 0o600), path
        except FileExistsError:
            continue
    raise _error(errno.EEXIST, "no unused temporary file name", target)


def _remove_stale_temporaries(directory: str, stem: str) -> None:
    """Remove `stem` temporaries whose writer is gone (only ours: the name is exactly `stem`,
    a process id, the random part and the suffix; a live writer's, or one we may not signal,
    stays). The whole name is matched: the temporaries of `NAME.N.hlo` also start with `stem`,
    and N read as their writer's id removed a live worker's file when no process N existed."""
    ours = re.compile(re.escape(stem) + r"(\d{1,9})\.[0-9a-f]{12}" + re.escape(TEMPORARY_SUFFIX))
    try:
        found = [(name, ours.fullmatch(name)) for name in os.listdir(directory) if name.startswith(stem)]
    except OSError:
        return
    for name, match in found:
        if match is None or int(match.group(1)) == os.getpid() or _alive(int(match.group(1))):
            continue
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(directory, name))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def _replace(plan: OutputTarget, chunks: Iterable[bytes]) -> int:
    target = plan.target
    with signals_held():
        fd, tmp = _create_temporary(target)
        try:
            try:
                written = _write_all(fd, chunks)
                os.fsync(fd)
                existing = plan.existing
                if existing is not None:
                    os.fchmod(fd, stat.S_IMODE(existing.st_mode))
                    if hasattr(os, "fchown") and (existing.st_uid, existing.st_gid) != _owner(fd):
                        os.fchown(fd, existing.st_uid, existing.st_gid)
                else:
                    umask = os.umask(0)
                    os.umask(umask)
                    os.fchmod(fd, 0o666 & ~umask)
            finally:
                os.close(fd)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    return written


def _owner(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_uid, st.st_gid


def same_file_key(path: str | os.PathLike[str]) -> tuple | None:
    """What identifies the file `path` names, through symlinks, hard links and spellings
    (`./x`, `a/../x`): its device and inode if it exists, else its resolved path. None for
    a character device (writing one twice, like /dev/null, harms nothing)."""
    try:
        st = os.stat(path)
    except OSError:
        return ("path", os.path.normcase(os.path.realpath(path)))
    if stat.S_ISCHR(st.st_mode):
        return None
    return ("inode", st.st_dev, st.st_ino)


# ------------------------------------------------------------------------------------------
# Inputs


def read_input(path: str | os.PathLike[str], check_head: HeadCheck | None = None) -> bytes:
    """The bytes of the file `path` within the bounds of the module docstring; OSError
    naming `path` otherwise. `check_head` sees the first `HEAD_BYTES` before the rest is
    read and may raise: a 3 GiB file that is no module is refused on its first bytes."""
    path = os.fspath(path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise _error(errno.EISDIR, "Is a directory", path)
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            kind = "character" if stat.S_ISCHR(mode) else "block"
            raise _error(errno.EINVAL, f"is a {kind} device, not a file or a pipe (refusing to read it)", path)
        if stat.S_ISFIFO(mode) and _is_named_fifo(path):
            _wait_for_data(fd, path)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as stream:
            if stat.S_ISREG(mode):
                if check_head is not None:
                    check_head(stream.read(HEAD_BYTES))
                    stream.seek(0)
                return stream.read()
            return read_stream(stream, path, check_head)
    finally:
        os.close(fd)


def _is_named_fifo(path: str) -> bool:
    """A FIFO in the file system, not an anonymous pipe reached through /dev/fd (whose
    writer exists by construction)."""
    return "pipe:[" not in os.path.realpath(path)


def _wait_for_data(fd: int, path: str) -> None:
    if not hasattr(select, "poll"):
        return
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    if not poller.poll(FIFO_WAIT_SECONDS * 1000):
        raise _error(errno.ETIMEDOUT, f"no process wrote to this FIFO within {FIFO_WAIT_SECONDS:g} s "
                     "(to wait longer, pipe it to standard input: cat FIFO | hlo-dedup -)", path)


def read_stream(stream: BinaryIO, name: str, check_head: HeadCheck | None = None) -> bytes:
    """Everything `stream` holds, up to STREAM_LIMIT bytes (more is an OSError naming `name`);
    `check_head` as for `read_input`, once the first `HEAD_BYTES` (or all) have arrived."""
    chunks: list[bytes] = []
    total = 0
    read = getattr(stream, "read1", stream.read)
    while True:
        chunk = read(_CHUNK)
        if check_head is not None and (not chunk or total + len(chunk) >= HEAD_BYTES):
            check_head(b"".join([*chunks, chunk])[:HEAD_BYTES])
            check_head = None
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > STREAM_LIMIT:
            limit = f"{STREAM_LIMIT >> 30} GiB" if STREAM_LIMIT % (1 << 30) == 0 else f"{STREAM_LIMIT} bytes"
            raise _error(errno.EFBIG, f"more than {limit} from a pipe or FIFO, the most read from one "
                         "(give a regular file)", name)
        chunks.append(chunk)
