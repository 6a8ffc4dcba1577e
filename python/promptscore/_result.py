"""The results of scoring: Result (one prompt's per-token arrays, copied out of C memory) and
PerplexityResult (the numbers `promptscore perplexity --json` prints). Result.to_dict() is the
JSON object of a `promptscore score` line, written by the rules of src/front/json.c: each
float32 as the number its shortest "%.6g".."%.9g" form reads back as, -inf as -9999.0, NaN as
None, top_logprobs keyed by token text with the first of equal texts kept."""
import math
import re
import zlib
from ctypes import POINTER, byref, c_int32, string_at
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Tuple, Union

import numpy as np
import numpy.typing as npt

from . import _lib as L
from ._errors import ArgumentTypeError, InvalidArgumentError, _check, _int
from ._lib import LIB as _C

if TYPE_CHECKING:
    from ._model import Model

_BAD_UTF8 = re.compile("[\udc80-\udcff]+")


def _clean_text(b: bytes) -> str:
    """A token's bytes as the CLI writes them: valid UTF-8 kept, each run of invalid bytes one
    U+FFFD (src/front/json.c, append_utf8_clean)."""
    return _BAD_UTF8.sub("\ufffd", b.decode("utf-8", "surrogateescape"))


def _f32_json(v: Any) -> Optional[float]:
    """A float32 as the CLI writes it, read back as a Python float: the shortest "%.{6..9}g"
    that parses to the same float32 bits (strtof's rounding, checked exactly), -inf -> -9999.0,
    NaN and +inf -> None."""
    f = np.float32(v)
    if math.isnan(f) or f == math.inf:
        return None
    if f == -math.inf:
        return -9999.0
    x = float(f)
    # the interval of decimals that round to f (its ends are exact doubles)
    lo = (x + float(np.nextafter(f, np.float32(-np.inf)))) / 2
    hi = (x + float(np.nextafter(f, np.float32(np.inf)))) / 2
    even = (int(f.view(np.uint32)) & 1) == 0
    for prec in (6, 7, 8):
        t = "%.*g" % (prec, x)
        d = float(t)
        if lo < d < hi:
            return d
        if d == lo or d == hi:  # the decimal may sit on, or just inside, an end: exactly
            q = Fraction(t)
            if Fraction(lo) < q < Fraction(hi) or (even and q in (Fraction(lo), Fraction(hi))):
                return d
    return float("%.9g" % x)


