"""ctypes declarations of libpromptscore (include/promptscore.h), and where the library is found.

Every structure here mirrors the C one field for field; every function gets argtypes/restype so
that ctypes converts and checks arguments. ctypes.CDLL releases the GIL for the duration of each
foreign call, so scoring runs while other Python threads do.

The library is looked for, in order: $PROMPTSCORE_LIB (a path), the copy bundled in this package
at install time (build_backend.py), then libpromptscore.so.0 on the loader's path (`make install`).
"""
import ctypes
import os
from typing import Any, Tuple
from ctypes import (POINTER, Structure, c_bool, c_char, c_char_p, c_double, c_float, c_int,
                    c_int32, c_int64, c_size_t, c_uint64, c_void_p)

SONAME = "libpromptscore.so.0"

# status codes (ps_status)
PS_OK = 0
PS_ERR_INVALID_ARG = -1
PS_ERR_NOMEM = -2
PS_ERR_IO = -3
PS_ERR_FORMAT = -4
PS_ERR_UNSUPPORTED = -5
PS_ERR_NAN = -6
PS_ERR_TOKEN_RANGE = -7
PS_ERR_CONTEXT = -8
PS_ERR_NOT_FOUND = -9
PS_ERR_CANCELLED = -10
PS_ERR_NETWORK = -11
PS_ERR_INTERNAL = -12
PS_ERR_LIMIT = -13


class ps_error(Structure):
    _fields_ = [("code", c_int32), ("offset", c_int64), ("message", c_char * 256)]


class ps_model_params(Structure):
    _fields_ = [("n_ctx", c_int32), ("vocab_only", c_bool), ("no_repack", c_bool)]


class ps_model_info(Structure):
    _fields_ = [("arch", c_char * 32), ("name", c_char * 128), ("file", c_char * 128),
                ("weight_type", c_char * 16),
                ("n_vocab", c_int32), ("n_ctx", c_int32), ("n_ctx_train", c_int32),
                ("n_embd", c_int32), ("n_layer", c_int32), ("n_head", c_int32),
                ("n_head_kv", c_int32), ("head_dim", c_int32), ("n_ff", c_int32),
                ("n_expert", c_int32), ("n_expert_used", c_int32),
                ("n_params", c_int64), ("file_bytes", c_int64), ("vocab_only", c_bool),
                ("tile_bytes", c_int64), ("tile_seconds", c_double)]


class ps_session_params(Structure):
    _fields_ = [("n_ctx", c_int32), ("n_batch", c_int32), ("pool", c_void_p), ("isa", c_int),
                ("act", c_int), ("kv_type", c_int)]


class ps_score_params(Structure):
    _fields_ = [("k", c_int32), ("chunk", c_int32), ("max_tokens", c_int32),
                ("temperature", c_float), ("top_p", c_float), ("seed", c_uint64),
                ("stop", c_void_p), ("n_stop", c_int32), ("stop_at_eos", c_bool),
                ("cancel", c_void_p), ("cancel_ctx", c_void_p), ("cache", c_void_p),
                ("stats", c_bool), ("compare", c_void_p),
                # added with many compared models
                ("compares", c_void_p), ("n_compares", c_int32),
                # appended: named tokens, a continuation
                ("token_ids", POINTER(c_int32)), ("n_token_ids", c_int32),
                ("continuation_start", c_int32),
                ("words", c_bool)]  # issue 50


class ps_score_result(Structure):
    _fields_ = [("n_prompt", c_int32), ("n_gen", c_int32), ("n_total", c_int32), ("k", c_int32),
                ("tokens", POINTER(c_int32)), ("logprobs", POINTER(c_float)),
                ("top_ids", POINTER(c_int32)), ("top_logprobs", POINTER(c_float)),
                ("sum_logprob", c_double), ("finish", c_int), ("stop_text_len", c_int32),
                ("entropy", POINTER(c_float)), ("rank", POINTER(c_int32)),
                ("kld", POINTER(c_float)), ("same_top1", POINTER(c_int32)),
                ("dp", POINTER(c_float)),
                # added with many compared models
                ("n_compares", c_int32), ("compares", c_void_p),
                ("varentropy", POINTER(c_float)), ("compare_logprob", POINTER(c_float)),
                # appended: named tokens, a continuation
                ("n_token_ids", c_int32), ("token_id_logprobs", POINTER(c_float)),
                ("continuation_start", c_int32), ("continuation_logprob", c_double),
                ("is_greedy", c_bool),
                # appended: words
                ("word_start", POINTER(c_float)), ("word_start_nonbow", c_float)]


