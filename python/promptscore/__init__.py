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
import math
import operator
import os
import re
import threading
from contextlib import contextmanager
from ctypes import POINTER, byref, c_int32, c_size_t, c_void_p, cast, create_string_buffer, string_at

import numpy as np

from . import _lib as L

__all__ = [
    "Model", "Result", "PerplexityResult", "version", "lib_path",
    "Error", "InvalidArgumentError", "ArgumentTypeError", "OutOfMemoryError", "FileIOError",
    "FormatError", "UnsupportedError", "NaNError", "TokenRangeError", "ContextError",
    "NotFoundError", "CancelledError", "NetworkError", "InternalError", "LimitError",
]

_C, _LIB_PATH = L.load()
__version__ = "0.1.0"


def version():
    """The C library's version string ("0.1.0")."""
    return _C.ps_version().decode()


def lib_path():
    """The path of the libpromptscore this package loaded."""
    return _LIB_PATH


# ---- errors ------------------------------------------------------------------------------------

class Error(Exception):
    """Base of every promptscore error.

    Attributes: ``code`` (the library's ps_status, a negative int), ``message`` (its text) and
    ``offset`` (the byte offset in the input where a parse error was found, else -1).
    """

    code = L.PS_ERR_INTERNAL

    def __init__(self, message, code=None, offset=-1):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.offset = offset

    @property
    def status(self):
        """The library's name of the code ("invalid argument", "I/O error", ...)."""
        return _C.ps_status_str(self.code).decode()


