"""promptscore's exceptions: one class per library status code (ps_status), each carrying the
code, the library's message and, for parse errors, the byte offset; and the checks that turn a
status into a raise."""
import errno
import operator
import os
from typing import Any, Optional

from . import _lib as L
from ._lib import LIB as _C


class Error(Exception):
    """Base of every promptscore error.

    Attributes: ``code`` (the library's ps_status, a negative int), ``message`` (its text) and
    ``offset`` (the byte offset in the input where a parse error was found, else -1).
    """

    code = L.PS_ERR_INTERNAL

    def __init__(self, message: str, code: Optional[int] = None, offset: int = -1) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.offset = offset

    @property
    def status(self) -> str:
        """The library's name of the code ("invalid argument", "I/O error", ...)."""
        return str(_C.ps_status_str(self.code).decode())


class InvalidArgumentError(Error, ValueError):
    """PS_ERR_INVALID_ARG: a bad value (a negative size, an option out of range, a closed model)."""
    code = L.PS_ERR_INVALID_ARG


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of the wrong Python type (code PS_ERR_INVALID_ARG; also a TypeError)."""


class OutOfMemoryError(Error):
    """PS_ERR_NOMEM: an allocation failed."""
    code = L.PS_ERR_NOMEM


class FileIOError(Error, OSError):
    """PS_ERR_IO: open/read/mmap failed; the message names the file. Also an OSError: ``errno``
    (when known), ``strerror`` and ``filename`` (the path) are set for a model that does not
    load; a missing file raises FileMissingError, an unreadable one FilePermissionError."""
    code = L.PS_ERR_IO

    def __str__(self) -> str:  # the message, not OSError's "[Errno N] ..." form
        return str(self.args[0]) if self.args else self.message


class FileMissingError(FileIOError, FileNotFoundError):
    """A file that does not exist (ENOENT): a FileIOError and a FileNotFoundError."""


class FilePermissionError(FileIOError, PermissionError):
    """A file this process may not read (EACCES, EPERM): a FileIOError and a PermissionError."""


class FormatError(Error, ValueError):
    """PS_ERR_FORMAT: a malformed file or text; ``offset`` is the byte offset when known."""
    code = L.PS_ERR_FORMAT


class UnsupportedError(Error):
    """PS_ERR_UNSUPPORTED: valid but not supported (architecture, tensor type, tokenizer)."""
    code = L.PS_ERR_UNSUPPORTED


class NaNError(Error):
    """PS_ERR_NAN: a NaN or +inf logit; the message names the row."""
    code = L.PS_ERR_NAN


class TokenRangeError(Error, ValueError):
    """PS_ERR_TOKEN_RANGE: a token id outside [0, n_vocab)."""
    code = L.PS_ERR_TOKEN_RANGE


class ContextError(Error, ValueError):
    """PS_ERR_CONTEXT: more positions than the context holds."""
    code = L.PS_ERR_CONTEXT


class NotFoundError(Error):
    """PS_ERR_NOT_FOUND: a missing key, tensor or file."""
    code = L.PS_ERR_NOT_FOUND


class CancelledError(Error):
    """PS_ERR_CANCELLED."""
    code = L.PS_ERR_CANCELLED


class NetworkError(Error):
    """PS_ERR_NETWORK."""
    code = L.PS_ERR_NETWORK


class InternalError(Error):
    """PS_ERR_INTERNAL: a bug in promptscore."""
    code = L.PS_ERR_INTERNAL


class LimitError(Error):
    """PS_ERR_LIMIT: input over a configured limit."""
    code = L.PS_ERR_LIMIT


_BY_CODE = {c.code: c for c in (InvalidArgumentError, OutOfMemoryError, FileIOError, FormatError,
                                 UnsupportedError, NaNError, TokenRangeError, ContextError,
                                 NotFoundError, CancelledError, NetworkError, InternalError,
                                 LimitError)}


def _error(status: int, err: Optional[Any] = None, prefix: Optional[str] = None) -> Error:
    msg = err.message.decode("utf-8", "replace") if err is not None else ""
    if not msg:
        msg = _C.ps_status_str(status).decode()
    if prefix:
        msg = "%s: %s" % (prefix, msg)
    cls = _BY_CODE.get(status, Error)
    return cls(msg, code=status, offset=err.offset if err is not None else -1)


def _file_error(status: int, err: Any, prefix: str, path: str) -> Error:
    """The error of a file the library could not load: for PS_ERR_IO (and PS_ERR_NOT_FOUND when
    the path itself is missing) an OSError too, its errno found by opening the path here the
    way the library does (read-only, non-blocking: a FIFO is not waited on)."""
    e = _error(status, err, prefix)
    if status not in (L.PS_ERR_IO, L.PS_ERR_NOT_FOUND):
        return e
    no: Optional[int] = None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as oe:
        no = oe.errno
    else:
        os.close(fd)
        if os.path.isdir(path):
            no = errno.EISDIR
    if status == L.PS_ERR_NOT_FOUND and no != errno.ENOENT:
        return e  # a missing key or tensor of a file that is there
    cls = (FileMissingError if no == errno.ENOENT else
           FilePermissionError if no in (errno.EACCES, errno.EPERM) else FileIOError)
    f = cls(e.message, code=status, offset=e.offset)
    if no is not None:
        f.errno = no
    f.strerror = os.strerror(no) if no is not None else e.message
    f.filename = path
    return f


def _check(status: int, err: Optional[Any] = None, prefix: Optional[str] = None) -> None:
    if status != L.PS_OK:
        raise _error(status, err, prefix)


def _int(value: Any, name: str, lo: Optional[int] = None, hi: Optional[int] = None) -> int:
    if isinstance(value, bool):
        raise ArgumentTypeError("%s must be an integer, not bool" % name)
    try:
        v = operator.index(value)
    except TypeError:
        raise ArgumentTypeError("%s must be an integer, not %s" % (name, type(value).__name__))
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise InvalidArgumentError("%s = %d must be in %s..%s" % (
            name, v, lo if lo is not None else "", hi if hi is not None else ""))
    return v