PS_DETECT_MAX_K = 16


class ps_detect_scores(Structure):
    _fields_ = [("n_k", c_int32), ("k", c_int32 * PS_DETECT_MAX_K),
                ("count", c_int32 * PS_DETECT_MAX_K), ("min_k", c_double * PS_DETECT_MAX_K),
                ("min_k_pp", c_double * PS_DETECT_MAX_K), ("n_scored", c_int32),
                ("mean_nll", c_double), ("ref_mean_nll", c_double), ("ref_ratio", c_double)]


class ps_word(Structure):
    _fields_ = [("text", c_void_p), ("len", c_int32), ("offset", c_int64),
                ("first_token", c_int32), ("n_tokens", c_int32), ("surprisal", c_double),
                ("surprisal_naive", c_double)]


class ps_words(Structure):
    _fields_ = [("n_words", c_int32), ("words", POINTER(ps_word)), ("text_", c_void_p)]


class ps_score_prompt(Structure):
    _fields_ = [("tokens", POINTER(c_int32)), ("n_tokens", c_int32),
                ("params", POINTER(ps_score_params))]


class ps_prefix_cache_params(Structure):
    _fields_ = [("budget_bytes", c_int64), ("block", c_int32)]


class ps_prefix_cache_stats(Structure):
    _fields_ = [("hits", c_int64), ("misses", c_int64), ("inserts", c_int64),
                ("evictions", c_int64), ("bytes", c_int64), ("budget_bytes", c_int64),
                ("blocks", c_int64), ("block", c_int32), ("idle_bytes", c_int64)]


class ps_ppl_compare(Structure):
    _fields_ = [("model", c_char_p), ("count", c_int64),
                ("ppl_q", c_double), ("ppl_q_stderr", c_double), ("ppl_base", c_double),
                ("ppl_base_stderr", c_double), ("cor_ln_ppl", c_double),
                ("ln_ppl_ratio", c_double), ("ln_ppl_ratio_stderr", c_double),
                ("ppl_ratio", c_double), ("ppl_ratio_stderr", c_double),
                ("ppl_diff", c_double), ("ppl_diff_stderr", c_double),
                ("kld_mean", c_double), ("kld_mean_stderr", c_double),
                ("dp_mean", c_double), ("dp_mean_stderr", c_double),
                ("rms_dp", c_double), ("rms_dp_stderr", c_double),
                ("same_top", c_double), ("same_top_stderr", c_double),
                ("kld_max", c_float), ("kld_median", c_float), ("kld_min", c_float),
                ("kld_pct", c_float * 8),
                ("dp_max", c_float), ("dp_median", c_float), ("dp_min", c_float),
                ("dp_pct", c_float * 10)]


class ps_ppl_params(Structure):
    _fields_ = [("mode", c_int), ("ctx", c_int32), ("stride", c_int32), ("max_chunks", c_int32),
                ("chunk", c_int32), ("on_window", c_void_p), ("user", c_void_p),
                # added with many compared models
                ("compares", POINTER(c_void_p)), ("n_compares", c_int32)]


class ps_ppl_result(Structure):
    _fields_ = [("mode", c_int), ("perplexity", c_double), ("perplexity_stderr", c_double),
                ("mean_nll", c_double), ("tokens_scored", c_int64), ("n_tokens", c_int32),
                ("n_windows", c_int32), ("ctx", c_int32), ("stride", c_int32),
                ("running", POINTER(c_double)),
                # added with many compared models
                ("n_compares", c_int32), ("compares", POINTER(ps_ppl_compare))]


def _find() -> str:
    env = os.environ.get("PROMPTSCORE_LIB")
    if env and env != "system":
        return env
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), SONAME)
    if os.path.exists(here):
        return here
    return SONAME


