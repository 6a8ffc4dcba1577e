"""promptscore: exact per-token log-probabilities and top-K of prompts under a GGUF model.

A thin layer over the C library libpromptscore (through ctypes; docs/python.md says why), so the
numbers are the library's own: the same prompt scored here and by ``promptscore score`` gives the
same float32 bits, ids and top ids.

    import promptscore
    with promptscore.Model("stories260K.gguf") as m:
        r = m.score("Once upon a time", top_k=5)
        r.logprobs        # float32, position 0 NaN
        r.top_ids         # int32, (n, 5)
        for r in m.score_many(["a b", "c d"], top_k=1):   # several prompts per forward pass
            print(r.sum_logprob)

Every failure raises a subclass of :class:`Error` carrying the library's status code, its
message and, for parse errors, the byte offset. The library never aborts on bad input, and
this layer checks what ctypes cannot (types, ranges, a closed model) before any call.
"""
from . import _lib
from ._errors import (ArgumentTypeError, CancelledError, ContextError, Error, FileIOError,
                      FileMissingError, FilePermissionError, FormatError, InternalError,
                      InvalidArgumentError, LimitError, NaNError, NetworkError, NotFoundError,
                      OutOfMemoryError, TokenRangeError, UnsupportedError)
from ._lib import LIB as _C
from ._model import Model
from ._result import PerplexityResult, Result

__all__ = [
    "Model", "Result", "PerplexityResult", "version", "lib_path",
    "Error", "InvalidArgumentError", "ArgumentTypeError", "OutOfMemoryError", "FileIOError",
    "FileMissingError", "FilePermissionError",
    "FormatError", "UnsupportedError", "NaNError", "TokenRangeError", "ContextError",
    "NotFoundError", "CancelledError", "NetworkError", "InternalError", "LimitError",
]

__version__ = "0.1.0"


def version() -> str:
    """The C library's version string ("0.1.0")."""
    return str(_C.ps_version().decode())


def lib_path() -> str:
    """The path of the libpromptscore this package loaded."""
    return _lib.LIB_PATH