def _f64_json(v: float) -> Optional[float]:
    """A double as the CLI writes it (its %.15g..%.17g form reads back as the same double)."""
    if math.isnan(v) or v == math.inf:
        return None
    return -9999.0 if v == -math.inf else float(v)


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
      token_bytes   list of bytes: each token's raw bytes (ps_vocab_token_bytes; may be
                    invalid UTF-8 alone, e.g. one byte of a multi-byte character)
      text_offsets  int64 (n,): where each token's text starts in "".join(tokens), in code
                    points (the CLI's "text_offset")
      prompt_offsets int64 (n,) for a text prompt, else None: where token i starts in the
                    prompt's UTF-8 bytes, -1 where the CLI's "prompt_offset" is null (the BOS
                    added, a lone SentencePiece space prefix, a token the text does not spell)
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
      varentropy    float32 (n,) with stats=True, else None: the variance of log p under p
                    of that distribution (nats^2); NaN at 0
      detect        dict with detect=True, else None: the CLI's "detect" object, keys as
                    there but the percentages as ints: {"min_k": {20: x}, "min_k_pp": {20: y},
                    "zlib_ratio": z} (+ "ref_ratio" with compare=); an empty selection is NaN
                    (the CLI writes null), a zero sigma gives what IEEE division gives
      entropy/rank/kld/same_top1/dp/varentropy are not masked by logprobs_from.
      token_id_logprobs float32 (n, m) with token_ids= (m ids), else None: row i holds the
                    logprobs of the named ids in the distribution that scored token i, in the
                    order asked, whatever their rank (the CLI's "token_id_logprobs"); NaN at 0
                    and before logprobs_from
      continuation_start, continuation_logprob, is_greedy: for a (context, continuation)
                    pair (Model.loglikelihood*), else None: where the continuation starts in
                    token_ids, the sum of its float32 logprobs in double, and whether each of
                    its tokens is the top-1 (the CLI's fields)
    """

    __slots__ = ("token_ids", "logprobs", "top_ids", "top_logprobs", "sum_logprob",
                 "mean_logprob", "perplexity", "n_tokens", "logprobs_from", "_tokens",
                 "_offsets", "entropy", "rank", "kld", "same_top1", "dp", "kld_mean",
                 "same_top1_pct", "varentropy", "detect", "token_id_logprobs",
                 "continuation_start", "continuation_logprob", "is_greedy", "_words",
                 "token_bytes", "prompt_offsets", "_texts")

    token_ids: npt.NDArray[np.int32]
    logprobs: npt.NDArray[np.float32]
    top_ids: npt.NDArray[np.int32]
    top_logprobs: npt.NDArray[np.float32]
    sum_logprob: float
    mean_logprob: float
    perplexity: float
    n_tokens: int
    logprobs_from: int
    _tokens: List[str]
    token_bytes: List[bytes]
    _texts: Dict[int, str]
    prompt_offsets: Optional[npt.NDArray[np.int64]]
    _offsets: Optional[npt.NDArray[np.int64]]
    entropy: Optional[npt.NDArray[np.float32]]
    rank: Optional[npt.NDArray[np.int32]]
    kld: Optional[npt.NDArray[np.float32]]
    same_top1: Optional[npt.NDArray[np.int8]]
    dp: Optional[npt.NDArray[np.float32]]
    kld_mean: Optional[float]
    same_top1_pct: Optional[float]
    varentropy: Optional[npt.NDArray[np.float32]]
    detect: Optional[Dict[str, Any]]
    token_id_logprobs: Optional[npt.NDArray[np.float32]]
    continuation_start: Optional[int]
    continuation_logprob: Optional[float]
    is_greedy: Optional[bool]
    _words: Optional[List[Dict[str, Any]]]

    def __init__(self, res: Any, model: "Model", logprobs_from: int, show_stats: bool = True,
                 detect: Optional[Tuple[Tuple[int, ...], bytes]] = None,
                 prompt_offsets: Optional[npt.NDArray[np.int64]] = None) -> None:
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
        ids = self.token_ids.tolist()
        self.token_bytes = model._token_bytes(ids)
        self._tokens = model._token_texts(ids)
        if k > 0:  # the texts of the top ids, for to_dict (the model's cache: Python memory)
            model._token_texts(np.unique(self.top_ids).tolist())
        self._texts = model._texts
        self._offsets = None
        self.prompt_offsets = prompt_offsets
        def arr(ptr: Any, dtype: Any = None) -> Any:
            if not ptr:
                return None
            a = np.ctypeslib.as_array(ptr, (n,)).copy()
            return a.astype(dtype) if dtype is not None else a
        self.detect = _detect_dict(res, detect) if detect is not None else None
        self.entropy = arr(res.entropy) if show_stats else None
        self.rank = arr(res.rank) if show_stats else None
        self.varentropy = arr(res.varentropy) if show_stats else None
        self.kld = arr(res.kld)
        self.same_top1 = arr(res.same_top1, np.int8)
        self.dp = arr(res.dp)
        self.kld_mean = self.same_top1_pct = None
        if self.kld is not None and self.same_top1 is not None:
            kl = 0.0
            same = 0
            for i in range(1, n):
                kl += float(self.kld[i])
                same += int(self.same_top1[i] == 1)
            m = n - 1
            self.kld_mean = kl / m if m > 0 else math.nan
            self.same_top1_pct = 100.0 * same / m if m > 0 else math.nan
        self.token_id_logprobs = None
        if res.token_id_logprobs and res.n_token_ids > 0:
            t = res.n_token_ids
            tl = np.ctypeslib.as_array(res.token_id_logprobs, (n * t,)).reshape(n, t).copy()
            if logprobs_from > 0:
                tl[:min(logprobs_from, n)] = np.nan
            self.token_id_logprobs = tl
        self.continuation_start = self.continuation_logprob = self.is_greedy = None
        if res.continuation_start > 0:
            self.continuation_start = int(res.continuation_start)
            self.continuation_logprob = float(res.continuation_logprob)
            self.is_greedy = bool(res.is_greedy)
        self._words = _words_of(res, model, prompt_offsets) if res.word_start else None

    def words(self) -> List[Dict[str, Any]]:
        """With score(..., words=True): one dict per word of the text, as `score --words`
        writes them: {"word", "offset", "n_tokens", "surprisal", "surprisal_bits",
        "surprisal_naive"} (nats, bits = nats / ln 2; None where the CLI writes null). offset
        counts bytes of the token texts (the SentencePiece space prefix left out), which is the
        text's own offset unless it holds <unk> or special-token text. Raises
        InvalidArgumentError when the prompt was scored without words=True."""
        if self._words is None:
            from ._errors import InvalidArgumentError
            raise InvalidArgumentError("no words: score with words=True")
        return [dict(w) for w in self._words]

    @property
    def tokens(self) -> List[str]:
        """Each token's text (list of str), the CLI's "tokens"."""
        return self._tokens

    @property
    def text_offsets(self) -> npt.NDArray[np.int64]:
        """int64 (n,): where each token's text starts in "".join(tokens), in code points."""
        if self._offsets is None:
            lens = np.fromiter((len(s) for s in self.tokens), np.int64, self.n_tokens)
            off = np.zeros(self.n_tokens, np.int64)
            if self.n_tokens > 1:
                np.cumsum(lens[:-1], out=off[1:])
            self._offsets = off
        return self._offsets

    def to_dict(self, id: Any = None) -> Dict[str, Any]:
        """The JSON object `promptscore score` writes for this prompt, with the same options
        (top_k as the line's "logprobs", logprobs_from, stats, compare, detect, token_ids,
        words): {"id", "logprobs": {tokens, token_logprobs, top_logprobs, text_offset,
        prompt_offset, token_ids, top_ids, [entropy, rank], [kld, same_top1, dp],
        [varentropy], [token_id_logprobs]}, "sum_logprob", "mean_logprob", "perplexity",
        [kld_mean, same_top1_pct], [detect], [continuation_logprob, is_greedy,
        continuation_start], [words], "n_tokens"}; equal to json.loads of that line. id: the
        value echoed as "id". Plain Python values (json.dumps-able); a float32 value v is the
        float its CLI text reads back as, so numpy.float32(value) has v's bits."""
        n = self.n_tokens
        lp = self.logprobs
        ids = self.token_ids.tolist()
        f32: Dict[int, Optional[float]] = {}

        def num(v: Any) -> Optional[float]:
            key = int(np.float32(v).view(np.uint32))
            if key not in f32:
                f32[key] = _f32_json(v)
            return f32[key]

        has = [not math.isnan(lp[i]) and i >= self.logprobs_from for i in range(n)]
        tops: List[Optional[Dict[str, Optional[float]]]] = []
        top_ids: List[Optional[List[List[Any]]]] = []
        for i in range(n):
            if not has[i]:
                tops.append(None)
                top_ids.append(None)
                continue
            row = []  # row_entries of json.c: the top K, then the scored token if not in them
            for j, t in enumerate(self.top_ids[i].tolist()):
                if t >= 0:
                    row.append((t, lp[i] if t == ids[i] else self.top_logprobs[i, j]))
            if not any(t == ids[i] for t, _ in row):
                row.append((ids[i], lp[i]))
            m: Dict[str, Optional[float]] = {}
            for t, v in row:
                if self._texts[t] not in m:  # equal texts: the first, in rank order
                    m[self._texts[t]] = num(v)
            tops.append(m)
            top_ids.append([[t, num(v)] for t, v in row])
        po = self.prompt_offsets
        obj: Dict[str, Any] = {
            "tokens": list(self.tokens),
            "token_logprobs": [num(v) for v in lp],  # NaN (entry 0, masked) -> None
            "top_logprobs": tops,
            "text_offset": self.text_offsets.tolist(),
            "prompt_offset": [int(po[i]) if po is not None and po[i] >= 0 else None
                              for i in range(n)],
            "token_ids": ids,
            "top_ids": top_ids,
        }
        for key in ("entropy", "rank", "kld", "same_top1", "dp", "varentropy"):
            a = getattr(self, key)
            if a is None:
                continue
            if a.dtype.kind == "f":
                obj[key] = [num(a[i]) if has[i] else None for i in range(n)]
            else:
                obj[key] = [int(a[i]) if has[i] else None for i in range(n)]
        if self.token_id_logprobs is not None:
            tl = self.token_id_logprobs
            obj["token_id_logprobs"] = [[num(v) for v in tl[i]] if has[i] else None
                                        for i in range(n)]
        out: Dict[str, Any] = {"id": id, "logprobs": obj,
                               "sum_logprob": _f64_json(self.sum_logprob),
                               "mean_logprob": _f64_json(self.mean_logprob),
                               "perplexity": _f64_json(self.perplexity)}
        if self.kld_mean is not None and self.same_top1_pct is not None:
            out["kld_mean"] = _f64_json(self.kld_mean)
            out["same_top1_pct"] = _f64_json(self.same_top1_pct)
        if self.detect is not None:
            d: Dict[str, Any] = {}
            for key in ("min_k", "min_k_pp"):
                d[key] = {str(k): _f64_json(v) for k, v in self.detect[key].items()}
            for key in ("zlib_ratio", "ref_ratio"):
                if key in self.detect:
                    d[key] = _f64_json(self.detect[key])
            out["detect"] = d
        if self.continuation_start is not None:
            out["continuation_logprob"] = _f64_json(self.continuation_logprob or 0.0)
            out["is_greedy"] = self.is_greedy
            out["continuation_start"] = self.continuation_start
        if self._words is not None:
            out["words"] = [dict(w) for w in self._words]
        out["n_tokens"] = n
        return out

    def __len__(self) -> int:
        return self.n_tokens

    def __repr__(self) -> str:
        return "<promptscore.Result n_tokens=%d sum_logprob=%.6g>" % (self.n_tokens,
                                                                     self.sum_logprob)


def _detect_dict(res: Any, detect: Tuple[Tuple[int, ...], bytes]) -> Dict[str, Any]:
    """The "detect" object of a result (ps_detect_compute plus the zlib ratio of the bytes the
    CLI compresses: Python's zlib is the same zlib at the same default level)."""
    ks, text = detect
    karr = (c_int32 * len(ks))(*ks)
    out = L.ps_detect_scores()
    err = L.ps_error()
    _check(_C.ps_detect_compute(byref(res), karr, len(ks), byref(out), byref(err)), err)
    d: Dict[str, Any] = {"min_k": {k: out.min_k[j] for j, k in enumerate(ks)},
                         "min_k_pp": {k: out.min_k_pp[j] for j, k in enumerate(ks)},
                         "zlib_ratio": out.mean_nll / len(zlib.compress(text))}
    if res.compare_logprob:
        d["ref_ratio"] = out.ref_ratio
    return d


def _min_k(detect: bool, min_k: Union[int, Iterable[int], None]) -> Optional[Tuple[int, ...]]:
    """detect / min_k arguments -> a tuple of percentages, or None without detect."""
    if not detect:
        if min_k is not None:
            raise InvalidArgumentError("min_k needs detect=True")
        return None
    if min_k is None:
        return (20,)
    if isinstance(min_k, (int, np.integer)):
        min_k = (int(min_k),)
    try:
        ks = tuple(min_k)
    except TypeError:
        raise ArgumentTypeError("min_k must be an int or a sequence of ints, not %s" %
                                type(min_k).__name__) from None
    if not 1 <= len(ks) <= L.PS_DETECT_MAX_K:
        raise InvalidArgumentError("min_k: 1 to %d percentages, got %d" %
                                   (L.PS_DETECT_MAX_K, len(ks)))
    return tuple(_int(k, "min_k", 1, 100) for k in ks)
def _num(x: float) -> Optional[float]:
    """A double as the CLI's JSON reads back: NaN -> None, -inf -> -9999.0."""
    if math.isnan(x):
        return None
    return -9999.0 if x == -math.inf else x


def _words_of(res: Any, model: "Model",
              offsets: Optional[npt.NDArray[np.int64]] = None) -> List[Dict[str, Any]]:
    """ps_score_words over a result scored with words (the library's one definition), with
    the prompt's byte offsets where it has them, as the CLI passes its prompt_offset."""
    from . import _lib as L
    from ._errors import _check
    w = POINTER(L.ps_words)()
    err = L.ps_error()
    off = None
    if offsets is not None and len(offsets) == res.n_prompt:
        o32 = np.ascontiguousarray(offsets, dtype=np.int32)
        off = o32.ctypes.data_as(POINTER(c_int32))
    _check(L.LIB.ps_score_words(model._vocab, byref(res), off, byref(w), byref(err)), err)
    try:
        out = []
        for k in range(w.contents.n_words):
            o = w.contents.words[k]
            b = string_at(o.text, o.len) if o.len else b""
            out.append({"word": _clean_text(b), "offset": int(o.offset),
                        "n_tokens": int(o.n_tokens), "surprisal": _num(o.surprisal),
                        "surprisal_bits": _num(o.surprisal / math.log(2)),
                        "surprisal_naive": _num(o.surprisal_naive)})
        return out
    finally:
        L.LIB.ps_words_free(w)


class PerplexityResult:
    """The summary of Model.perplexity: the numbers ``promptscore perplexity --json`` prints.

    Attributes: mode ("sliding" | "llama"), perplexity, perplexity_stderr (llama; NaN for
    sliding), mean_nll, tokens_scored, n_tokens (tokens of the text), windows (sliding: windows
    run; llama: chunks), ctx, stride (sliding), running (llama: float64 array of the running
    estimate after each chunk; empty for sliding), compare (with compare=: one dict per
    compared model, in the order given, with llama-perplexity --kl-divergence's statistics,
    the C struct ps_ppl_compare's fields: model, count, ppl_q, ppl_q_stderr, ppl_base, ...,
    kld_mean, kld_max, kld_median, kld_min, kld_pct (99.9, 99, 95, 90, 10, 5, 1, 0.1 %),
    dp_mean, dp_pct (99.9, 99, 95, 90, 75, 25, 10, 5, 1, 0.1 %), rms_dp, same_top; Δp values
    as fractions, not percent; else an empty list).
    """

    __slots__ = ("mode", "perplexity", "perplexity_stderr", "mean_nll", "tokens_scored",
                 "n_tokens", "windows", "ctx", "stride", "running", "compare")

    mode: str
    perplexity: float
    perplexity_stderr: float
    mean_nll: float
    tokens_scored: int
    n_tokens: int
    windows: int
    ctx: int
    stride: int
    running: npt.NDArray[np.float64]
    compare: List[Dict[str, Any]]

    def __init__(self, r: Any) -> None:
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
        self.compare = []
        for i in range(r.n_compares):
            c = r.compares[i]
            d: Dict[str, Any] = {}
            for f, _ in L.ps_ppl_compare._fields_:
                v = getattr(c, f)
                if f == "model":
                    v = v.decode("utf-8", "replace") if v else ""
                elif f in ("kld_pct", "dp_pct"):
                    v = list(v)
                d[f] = v
            self.compare.append(d)

    def __repr__(self) -> str:
        return "<promptscore.PerplexityResult %s perplexity=%.6g tokens=%d>" % (
            self.mode, self.perplexity, self.tokens_scored)