def _declare(lib: ctypes.CDLL) -> Any:
    P = POINTER
    err = P(ps_error)
    sigs = {
        "ps_version": ([], c_char_p),
        "ps_status_str": ([c_int32], c_char_p),
        "ps_pool_create": ([c_int32, P(c_void_p)], c_int32),
        "ps_pool_free": ([c_void_p], None),
        "ps_model_default_params": ([], ps_model_params),
        "ps_model_load": ([c_char_p, P(ps_model_params), P(c_void_p), err], c_int32),
        "ps_model_free": ([c_void_p], None),
        "ps_model_get_info": ([c_void_p, P(ps_model_info)], None),
        "ps_model_vocab": ([c_void_p], c_void_p),
        "ps_vocab_n_tokens": ([c_void_p], c_int32),
        "ps_vocab_bos": ([c_void_p], c_int32),
        "ps_vocab_eos": ([c_void_p], c_int32),
        "ps_vocab_add_bos": ([c_void_p], c_bool),
        "ps_vocab_is_control": ([c_void_p, c_int32], c_bool),
        "ps_detect_compute": ([P(ps_score_result), P(c_int32), c_int32, P(ps_detect_scores), err],
                              c_int32),
        "ps_vocab_tokenize": ([c_void_p, c_char_p, c_size_t, c_bool, c_bool, P(c_int32), c_int32,
                               P(c_int32), err], c_int32),
        "ps_vocab_tokenize_pair": ([c_void_p, c_char_p, c_size_t, c_char_p, c_size_t, c_bool,
                                    c_bool, P(c_int32), c_int32, P(c_int32), P(c_int32), err],
                                   c_int32),
        "ps_vocab_token_bytes": ([c_void_p, c_int32, P(c_void_p), P(c_size_t)], c_int32),
        "ps_vocab_detokenize": ([c_void_p, P(c_int32), c_int32, c_bool, c_void_p, c_size_t,
                                 P(c_size_t)], c_int32),
        "ps_vocab_byte_offsets": ([c_void_p, c_char_p, c_size_t, P(c_int32), c_int32, c_bool,
                                   P(c_int32)], c_int32),
        "ps_session_default_params": ([], ps_session_params),
        "ps_session_create": ([c_void_p, P(ps_session_params), P(c_void_p), err], c_int32),
        "ps_session_free": ([c_void_p], None),
        "ps_score_default_params": ([], ps_score_params),
        "ps_score_tokens": ([c_void_p, P(c_int32), c_int32, P(ps_score_params),
                             P(P(ps_score_result)), err], c_int32),
        "ps_score_result_free": ([P(ps_score_result)], None),
        "ps_vocab_same": ([c_void_p, c_void_p, err], c_int32),
        "ps_score_batch": ([c_void_p, P(ps_score_prompt), c_int32, c_int32,
                            P(P(ps_score_result)), err], c_int32),
        "ps_prefix_cache_default_params": ([], ps_prefix_cache_params),
        "ps_prefix_cache_create": ([c_void_p, P(ps_prefix_cache_params), P(c_void_p), err],
                                   c_int32),
        "ps_prefix_cache_free": ([c_void_p], None),
        "ps_prefix_cache_get_stats": ([c_void_p, P(ps_prefix_cache_stats)], None),
        "ps_ppl_default_params": ([], ps_ppl_params),
        "ps_perplexity": ([c_void_p, P(c_int32), c_int32, P(ps_ppl_params),
                           P(P(ps_ppl_result)), err], c_int32),
        "ps_ppl_result_free": ([P(ps_ppl_result)], None),
        "ps_score_words": ([c_void_p, P(ps_score_result), P(c_int32), P(P(ps_words)), err],
                           c_int32),
        "ps_words_free": ([P(ps_words)], None),
    }
    for name, (args, res) in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = res
    return lib


def load() -> Tuple[Any, str]:
    path = _find()
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(
            "promptscore: cannot load %s (%s). Build it with `make -j2` in the repository root "
            "and reinstall the package, or set PROMPTSCORE_LIB to a libpromptscore.so.0" %
            (path, e)) from e
    try:
        return _declare(lib), path
    except AttributeError as e:
        raise ImportError("promptscore: %s lacks a function this package needs (%s): it is "
                          "older than the package; rebuild and reinstall" % (path, e)) from e


# The library, loaded once when the package is imported (every module of the package uses it).
LIB: Any
LIB_PATH: str
LIB, LIB_PATH = load()