class InvalidArgumentError(Error, ValueError):
    """PS_ERR_INVALID_ARG: a bad value (a negative size, an option out of range, a closed model)."""
    code = L.PS_ERR_INVALID_ARG


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of the wrong Python type (code PS_ERR_INVALID_ARG; also a TypeError)."""


class OutOfMemoryError(Error):
    """PS_ERR_NOMEM: an allocation failed."""
    code = L.PS_ERR_NOMEM


class FileIOError(Error):
    """PS_ERR_IO: open/read/mmap failed; the message names the file."""
    code = L.PS_ERR_IO


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


def _error(status, err=None, prefix=None):
    msg = err.message.decode("utf-8", "replace") if err is not None else ""
    if not msg:
        msg = _C.ps_status_str(status).decode()
    if prefix:
        msg = "%s: %s" % (prefix, msg)
    cls = _BY_CODE.get(status, Error)
    return cls(msg, code=status, offset=err.offset if err is not None else -1)


def _check(status, err=None, prefix=None):
    if status != L.PS_OK:
        raise _error(status, err, prefix)


def _int(value, name, lo=None, hi=None):
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


def _bool(value, name):
    """A boolean option: True or False (numpy's bool too), nothing merely truthy: the server
    answers 400 to "stats": "yes" and to 1, and so does this."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ArgumentTypeError("%s must be True or False, not %r" % (name, value))


_INT32_MAX = 2**31 - 1
_ACTS = {"native": 0, "f32": 1}
_KV_TYPES = {"f32": 0, "f16": 1, "bf16": 2, "bf16-dot": 3, "f16-dot": 4}
_PPL_MODES = {"sliding": 0, "llama": 1}
_CHUNK = 256  # positions per forward pass: the CLI's default, part of a score's definition
_BAD_UTF8 = re.compile("[\udc80-\udcff]+")


def _clean_text(b):
    """A token's bytes as the CLI writes them: valid UTF-8 kept, each run of invalid bytes one
    U+FFFD (src/serve/json.c, append_utf8_clean)."""
    return _BAD_UTF8.sub("\ufffd", b.decode("utf-8", "surrogateescape"))


# ---- results -----------------------------------------------------------------------------------

class Result:
    """The score of one prompt. Entry i describes token i given tokens [0, i); entry 0 has no
    distribution.

    Attributes (numpy arrays are owned by the result; nothing refers to C memory):
      token_ids     int32 (n,): the prompt's ids (BOS included when it was added)
      logprobs      float32 (n,): logprob of each token; NaN at 0 and before logprobs_from
      top_ids       int32 (n, K): top-K ids by logprob descending (ties by ascending id); -1 at
                    0, before logprobs_from, and past the vocabulary
      top_logprobs  float32 (n, K): their logprobs (NaN where top_ids is masked at 0 or before
                    logprobs_from; -inf past the vocabulary)
      tokens        list of str: each token's text (invalid UTF-8 as U+FFFD), as the CLI's
                    "tokens"; "".join(tokens) is the text the ids stand for
      text_offsets  int64 (n,): where each token's text starts in "".join(tokens), in code
                    points (the CLI's "text_offset")
      sum_logprob, mean_logprob, perplexity: over the prompt's tokens 1..n-1 (every position,
                    logprobs_from or not; the CLI's fields); mean NaN for a 1-token prompt
      n_tokens      n
      logprobs_from the first position with values
      entropy       float32 (n,) with stats=True, else None: entropy in nats of the whole
                    distribution that scored token i; NaN at 0
      rank          int32 (n,) with stats=True, else None: 1-based rank of token i in that
                    distribution (equal logits by ascending id, as top_ids); 0 at position 0
      kld           float32 (n,) with compare=, else None: KL(this model || compared) in nats
                    over the whole vocabulary; NaN at 0; exactly 0 for a model against itself
      same_top1     int8 (n,) with compare=, else None: 1 when both top-1 ids agree, else 0;
                    -1 at position 0
      dp            float32 (n,) with compare=, else None: p_compared - p_this of token i;
                    NaN at 0
      kld_mean, same_top1_pct: with compare=, else None: mean kld and percent of same_top1
                    over positions 1..n-1 (the CLI's fields; NaN for a 1-token prompt)
      entropy/rank/kld/same_top1/dp are not masked by logprobs_from.
    """

    __slots__ = ("token_ids", "logprobs", "top_ids", "top_logprobs", "sum_logprob",
                 "mean_logprob", "perplexity", "n_tokens", "logprobs_from", "_tokens",
                 "_offsets", "entropy", "rank", "kld", "same_top1", "dp", "kld_mean",
                 "same_top1_pct")

    def __init__(self, res, model, logprobs_from):
        n, k = res.n_prompt, res.k
        self.n_tokens = n
        self.logprobs_from = logprobs_from
        self.token_ids = np.ctypeslib.as_array(res.tokens, (n,)).copy()
        self.logprobs = np.ctypeslib.as_array(res.logprobs, (n,)).copy()
        if k > 0:
            self.top_ids = np.ctypeslib.as_array(res.top_ids, (n * k,)).reshape(n, k).copy()
            self.top_logprobs = np.ctypeslib.as_array(res.top_logprobs,
                                                      (n * k,)).reshape(n, k).copy()
        else:
            self.top_ids = np.empty((n, 0), np.int32)
            self.top_logprobs = np.empty((n, 0), np.float32)
        if logprobs_from > 0:
            m = min(logprobs_from, n)
            self.logprobs[:m] = np.nan
            self.top_ids[:m] = -1
            self.top_logprobs[:m] = np.nan
        self.sum_logprob = res.sum_logprob
        self.mean_logprob = res.sum_logprob / (n - 1) if n > 1 else math.nan
        try:
            self.perplexity = math.exp(-self.mean_logprob)
        except OverflowError:
            self.perplexity = math.inf
        self._tokens = model._token_texts(self.token_ids.tolist())
        self._offsets = None
        def arr(ptr, dtype=None):
            if not ptr:
                return None
            a = np.ctypeslib.as_array(ptr, (n,)).copy()
            return a.astype(dtype) if dtype is not None else a
        self.entropy = arr(res.entropy)
        self.rank = arr(res.rank)
        self.kld = arr(res.kld)
        self.same_top1 = arr(res.same_top1, np.int8)
        self.dp = arr(res.dp)
        self.kld_mean = self.same_top1_pct = None
        if res.kld:
            kl = 0.0
            same = 0
            for i in range(1, n):
                kl += float(self.kld[i])
                same += int(self.same_top1[i] == 1)
            m = n - 1
            self.kld_mean = kl / m if m > 0 else math.nan
            self.same_top1_pct = 100.0 * same / m if m > 0 else math.nan

    @property
    def tokens(self):
        """Each token's text (list of str), the CLI's "tokens"."""
        return self._tokens

    @property
    def text_offsets(self):
        """int64 (n,): where each token's text starts in "".join(tokens), in code points."""
        if self._offsets is None:
            lens = np.fromiter((len(s) for s in self.tokens), np.int64, self.n_tokens)
            off = np.zeros(self.n_tokens, np.int64)
            if self.n_tokens > 1:
                np.cumsum(lens[:-1], out=off[1:])
            self._offsets = off
        return self._offsets

    def __len__(self):
        return self.n_tokens

    def __repr__(self):
        return "<promptscore.Result n_tokens=%d sum_logprob=%.6g>" % (self.n_tokens,
                                                                     self.sum_logprob)


class PerplexityResult:
    """The summary of Model.perplexity: the numbers ``promptscore perplexity --json`` prints.

    Attributes: mode ("sliding" | "llama"), perplexity, perplexity_stderr (llama; NaN for
    sliding), mean_nll, tokens_scored, n_tokens (tokens of the text), windows (sliding: windows
    run; llama: chunks), ctx, stride (sliding), running (llama: float64 array of the running
    estimate after each chunk; empty for sliding).
    """

    __slots__ = ("mode", "perplexity", "perplexity_stderr", "mean_nll", "tokens_scored",
                 "n_tokens", "windows", "ctx", "stride", "running")

    def __init__(self, r):
        self.mode = "llama" if r.mode == 1 else "sliding"
        self.perplexity = r.perplexity
        self.perplexity_stderr = r.perplexity_stderr
        self.mean_nll = r.mean_nll
        self.tokens_scored = r.tokens_scored
        self.n_tokens = r.n_tokens
        self.windows = r.n_windows
        self.ctx = r.ctx
        self.stride = r.stride
        if r.running:
            self.running = np.ctypeslib.as_array(r.running, (r.n_windows,)).copy()
        else:
            self.running = np.empty(0, np.float64)

    def __repr__(self):
        return "<promptscore.PerplexityResult %s perplexity=%.6g tokens=%d>" % (
            self.mode, self.perplexity, self.tokens_scored)


def _guarded(fn):
    """Runs a method as a call in flight (Model._using): close() waits for it."""
    def wrapper(self, *args, **kwargs):
        with self._using():
            return fn(self, *args, **kwargs)
    wrapper.__name__ = fn.__name__
    wrapper.__qualname__ = fn.__qualname__
    wrapper.__doc__ = fn.__doc__
    return wrapper


# ---- the model ---------------------------------------------------------------------------------

class Model:
    """A GGUF model loaded for scoring.

    Model(path, threads=None, ctx=None, act="native", kv_type="f32", cache_mb=None)

      path      the .gguf file (str or os.PathLike)
      threads   threads of the forward pass; None or 0 = every CPU (results never depend on it)
      ctx       context length; None = the model's own
      act       "native" (llama.cpp's activation rounding, the CLI's default) or "f32"
      kv_type   K/V cache element type: "f32" (default), "f16", "bf16", "bf16-dot", "f16-dot"
      cache_mb  the exact prefix cache's budget in MiB; None = the library default (256 MiB),
                0 = no cache. The cache never changes a result's bits.

    Usable as a context manager; close() frees everything (idempotent). A Model may be shared
    by threads: its calls are serialised by a lock, and while one runs in C the GIL is free.
    """

    def __init__(self, path, threads=None, ctx=None, act="native", kv_type="f32", cache_mb=None):
        self._model = self._pool = self._session = self._cache = None
        self._lock = threading.Lock()  # the session: one scoring call at a time
        self._cv = threading.Condition()  # calls in flight (_users); close() waits for them
        self._users = 0
        self._closing = False
        self._texts = {}
        if not isinstance(path, (str, bytes, os.PathLike)):
            raise ArgumentTypeError("path must be a str or os.PathLike, not %s" %
                                    type(path).__name__)
        self.path = os.fsdecode(path)
        threads = 0 if threads is None else _int(threads, "threads", 0, 1024)
        ctx = 0 if ctx is None else _int(ctx, "ctx", 1, _INT32_MAX)
        if not isinstance(act, str) or act not in _ACTS:
            raise InvalidArgumentError("act must be one of %s, not %r" % (sorted(_ACTS), act))
        if not isinstance(kv_type, str) or kv_type not in _KV_TYPES:
            raise InvalidArgumentError("kv_type must be one of %s, not %r" %
                                       (sorted(_KV_TYPES), kv_type))
        if cache_mb is not None:
            cache_mb = _int(cache_mb, "cache_mb", 0, 1 << 40)
        self.act, self.kv_type = act, kv_type
        bpath = os.fsencode(path)
        if b"\0" in bpath:
            raise InvalidArgumentError("path contains a NUL byte")
        err = L.ps_error()
        mp = _C.ps_model_default_params()
        mp.n_ctx = ctx
        h = c_void_p()
        _check(_C.ps_model_load(bpath, byref(mp), byref(h), byref(err)), err,
               "cannot load %s" % self.path)
        self._model = h
        try:
            info = L.ps_model_info()
            _C.ps_model_get_info(h, byref(info))
            self._info = info
            if info.vocab_only:
                raise UnsupportedError("%s has no weights (a vocabulary-only file)" % self.path,
                                       code=L.PS_ERR_UNSUPPORTED)
            self._vocab = _C.ps_model_vocab(h)
            pool = c_void_p()
            _check(_C.ps_pool_create(threads, byref(pool)), None, "cannot start threads")
            self._pool = pool
            if cache_mb != 0:
                cp = _C.ps_prefix_cache_default_params()
                if cache_mb is not None:
                    cp.budget_bytes = cache_mb << 20
                cache = c_void_p()
                _check(_C.ps_prefix_cache_create(h, byref(cp), byref(cache), byref(err)), err,
                       "cannot create the prefix cache")
                self._cache = cache
            self._session = self._new_session(0)
        except BaseException:
            self.close()
            raise

    # -- lifetime
    def _new_session(self, n_ctx):
        sp = _C.ps_session_default_params()
        sp.n_ctx = n_ctx
        sp.n_batch = _CHUNK
        sp.pool = self._pool
        sp.act = _ACTS[self.act]
        sp.kv_type = _KV_TYPES[self.kv_type]
        s = c_void_p()
        err = L.ps_error()
        _check(_C.ps_session_create(self._model, byref(sp), byref(s), byref(err)), err,
               "cannot create a session of %d positions" % (n_ctx or self._info.n_ctx))
        return s

    def close(self):
        """Frees the model, its session, pool and prefix cache. Idempotent; later calls on the
        model raise InvalidArgumentError."""
        cv = getattr(self, "_cv", None)
        if cv is None:
            return
        with cv:
            if self._model is None:
                return
            # calls in flight (other threads) finish first; new ones see the model closed
            self._closing = True
            cv.wait_for(lambda: self._users == 0)
            if getattr(self, "_session", None):
                _C.ps_session_free(self._session)
            if getattr(self, "_cache", None):
                _C.ps_prefix_cache_free(self._cache)
            if getattr(self, "_pool", None):
                _C.ps_pool_free(self._pool)
            if getattr(self, "_model", None):
                _C.ps_model_free(self._model)
            self._session = self._cache = self._pool = self._model = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        self._open()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def closed(self):
        """True once close() was called."""
        return self._model is None

    def _open(self):
        if self._model is None:
            raise InvalidArgumentError("the model is closed")

    @contextmanager
    def _using(self):
        """Marks a call that touches C memory of the model: close() waits for it to end."""
        with self._cv:
            if self._closing:
                raise InvalidArgumentError("the model is closed")
            self._open()
            self._users += 1
        try:
            yield
        finally:
            with self._cv:
                self._users -= 1
                self._cv.notify_all()

    # -- facts
    @property
    def n_vocab(self):
        """Number of tokens in the vocabulary."""
        self._open()
        return self._info.n_vocab

    @property
    def n_ctx(self):
        """The context length the model was loaded with."""
        self._open()
        return self._info.n_ctx

    @property
    def name(self):
        """general.name, or the file's base name."""
        self._open()
        return self._info.name.decode("utf-8", "replace")

    @property
    def arch(self):
        """general.architecture ("llama", "qwen3", ...)."""
        self._open()
        return self._info.arch.decode("utf-8", "replace")

    @property
    def bos(self):
        """The BOS id, or -1."""
        self._open()
        return _C.ps_vocab_bos(self._vocab)

    @property
    def eos(self):
        """The EOS id, or -1."""
        self._open()
        return _C.ps_vocab_eos(self._vocab)

    @property
    def add_bos(self):
        """Whether the model asks for BOS at the start of a text prompt."""
        self._open()
        return bool(_C.ps_vocab_add_bos(self._vocab))

    @_guarded
    def cache_stats(self):
        """The prefix cache's counters as a dict (hits, misses, inserts, evictions, bytes,
        budget_bytes, blocks, block, idle_bytes); all zero without a cache."""
        self._open()
        st = L.ps_prefix_cache_stats()
        _C.ps_prefix_cache_get_stats(self._cache, byref(st))
        return {f: getattr(st, f) for f, _ in L.ps_prefix_cache_stats._fields_}

    # -- tokens
    @_guarded
    def tokenize(self, text, add_special=True, parse_special=True):
        """Text -> list of token ids. add_special: BOS in front when the model adds one (the
        CLI's default for text prompts); parse_special: the text of special tokens ("<s>",
        "<|endoftext|>") becomes those tokens (the CLI's default) instead of plain text."""
        self._open()
        if not isinstance(text, str):
            raise ArgumentTypeError("text must be a str, not %s" % type(text).__name__)
        try:
            b = text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InvalidArgumentError("text is not valid Unicode (%s)" % e) from None
        return self._tokenize(b, _bool(add_special, "add_special"),
                              _bool(parse_special, "parse_special")).tolist()

    def _tokenize(self, b, add_bos, parse_special):
        if len(b) > _INT32_MAX // 2:
            raise LimitError("the text is %d bytes; at most %d can be tokenized at once" %
                             (len(b), _INT32_MAX // 2))
        cap = len(b) + 4
        n = c_int32()
        err = L.ps_error()
        while True:
            out = np.empty(cap, np.int32)
            st = _C.ps_vocab_tokenize(self._vocab, b, len(b), add_bos, parse_special,
                                      out.ctypes.data_as(POINTER(c_int32)), cap, byref(n),
                                      byref(err))
            _check(st, err, "cannot tokenize")
            if n.value <= cap:
                return out[:n.value]
            cap = n.value

    @_guarded
    def detokenize(self, ids):
        """Token ids -> text: the concatenation of the tokens' bytes (the leading space a
        SentencePiece vocab adds is dropped, so detokenize(tokenize(s, add_special=False)) == s
        for plain text); invalid UTF-8 becomes U+FFFD."""
        self._open()
        a = self._ids(ids, "ids", allow_empty=True)
        need = c_size_t()
        p = a.ctypes.data_as(POINTER(c_int32))
        _check(_C.ps_vocab_detokenize(self._vocab, p, len(a), True, None, 0, byref(need)), None,
               "cannot detokenize")
        buf = create_string_buffer(need.value + 1)
        _check(_C.ps_vocab_detokenize(self._vocab, p, len(a), True, buf, need.value + 1,
                                      byref(need)), None, "cannot detokenize")
        return buf.raw[:need.value].decode("utf-8", "replace")

    def _token_texts(self, ids):
        """The CLI's text of each id (a per-model cache, filled as ids are met: a 150k-token
        vocabulary is never walked whole)."""
        cache = self._texts
        miss = [i for i in set(ids) if i not in cache]
        if miss:
            ptr, ln = c_void_p(), c_size_t()
            for i in miss:
                if _C.ps_vocab_token_bytes(self._vocab, i, byref(ptr), byref(ln)) != L.PS_OK:
                    cache[i] = ""
                else:
                    cache[i] = _clean_text(string_at(ptr.value, ln.value) if ln.value else b"")
        return [cache[i] for i in ids]

    def _ids(self, ids, name, allow_empty=False):
        """A sequence of ints -> contiguous int32 array; wrong types and ids outside int32
        raise (ids outside the vocabulary are the library's to refuse)."""
        if isinstance(ids, (str, bytes, bytearray)):
            raise ArgumentTypeError("%s must be a sequence of ints, not %s" %
                                    (name, type(ids).__name__))
        try:
            a = np.asarray(ids)
        except Exception as e:
            raise ArgumentTypeError("%s must be a sequence of ints (%s)" % (name, e)) from None
        if a.ndim != 1:
            raise ArgumentTypeError("%s must be a flat sequence of ints, got a %d-d array" %
                                    (name, a.ndim))
        if a.size and a.dtype.kind not in "iu":
            if a.dtype.kind != "O" or not all(isinstance(x, int) and not isinstance(x, bool)
                                              for x in a.tolist()):
                raise ArgumentTypeError("%s must be a sequence of ints, got %s" %
                                        (name, a.dtype))
        if not a.size:
            if not allow_empty:
                raise InvalidArgumentError("%s is empty: a prompt needs at least one token" % name)
            return np.empty(0, np.int32)
        lo, hi = int(a.min()), int(a.max())
        bad = lo if lo < 0 else hi if hi >= self._info.n_vocab else None
        if bad is not None:
            idx = int(np.nonzero(a == bad)[0][0])
            raise TokenRangeError("token %d (index %d) is outside the vocabulary (0..%d)" %
                                  (bad, idx, self._info.n_vocab - 1))
        return np.ascontiguousarray(a, dtype=np.int32)

    def _prompt_ids(self, prompt, add_special, parse_special):
        if isinstance(prompt, str):
            if not prompt:  # the words of the CLI and the server
                raise InvalidArgumentError("prompt is empty")
            try:
                b = prompt.encode("utf-8")
            except UnicodeEncodeError as e:
                raise InvalidArgumentError("prompt is not valid Unicode (%s)" % e) from None
            a = self._tokenize(b, add_special, parse_special)
            if not len(a):
                raise InvalidArgumentError("the prompt has no tokens")
            return a
        if isinstance(prompt, (bytes, bytearray)):
            raise ArgumentTypeError("prompt must be a str or a sequence of ids, not %s" %
                                    type(prompt).__name__)
        return self._ids(prompt, "prompt")

    def _score_params(self, top_k, stats=False):
        p = _C.ps_score_default_params()
        p.k = top_k
        p.chunk = _CHUNK
        p.cache = self._cache
        p.stats = stats
        return p

    @staticmethod
    def _check_flags(add_special, parse_special, stats):
        return (_bool(add_special, "add_special"), _bool(parse_special, "parse_special"),
                _bool(stats, "stats"))

    def _check_k(self, top_k, logprobs_from):
        top_k = _int(top_k, "top_k", 0, self._info.n_vocab)
        logprobs_from = _int(logprobs_from, "logprobs_from", 0, _INT32_MAX)
        return top_k, logprobs_from

    # -- scoring
    @_guarded
    def score(self, prompt, top_k=0, logprobs_from=0, add_special=True, parse_special=True,
              stats=False, compare=None):
        """Scores one prompt; returns a Result.

        stats: also fill Result.entropy and .rank. compare: another open Model with the same
        vocabulary (it may be this very model): the prompt also runs through it and
        Result.kld, .same_top1, .dp, .kld_mean and .same_top1_pct are filled (no prefix
        cache is used then); a closed model, a non-Model or another vocabulary raises
        promptscore.Error (InvalidArgumentError / ArgumentTypeError / the library's error).

        prompt: a str (tokenized with add_special / parse_special, as the CLI's text prompts)
        or a sequence of token ids (verbatim). top_k: alternatives per position (0..n_vocab).
        logprobs_from: positions before it get no values (NaN / -1), e.g. len(context_ids) for
        a continuation; the values written are bitwise those without it.
        """
        self._open()
        top_k, logprobs_from = self._check_k(top_k, logprobs_from)
        add_special, parse_special, stats = self._check_flags(add_special, parse_special, stats)
        ids = self._prompt_ids(prompt, add_special, parse_special)
        self._check_compare(compare)
        params = self._score_params(top_k, stats)
        return self._score_ids(ids, params, logprobs_from, compare)

    def _check_compare(self, compare):
        if compare is None:
            return
        if not isinstance(compare, Model):
            raise ArgumentTypeError("compare must be a promptscore.Model, not %s" %
                                    type(compare).__name__)
        compare._open()
        err = L.ps_error()
        _check(_C.ps_vocab_same(self._vocab, compare._vocab, byref(err)), err,
               "compare: the models' vocabularies differ")

    def score_many(self, prompts, top_k=0, logprobs_from=0, max_seqs=16, add_special=True,
                   parse_special=True, stats=False, compare=None):
        """Scores an iterable of prompts; yields one Result per prompt, in input order.

        Takes max_seqs prompts at a time (1..256) and packs their positions into shared
        forward passes (ps_score_batch, as `promptscore score --max-seqs N`), with the prefix
        cache: prompts sharing a prefix compute it once. Every result is bitwise what score()
        gives. logprobs_from: one int for every prompt, or an iterable of ints read in step
        with the prompts (one per prompt: an lm-eval batch's context lengths). The GIL is
        released while a group is scored. Prompts are read from the iterable
        one group ahead of what is yielded, so memory is bounded by max_seqs prompts. A prompt
        that fails raises its error (the message names its index) when its turn comes; the
        results before it are yielded first.
        """
        self._open()
        if isinstance(logprobs_from, (int, np.integer)):
            top_k, logprobs_from = self._check_k(top_k, logprobs_from)
            lf_iter = None
        else:
            top_k, _ = self._check_k(top_k, 0)
            try:
                lf_iter = iter(logprobs_from)
            except TypeError:
                raise ArgumentTypeError("logprobs_from must be an int or an iterable of ints, "
                                        "not %s" % type(logprobs_from).__name__) from None
        max_seqs = _int(max_seqs, "max_seqs", 1, _CHUNK)
        add_special, parse_special, stats = self._check_flags(add_special, parse_special, stats)
        if isinstance(prompts, (str, bytes)):
            raise ArgumentTypeError("prompts must be an iterable of prompts, not a single %s" %
                                    type(prompts).__name__)
        try:
            it = iter(prompts)
        except TypeError:
            raise ArgumentTypeError("prompts must be an iterable, not %s" %
                                    type(prompts).__name__) from None
        self._check_compare(compare)
        return self._score_many(it, top_k, logprobs_from, lf_iter, max_seqs, add_special,
                                parse_special, stats, compare)

    def _score_many(self, it, top_k, lf0, lf_iter, max_seqs, add_special, parse_special,
                    stats=False, compare=None):
        params = self._score_params(top_k, stats)
        base = 0
        while True:
            group, froms = [], []
            for p in it:
                group.append(p)
                if lf_iter is None:
                    froms.append(lf0)
                else:
                    try:
                        lf = next(lf_iter)
                    except StopIteration:
                        raise InvalidArgumentError("logprobs_from ended before the prompts "
                                                   "(prompt %d)" % (base + len(group) - 1))
                    froms.append(_int(lf, "logprobs_from", 0, _INT32_MAX))
                if len(group) == max_seqs:
                    break
            if not group:
                return
            results = self._score_group(group, froms, params, base, add_special, parse_special,
                                        compare)
            for r in results:
                if isinstance(r, Error):
                    raise r
                yield r
            base += len(group)

    @_guarded
    def _score_group(self, group, froms, params, base, add_special, parse_special,
                     compare=None):
        """Scores one group of score_many: ps_score_batch over all of it, or, with one prompt
        or a failure, each prompt alone in order up to the first that fails (its Error ends
        the list)."""
        ids = []
        for i, p in enumerate(group):
            try:
                ids.append(self._prompt_ids(p, add_special, parse_special))
            except Error as e:
                ids.append(e)
        m = len(group)
        results = None
        if m > 1 and compare is None and not any(isinstance(a, Error) for a in ids):
            arr = (L.ps_score_prompt * m)()
            for i, a in enumerate(ids):
                arr[i].tokens = a.ctypes.data_as(POINTER(c_int32))
                arr[i].n_tokens = len(a)
                arr[i].params = cast(byref(params), POINTER(L.ps_score_params))
            out = (POINTER(L.ps_score_result) * m)()
            err = L.ps_error()
            with self._lock:
                self._open()
                st = _C.ps_score_batch(self._session, arr, m, m, out, byref(err))
            if st == L.PS_OK:
                try:
                    results = [Result(out[i].contents, self, froms[i])
                               for i in range(m)]
                finally:
                    for i in range(m):
                        _C.ps_score_result_free(out[i])
        if results is None:  # one prompt, or a failure somewhere: each alone, in order
            results = []
            for i, a in enumerate(ids):
                if isinstance(a, Error):
                    a.message = "prompt %d: %s" % (base + i, a.message)
                    a.args = (a.message,)
                    results.append(a)
                    break
                try:
                    results.append(self._score_ids(a, params, froms[i], compare))
                except Error as e:
                    e.message = "prompt %d: %s" % (base + i, e.message)
                    e.args = (e.message,)
                    results.append(e)
                    break
        return results

    def _score_ids(self, ids, params, logprobs_from, compare=None):
        res = POINTER(L.ps_score_result)()
        err = L.ps_error()
        if compare is None:
            with self._lock:
                self._open()
                st = _C.ps_score_tokens(self._session, ids.ctypes.data_as(POINTER(c_int32)),
                                        len(ids), byref(params), byref(res), byref(err))
        else:
            # a fresh session of the compared model for this prompt (it may be this model);
            # no prefix cache with a comparison
            with compare._using():
                other = compare._new_session(max(len(ids), 1))
                try:
                    params.compare = other
                    params.cache = None
                    with self._lock:
                        self._open()
                        st = _C.ps_score_tokens(self._session,
                                                ids.ctypes.data_as(POINTER(c_int32)),
                                                len(ids), byref(params), byref(res), byref(err))
                finally:
                    params.compare = None
                    _C.ps_session_free(other)
        _check(st, err)
        try:
            return Result(res.contents, self, logprobs_from)
        finally:
            _C.ps_score_result_free(res)

    @_guarded
    def perplexity(self, text, ctx=None, stride=None, mode="sliding", max_chunks=None):
        """The perplexity of a text, by the `promptscore perplexity` command's procedures;
        returns a PerplexityResult with the numbers its --json prints.

        mode "sliding": windows of ctx tokens (default: the model's context) advancing by
        stride (default ctx / 2); every token but the first scored once. mode "llama":
        llama.cpp's llama-perplexity (chunks of ctx tokens, default 512, BOS at the start of
        each, the second half of each scored; max_chunks keeps the first N); needs 2 * ctx
        tokens. text: a str (tokenized as the command does: BOS as the model says, special-
        token text left as text; llama mode drops one trailing newline first) or a sequence
        of ids (verbatim). The same numbers as `perplexity -c CTX` when the Model was loaded
        with ctx=CTX (the model's context can choose its RoPE table).
        """
        self._open()
        if mode not in _PPL_MODES:
            raise InvalidArgumentError("mode must be 'sliding' or 'llama', not %r" % (mode,))
        ctx = 0 if ctx is None else _int(ctx, "ctx", 1, _INT32_MAX)
        stride = 0 if stride is None else _int(stride, "stride", 1, _INT32_MAX)
        max_chunks = 0 if max_chunks is None else _int(max_chunks, "max_chunks", 1, _INT32_MAX)
        if mode == "llama" and stride:
            raise InvalidArgumentError("stride is for mode 'sliding'")
        if mode == "sliding" and max_chunks:
            raise InvalidArgumentError("max_chunks is for mode 'llama'")
        if isinstance(text, str):
            if mode == "llama" and text.endswith("\n"):
                text = text[:-1]
            try:
                b = text.encode("utf-8")
            except UnicodeEncodeError as e:
                raise InvalidArgumentError("text is not valid Unicode (%s)" % e) from None
            ids = self._tokenize(b, bool(_C.ps_vocab_add_bos(self._vocab)), False)
        else:
            ids = self._ids(text, "text", allow_empty=True)
        pp = _C.ps_ppl_default_params()
        pp.mode = _PPL_MODES[mode]
        pp.ctx = ctx
        pp.stride = stride
        pp.max_chunks = max_chunks
        pp.chunk = _CHUNK
        need = ctx if ctx else (512 if mode == "llama" else self._info.n_ctx)
        res = POINTER(L.ps_ppl_result)()
        err = L.ps_error()
        with self._lock:
            self._open()
            s = self._new_session(need)
            try:
                st = _C.ps_perplexity(s, ids.ctypes.data_as(POINTER(c_int32)), len(ids),
                                      byref(pp), byref(res), byref(err))
            finally:
                _C.ps_session_free(s)
        _check(st, err)
        try:
            return PerplexityResult(res.contents)
        finally:
            _C.ps_ppl_result_free(res)

    def __repr__(self):
        if self._model is None:
            return "<promptscore.Model closed>"
        return "<promptscore.Model %s (%s, %d tokens)>" % (self.name, self.arch, self.n_vocab)
