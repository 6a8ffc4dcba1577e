"""Model: a GGUF model loaded for scoring through the C library (ctypes), with its session,
thread pool and prefix cache; scoring, batches, tokens and perplexity."""
import functools
import os
import threading
from contextlib import ExitStack, contextmanager
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple,
                    TypeVar,
                    Union, cast as _tcast)
from ctypes import POINTER, byref, c_int32, c_size_t, c_void_p, cast, create_string_buffer, string_at

import numpy as np
import numpy.typing as npt

from . import _lib as L
from ._lib import LIB as _C
from ._errors import (ArgumentTypeError, Error, InvalidArgumentError, LimitError,
                      TokenRangeError, UnsupportedError, _check, _file_error, _int)
from ._result import PerplexityResult, Result, _clean_text, _min_k

def _bool(value: Any, name: str) -> bool:
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



_F = TypeVar("_F", bound=Callable[..., Any])


def _guarded(fn: _F) -> _F:
    """Runs a method as a call in flight (Model._using): close() waits for it."""
    @functools.wraps(fn)
    def wrapper(self: "Model", *args: Any, **kwargs: Any) -> Any:
        with self._using():
            return fn(self, *args, **kwargs)
    return _tcast(_F, wrapper)


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

    def __init__(self, path: Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"],
                 threads: Optional[int] = None, ctx: Optional[int] = None, act: str = "native",
                 kv_type: str = "f32", cache_mb: Optional[int] = None) -> None:
        self._model = self._pool = self._session = self._cache = None
        self._lock = threading.Lock()  # the session: one scoring call at a time
        self._cv = threading.Condition()  # calls in flight (_users); close() waits for them
        self._users = 0
        self._closing = False
        self._texts: Dict[int, str] = {}
        self._bytes: Dict[int, bytes] = {}
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
        st = _C.ps_model_load(bpath, byref(mp), byref(h), byref(err))
        if st != L.PS_OK:
            raise _file_error(st, err, "cannot load %s" % self.path, self.path)
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
    def _new_session(self, n_ctx: int) -> c_void_p:
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

    def close(self) -> None:
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

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self) -> "Model":
        self._open()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """True once close() was called."""
        return self._model is None

    def _open(self) -> None:
        if self._model is None:
            raise InvalidArgumentError("the model is closed")

    @contextmanager
    def _using(self) -> Iterator[None]:
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
    def n_vocab(self) -> int:
        """Number of tokens in the vocabulary."""
        self._open()
        return int(self._info.n_vocab)

    @property
    def n_ctx(self) -> int:
        """The context length the model was loaded with."""
        self._open()
        return int(self._info.n_ctx)

    @property
    def name(self) -> str:
        """general.name, or the file's base name."""
        self._open()
        return str(self._info.name.decode("utf-8", "replace"))

    @property
    def arch(self) -> str:
        """general.architecture ("llama", "qwen3", ...)."""
        self._open()
        return str(self._info.arch.decode("utf-8", "replace"))

    @property
    def bos(self) -> int:
        """The BOS id, or -1."""
        self._open()
        return int(_C.ps_vocab_bos(self._vocab))

    @property
    def eos(self) -> int:
        """The EOS id, or -1."""
        self._open()
        return int(_C.ps_vocab_eos(self._vocab))

    @property
    def add_bos(self) -> bool:
        """Whether the model asks for BOS at the start of a text prompt."""
        self._open()
        return bool(_C.ps_vocab_add_bos(self._vocab))

    @_guarded
    def cache_stats(self) -> Dict[str, int]:
        """The prefix cache's counters as a dict (hits, misses, inserts, evictions, bytes,
        budget_bytes, blocks, block, idle_bytes); all zero without a cache."""
        self._open()
        st = L.ps_prefix_cache_stats()
        _C.ps_prefix_cache_get_stats(self._cache, byref(st))
        return {f: getattr(st, f) for f, _ in L.ps_prefix_cache_stats._fields_}

    # -- tokens
    @_guarded
    def tokenize(self, text: Union[str, bytes, bytearray], add_special: bool = True,
                 parse_special: bool = True) -> List[int]:
        """Text -> list of token ids. add_special: BOS in front when the model adds one (the
        CLI's default for text prompts); parse_special: the text of special tokens ("<s>",
        "<|endoftext|>") becomes those tokens (the CLI's default) instead of plain text.
        text: a str (its UTF-8), or bytes / bytearray tokenized as they are (they need not be
        valid UTF-8: a byte-fallback vocabulary gives byte tokens for invalid bytes)."""
        self._open()
        if isinstance(text, (bytes, bytearray)):
            b = bytes(text)
        elif isinstance(text, str):
            try:
                b = text.encode("utf-8")
            except UnicodeEncodeError as e:
                raise InvalidArgumentError("text is not valid Unicode (%s)" % e) from None
        else:
            raise ArgumentTypeError("text must be a str or bytes, not %s" %
                                    type(text).__name__)
        return [int(i) for i in self._tokenize(b, _bool(add_special, "add_special"),
                                               _bool(parse_special, "parse_special"))]

    def _tokenize(self, b: bytes, add_bos: bool, parse_special: bool) -> npt.NDArray[np.int32]:
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
    def detokenize(self, ids: Sequence[int], skip_special: bool = False) -> str:
        """Token ids -> text: the concatenation of the tokens' bytes (token_bytes), a control
        token as its own text ("<s>"); invalid UTF-8 becomes U+FFFD. When the first id is a
        SentencePiece word token whose vocabulary adds a space prefix, its leading space is
        dropped; a BOS first is "<s>" and the space after it stays. skip_special: control
        tokens (BOS, EOS, <|im_start|>) are left out first, so that for plain text
        detokenize(tokenize(s), skip_special=True) == s (as detokenize(tokenize(s,
        add_special=False)) == s)."""
        self._open()
        a = self._ids(ids, "ids", allow_empty=True)
        if skip_special and len(a):
            a = np.ascontiguousarray(
                a[[not _C.ps_vocab_is_control(self._vocab, int(i)) for i in a.tolist()]],
                dtype=np.int32)
        need = c_size_t()
        p = a.ctypes.data_as(POINTER(c_int32))
        _check(_C.ps_vocab_detokenize(self._vocab, p, len(a), True, None, 0, byref(need)), None,
               "cannot detokenize")
        buf = create_string_buffer(need.value + 1)
        _check(_C.ps_vocab_detokenize(self._vocab, p, len(a), True, buf, need.value + 1,
                                      byref(need)), None, "cannot detokenize")
        return buf.raw[:need.value].decode("utf-8", "replace")

    def _token_bytes(self, ids: List[int]) -> List[bytes]:
        """Each id's bytes (ps_vocab_token_bytes; b"" for an id outside the vocabulary), with
        their CLI texts (_texts): per-model caches, filled as ids are met (a 150k-token
        vocabulary is never walked whole)."""
        cache = self._bytes
        miss = [i for i in set(ids) if i not in cache]
        if miss:
            ptr, ln = c_void_p(), c_size_t()
            for i in miss:
                if _C.ps_vocab_token_bytes(self._vocab, i, byref(ptr), byref(ln)) != L.PS_OK:
                    b = b""
                else:
                    b = string_at(ptr.value or 0, ln.value) if ln.value else b""
                cache[i] = b
                self._texts[i] = _clean_text(b)
        return [cache[i] for i in ids]

    def _token_texts(self, ids: List[int]) -> List[str]:
        """The CLI's text of each id (token bytes with invalid UTF-8 as U+FFFD), cached."""
        cache = self._texts
        if any(i not in cache for i in ids):
            self._token_bytes(ids)
        return [cache[i] for i in ids]

    def _ids(self, ids: Any, name: str, allow_empty: bool = False) -> npt.NDArray[np.int32]:
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

    def _prompt_ids(self, prompt: Any, add_special: bool,
                    parse_special: bool) -> npt.NDArray[np.int32]:
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

    def _prompt_offsets(self, prompt: Any, ids: npt.NDArray[np.int32],
                        add_special: bool) -> Optional[npt.NDArray[np.int64]]:
        """Where each token of a text prompt starts in its UTF-8 bytes, -1 for none: the CLI's
        prompt_offset (ps_vocab_byte_offsets, with BOS taken as added exactly where the CLI
        takes it); None for an id prompt."""
        if not isinstance(prompt, str):
            return None
        b = prompt.encode("utf-8")
        out = np.empty(len(ids), np.int32)
        _check(_C.ps_vocab_byte_offsets(self._vocab, b, len(b),
                                        ids.ctypes.data_as(POINTER(c_int32)), len(ids),
                                        bool(add_special) and bool(_C.ps_vocab_add_bos(self._vocab)),
                                        out.ctypes.data_as(POINTER(c_int32))),
               None, "cannot find the tokens' offsets")
        return out.astype(np.int64)

    def _score_params(self, top_k: int, stats: bool = False,
                      token_ids: Optional[Sequence[int]] = None, words: bool = False) -> Any:
        p = _C.ps_score_default_params()
        p.k = top_k
        p.chunk = _CHUNK
        p.cache = self._cache
        p.stats = bool(stats)
        p.words = bool(words)
        if token_ids is not None:
            a = self._ids(token_ids, "token_ids", allow_empty=True)
            if len(a) > self._info.n_vocab:
                raise InvalidArgumentError("token_ids names %d ids; at most the vocabulary "
                                           "size %d" % (len(a), self._info.n_vocab))
            if len(a):
                p._token_ids = a  # kept alive with the params
                p.token_ids = a.ctypes.data_as(POINTER(c_int32))
                p.n_token_ids = len(a)
        return p

    def _detect_text(self, prompt: Any, ids: npt.NDArray[np.int32]) -> bytes:
        """The bytes the zlib ratio is over: a str prompt's UTF-8, else the text of its ids
        that are not control tokens (the CLI's choice for an id line)."""
        if isinstance(prompt, str):
            return prompt.encode("utf-8")
        ptr, ln = c_void_p(), c_size_t()
        parts = []
        for i in ids.tolist():
            if _C.ps_vocab_is_control(self._vocab, i):
                continue
            if (_C.ps_vocab_token_bytes(self._vocab, i, byref(ptr), byref(ln)) == L.PS_OK
                    and ln.value):
                parts.append(string_at(ptr.value or 0, ln.value))
        return b"".join(parts)

    @staticmethod
    def _check_flags(add_special: Any, parse_special: Any, stats: Any,
                     detect: Any = False) -> "tuple[bool, bool, bool, bool]":
        return (_bool(add_special, "add_special"), _bool(parse_special, "parse_special"),
                _bool(stats, "stats"), _bool(detect, "detect"))

    def _check_k(self, top_k: int, logprobs_from: int) -> "tuple[int, int]":
        top_k = _int(top_k, "top_k", 0, self._info.n_vocab)
        logprobs_from = _int(logprobs_from, "logprobs_from", 0, _INT32_MAX)
        return top_k, logprobs_from

    # -- scoring
    @_guarded
    def score(self, prompt: Union[str, Sequence[int]], top_k: int = 0, logprobs_from: int = 0,
              add_special: bool = True, parse_special: bool = True, stats: bool = False,
              compare: Optional["Model"] = None, detect: bool = False,
              min_k: Union[int, Iterable[int], None] = None,
              token_ids: Optional[Sequence[int]] = None, words: bool = False) -> Result:
        """Scores one prompt; returns a Result.

        token_ids: a sequence of token ids whose logprobs every position reports, whatever
        their rank (Result.token_id_logprobs; the CLI's --token-ids); ids outside the
        vocabulary raise TokenRangeError.

        stats: also fill Result.entropy, .rank and .varentropy. detect: fill Result.detect,
        the contamination scores of `score --detect` (min_k: the percentages, an int or a
        sequence of ints in 1..100, default 20; ref_ratio with compare=); a prompt of one
        token raises InvalidArgumentError. compare: another open Model with the same
        vocabulary (it may be this very model): the prompt also runs through it and
        Result.kld, .same_top1, .dp, .kld_mean and .same_top1_pct are filled (no prefix
        cache is used then); a closed model, a non-Model or another vocabulary raises
        promptscore.Error (InvalidArgumentError / ArgumentTypeError / the library's error).

        prompt: a str (tokenized with add_special / parse_special, as the CLI's text prompts)
        or a sequence of token ids (verbatim). top_k: alternatives per position (0..n_vocab).
        logprobs_from: positions before it get no values (NaN / -1), e.g. len(context_ids) for
        a continuation; the values written are bitwise those without it.
        words: also make Result.words() (each word's surprisal with the beginning-of-word
        correction, as `score --words`; docs/api.md, "Words"); a tokenizer that marks no word
        start raises UnsupportedError.
        """
        self._open()
        top_k, logprobs_from = self._check_k(top_k, logprobs_from)
        add_special, parse_special, stats, detect = self._check_flags(add_special, parse_special,
                                                                      stats, detect)
        words = _bool(words, "words")
        ks = _min_k(detect, min_k)
        ids = self._prompt_ids(prompt, add_special, parse_special)
        self._check_compare(compare)
        params = self._score_params(top_k, stats or ks is not None, token_ids, words)
        det = (ks, self._detect_text(prompt, ids)) if ks is not None else None
        return self._score_ids(ids, params, logprobs_from, compare, bool(stats), det,
                               self._prompt_offsets(prompt, ids, add_special))

    def _check_compare(self, compare: Optional["Model"]) -> None:
        if compare is None:
            return
        if not isinstance(compare, Model):
            raise ArgumentTypeError("compare must be a promptscore.Model, not %s" %
                                    type(compare).__name__)
        compare._open()
        err = L.ps_error()
        _check(_C.ps_vocab_same(self._vocab, compare._vocab, byref(err)), err,
               "compare: the models' vocabularies differ")

    def score_many(self, prompts: Iterable[Union[str, Sequence[int]]], top_k: int = 0,
                   logprobs_from: Union[int, Iterable[int]] = 0, max_seqs: int = 16,
                   add_special: bool = True, parse_special: bool = True, stats: bool = False,
                   compare: Optional["Model"] = None, detect: bool = False,
                   min_k: Union[int, Iterable[int], None] = None,
                   token_ids: Optional[Sequence[int]] = None,
                   words: bool = False) -> Iterator[Result]:
        """Scores an iterable of prompts; yields one Result per prompt, in input order.

        Takes max_seqs prompts at a time (1..256) and packs their positions into shared
        forward passes (ps_score_batch, as `promptscore score --max-seqs N`), with the prefix
        cache: prompts sharing a prefix compute it once. Every result is bitwise what score()
        gives. logprobs_from: one int for every prompt, or an iterable of ints read in step
        with the prompts (one per prompt: an lm-eval batch's context lengths). The GIL is
        released while a group is scored. Prompts are read from the iterable
        one group ahead of what is yielded, so memory is bounded by max_seqs prompts. A prompt
        that fails raises its error (the message names its index) when its turn comes; the
        results before it are yielded first. stats, compare, detect, min_k and token_ids: as
        score().
        """
        self._open()
        add_special, parse_special, stats, detect = self._check_flags(add_special, parse_special,
                                                                      stats, detect)
        words = _bool(words, "words")
        ks = _min_k(detect, min_k)
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
        if isinstance(prompts, (str, bytes)):
            raise ArgumentTypeError("prompts must be an iterable of prompts, not a single %s" %
                                    type(prompts).__name__)
        try:
            it = iter(prompts)
        except TypeError:
            raise ArgumentTypeError("prompts must be an iterable, not %s" %
                                    type(prompts).__name__) from None
        self._check_compare(compare)
        params = self._score_params(top_k, stats or ks is not None, token_ids, words)
        return self._score_many(it, params, logprobs_from, lf_iter, max_seqs, add_special,
                                parse_special, bool(stats), compare, ks)

    def _score_many(self, it: Iterator[Any], params: Any, lf0: Any,
                    lf_iter: Optional[Iterator[Any]], max_seqs: int, add_special: bool,
                    parse_special: bool, shown: bool = False,
                    compare: Optional["Model"] = None,
                    ks: Optional[Tuple[int, ...]] = None) -> Iterator[Result]:
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
                                        compare, shown, ks)
            for r in results:
                if isinstance(r, Error):
                    raise r
                yield r
            base += len(group)

    @_guarded
    def _score_group(self, group: List[Any], froms: List[int], params: Any, base: int,
                     add_special: bool, parse_special: bool,
                     compare: Optional["Model"] = None, shown: bool = True,
                     ks: Optional[Tuple[int, ...]] = None) -> List[Union[Result, Error]]:
        """Scores one group of score_many: ps_score_batch over all of it, or, with one prompt
        or a failure, each prompt alone in order up to the first that fails (its Error ends
        the list)."""
        ids: List[Union[npt.NDArray[np.int32], Error]] = []
        offs: List[Optional[npt.NDArray[np.int64]]] = []
        for i, p in enumerate(group):
            try:
                pid = self._prompt_ids(p, add_special, parse_special)
                ids.append(pid)
                offs.append(self._prompt_offsets(p, pid, add_special))
            except Error as e:
                ids.append(e)
                offs.append(None)
        m = len(group)
        dets = [(ks, self._detect_text(p, a)) if ks is not None and not isinstance(a, Error)
                else None for p, a in zip(group, ids)]
        results: Optional[List[Union[Result, Error]]] = None
        short = ks is not None and any(not isinstance(a, Error) and len(a) < 2 for a in ids)
        if (m > 1 and compare is None and not short
                and not any(isinstance(a, Error) for a in ids)):
            arr = (L.ps_score_prompt * m)()
            for i, a in enumerate(ids):
                assert not isinstance(a, Error)
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
                    results = [Result(out[i].contents, self, froms[i], shown, dets[i], offs[i])
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
                    results.append(self._score_ids(a, params, froms[i], compare, shown,
                                                   dets[i], offs[i]))
                except Error as e:
                    e.message = "prompt %d: %s" % (base + i, e.message)
                    e.args = (e.message,)
                    results.append(e)
                    break
        return results

    def _score_ids(self, ids: npt.NDArray[np.int32], params: Any, logprobs_from: int,
                   compare: Optional["Model"] = None, shown: bool = True,
                   detect: Optional[Tuple[Tuple[int, ...], bytes]] = None,
                   offsets: Optional[npt.NDArray[np.int64]] = None) -> Result:
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
            return Result(res.contents, self, logprobs_from, shown, detect, offsets)
        finally:
            _C.ps_score_result_free(res)

    # -- (context, continuation) pairs: lm-evaluation-harness's loglikelihood
    @_guarded
    def tokenize_pair(self, context: str, continuation: str, add_special: bool = True,
                      parse_special: bool = True) -> "tuple[npt.NDArray[np.int32], int]":
        """lm-evaluation-harness's tokenization of a (context, continuation) pair
        (ps_vocab_tokenize_pair): returns (ids, continuation_start), the pair's tokens and the
        index of the first continuation token. The context's trailing whitespace moves to the
        continuation; the continuation's tokens are those of context + continuation past the
        context's own; an empty context is BOS (EOS where there is none). add_special: BOS in
        front when the model adds one; parse_special: special-token text is its token."""
        self._open()
        return self._pair(context, continuation, add_special, parse_special)

    def _pair(self, context: str, continuation: str, add_special: bool,
              parse_special: bool) -> "tuple[npt.NDArray[np.int32], int]":
        texts: List[bytes] = []
        for name, v in (("context", context), ("continuation", continuation)):
            if not isinstance(v, str):
                raise ArgumentTypeError("%s must be a str, not %s" % (name, type(v).__name__))
            try:
                texts.append(v.encode("utf-8"))
            except UnicodeEncodeError as e:
                raise InvalidArgumentError("%s is not valid Unicode (%s)" % (name, e)) from None
        c, t = texts
        cap = len(c) + len(t) + 8
        n, start = c_int32(), c_int32()
        err = L.ps_error()
        while True:
            out = np.empty(cap, np.int32)
            st = _C.ps_vocab_tokenize_pair(self._vocab, c, len(c), t, len(t), bool(add_special),
                                           bool(parse_special),
                                           out.ctypes.data_as(POINTER(c_int32)), cap, byref(n),
                                           byref(start), byref(err))
            _check(st, err, "cannot tokenize the pair")
            if n.value <= cap:
                return out[:n.value], int(start.value)
            cap = n.value

    def loglikelihood(self, context: str, continuation: str, add_special: bool = True,
                      parse_special: bool = True) -> "tuple[float, bool]":
        """lm-evaluation-harness's loglikelihood of one request: (log P(continuation |
        context), is_greedy), the sum of the continuation tokens' float32 logprobs in double
        and whether each is its position's top-1 (ties by ascending id), with the tokens of
        tokenize_pair. Bitwise the CLI's continuation_logprob and is_greedy."""
        return self.loglikelihood_many([(context, continuation)], 1, add_special,
                                       parse_special)[0]

    def loglikelihood_many(self, pairs: Iterable[Tuple[str, str]], max_seqs: int = 16,
                           add_special: bool = True,
                           parse_special: bool = True) -> "List[tuple[float, bool]]":
        """lm-eval's loglikelihood over an iterable of (context, continuation) pairs: a list of
        (float, bool), in order. max_seqs pairs at a time share forward passes, and contexts
        they share (the choices of one question) are computed once through the prefix cache.
        A pair that fails raises its error, naming its index."""
        self._open()
        max_seqs = _int(max_seqs, "max_seqs", 1, _CHUNK)
        if isinstance(pairs, (str, bytes)):
            raise ArgumentTypeError("pairs must be an iterable of (context, continuation)")
        out: "List[tuple[float, bool]]" = []
        group: "List[tuple[npt.NDArray[np.int32], int]]" = []
        for i, pair in enumerate(pairs):
            try:
                context, continuation = pair
            except (TypeError, ValueError):
                raise ArgumentTypeError("pair %d must be a (context, continuation) pair, not %r"
                                        % (i, pair)) from None
            try:
                group.append(self._pair(context, continuation, add_special, parse_special))
            except Error as e:
                e.message = "pair %d: %s" % (i, e.message)
                e.args = (e.message,)
                raise
            if len(group) == max_seqs:
                out.extend(self._pairs_group(group, len(out)))
                group = []
        if group:
            out.extend(self._pairs_group(group, len(out)))
        return out

    @_guarded
    def _pairs_group(self, group: "List[tuple[npt.NDArray[np.int32], int]]",
                     base: int) -> "List[tuple[float, bool]]":
        m = len(group)
        params = (L.ps_score_params * m)()
        arr = (L.ps_score_prompt * m)()
        for i, (ids, start) in enumerate(group):
            params[i] = self._score_params(0)
            params[i].continuation_start = start
            arr[i].tokens = ids.ctypes.data_as(POINTER(c_int32))
            arr[i].n_tokens = len(ids)
            arr[i].params = cast(byref(params[i]), POINTER(L.ps_score_params))
        res = (POINTER(L.ps_score_result) * m)()
        err = L.ps_error()
        with self._lock:
            self._open()
            st = _C.ps_score_batch(self._session, arr, m, m, res, byref(err))
        _check(st, err, "pairs %d..%d" % (base, base + m - 1))
        try:
            return [(float(res[i].contents.continuation_logprob),
                     bool(res[i].contents.is_greedy)) for i in range(m)]
        finally:
            for i in range(m):
                _C.ps_score_result_free(res[i])

    @_guarded
    def perplexity(self, text: Union[str, Sequence[int]], ctx: Optional[int] = None,
                   stride: Optional[int] = None, mode: str = "sliding",
                   max_chunks: Optional[int] = None,
                   compare: Union["Model", Sequence["Model"], None] = None) -> PerplexityResult:
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
        compare (mode "llama"): a list of open Models with the same vocabulary (or one Model),
        compared with this one in the same pass as `perplexity --compare A --compare B`
        does (this model runs once); PerplexityResult.compare gets their statistics.
        """
        self._open()
        if isinstance(compare, Model):
            compare = [compare]
        models: List[Model] = list(compare or [])
        if models and mode != "llama":
            raise InvalidArgumentError("compare is for mode 'llama'")
        for c in models:
            self._check_compare(c)
        if len(set(map(id, models))) != len(models):
            raise InvalidArgumentError("compare: the same Model given twice")
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
        with ExitStack() as stack:
            for c in models:
                stack.enter_context(c._using())
            others: List[c_void_p] = []
            try:
                for c in models:
                    others.append(c._new_session(need))
                arr = (c_void_p * max(len(others), 1))(*others)
                pp.compares = cast(arr, POINTER(c_void_p)) if others else None
                pp.n_compares = len(others)
                with self._lock:
                    self._open()
                    s = self._new_session(need)
                    try:
                        st = _C.ps_perplexity(s, ids.ctypes.data_as(POINTER(c_int32)), len(ids),
                                              byref(pp), byref(res), byref(err))
                    finally:
                        _C.ps_session_free(s)
            finally:
                for o in others:
                    _C.ps_session_free(o)
        _check(st, err)
        try:
            return PerplexityResult(res.contents)
        finally:
            _C.ps_ppl_result_free(res)

    def __repr__(self) -> str:
        if self._model is None:
            return "<promptscore.Model closed>"
        return "<promptscore.Model %s (%s, %d tokens)>" % (self.name, self.arch, self.n_vocab)
