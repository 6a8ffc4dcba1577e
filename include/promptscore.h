/*
 * promptscore.h — the one public header of promptscore, a prompt-scoring engine.
 *
 * For every token of a prompt, promptscore returns its log-probability under a GGUF language
 * model and the top-K alternatives, computed exactly (bitwise equal to a full float32
 * log-softmax) without ever materialising the full log-softmax.
 *
 * Conventions (the same for every function below):
 *   - Handles are opaque. Whoever creates a handle frees it with the matching *_free().
 *   - Functions that can fail return ps_status: PS_OK (0) or a negative code named by
 *     ps_status_str(). Those that can fail with a reason also take `ps_error *err` (may be NULL),
 *     filled with {code, message, byte offset (-1 when none)}.
 *   - Sizes and ids are sized integers: int32_t token ids and counts of tokens, int64_t sizes.
 *   - The library never prints, never calls exit(), and never aborts on bad input.
 *   - Thread safety: a ps_model is read-only after loading and may be shared by any number of
 *     threads. A ps_session (per-sequence state) and a ps_pool are used by one thread at a time.
 */
#ifndef PROMPTSCORE_H
#define PROMPTSCORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the functions the library exports: it is built with -fvisibility=hidden, so a shared
 * libpromptscore exports exactly the functions declared in this header. */
#if defined(__GNUC__) && __GNUC__ >= 4
#define PS_API __attribute__((visibility("default")))
#else
#define PS_API
#endif

#define PS_VERSION_MAJOR 0
#define PS_VERSION_MINOR 1
#define PS_VERSION_PATCH 0
#define PS_VERSION_STRING "0.1.0"

/* ------------------------------------------------------------------------------------------ */
/* Status and errors                                                                          */
/* ------------------------------------------------------------------------------------------ */

typedef int32_t ps_status;

enum {
    PS_OK = 0,
    PS_ERR_INVALID_ARG = -1,  /* a NULL pointer, a negative size, an option out of range */
    PS_ERR_NOMEM = -2,        /* an allocation failed */
    PS_ERR_IO = -3,           /* open/read/mmap/write failed */
    PS_ERR_FORMAT = -4,       /* malformed input file or text (GGUF, JSON, ...) */
    PS_ERR_UNSUPPORTED = -5,  /* valid but not supported: architecture, tensor type, tokenizer */
    PS_ERR_NAN = -6,          /* a NaN or +inf logit; the message names the row */
    PS_ERR_TOKEN_RANGE = -7,  /* a token id outside [0, n_vocab) */
    PS_ERR_CONTEXT = -8,      /* more positions than the context holds */
    PS_ERR_NOT_FOUND = -9,    /* a key, tensor, file or route that does not exist */
    PS_ERR_CANCELLED = -10,   /* the caller's cancel callback asked to stop */
    PS_ERR_NETWORK = -11,     /* a download failed */
    PS_ERR_INTERNAL = -12,    /* a bug in promptscore: please report it */
    PS_ERR_LIMIT = -13        /* input over a configured limit: size, count or nesting depth */
};

/* The name of a status code ("ok", "out of memory", ...). Never NULL; static storage. */
PS_API const char *ps_status_str(ps_status status);

/* What went wrong, for functions that parse or validate. `offset` is the byte offset in the
 * input (file or text) where the problem was found, or -1 when there is none. */
typedef struct {
    ps_status code;
    int64_t offset;
    char message[256];
} ps_error;

/* "0.1.0". Static storage. */
PS_API const char *ps_version(void);

/* ------------------------------------------------------------------------------------------ */
/* CPU features and the thread pool                                                           */
/* ------------------------------------------------------------------------------------------ */

typedef enum {
    PS_ISA_AUTO = 0,    /* the best the CPU has, or the PS_ISA environment variable */
    PS_ISA_SCALAR = 1,  /* portable C */
    PS_ISA_AVX2 = 2,    /* AVX2 + FMA + F16C */
    PS_ISA_AVX512 = 3,  /* AVX-512 F/BW/VL/DQ (+ BF16, VNNI where present) */
    PS_ISA_AMX = 4      /* AVX-512 plus Intel AMX tiles for the BF16 and Q8_0 matrix products
                         * (needs AMX-TILE/BF16/INT8 and the OS's permission; see
                         * ps_session_params.isa) */
} ps_isa;

/* The vector ISA that PS_ISA_AUTO resolves to: the best the CPU supports, lowered by the
 * environment variable PS_ISA=scalar|avx2|avx512 when it is set (an ISA the CPU lacks is never
 * chosen). Never PS_ISA_AMX: PS_ISA=amx reads as avx512 here; whether a session adds the AMX
 * tiles is decided by ps_session_create. */
PS_API ps_isa ps_isa_best(void);
/* True when the CPU can run `isa` (PS_ISA_AMX: the CPU has AMX and the OS allowed it). */
PS_API bool ps_isa_supported(ps_isa isa);
/* "scalar", "avx2", "avx512", "amx", "auto". */
PS_API const char *ps_isa_name(ps_isa isa);

/* A fixed set of worker threads that runs the library's parallel loops (pass it in
 * ps_session_params / ps_topk_params). Output of every promptscore kernel is independent of the
 * number of threads. A pool serves one parallel loop at a time (concurrent users of one pool
 * are serialised by an internal lock).
 * fork(): a child may go on using every pool, session, model and prefix cache the parent made
 * (e.g. Python's multiprocessing with the fork start method). The library's pthread_atfork
 * handlers make fork() wait until no parallel loop and no prefix-cache operation is running,
 * and in the child a pool starts its workers again before its next loop; the results are the
 * parent's, bit for bit. A session or result another parent thread was using at that moment
 * is not the child's to use. */
typedef struct ps_pool ps_pool;

/* n_threads >= 1 (the calling thread counts as one; n_threads - 1 workers are started).
 * n_threads == 0 means the number of online CPUs. Returns PS_ERR_INVALID_ARG, PS_ERR_NOMEM.
 * In a child of fork() the workers are started again by the pool's next loop; one that cannot
 * be started leaves its share to the others (same results, fewer threads). */
PS_API ps_status ps_pool_create(int32_t n_threads, ps_pool **out);
/* Stops and joins the workers. NULL is a no-op. */
PS_API void ps_pool_free(ps_pool *pool);
/* Number of threads (workers + caller). A NULL pool has 1. */
PS_API int32_t ps_pool_size(const ps_pool *pool);

/* ------------------------------------------------------------------------------------------ */
/* The top-K logprob kernel                                                                   */
/* ------------------------------------------------------------------------------------------ */

typedef enum {
    PS_DTYPE_F32 = 0,
    PS_DTYPE_F16 = 1,
    PS_DTYPE_BF16 = 2
} ps_dtype;

/* A batch of logit rows: row r starts at element r * row_stride of `data`. */
typedef struct {
    const void *data;
    ps_dtype dtype;
    int64_t n_rows;
    int64_t n_vocab;         /* >= 1 */
    int64_t row_stride;      /* in elements, >= n_vocab */
    const int32_t *targets;  /* n_rows scored token ids, or NULL; an entry < 0 means "none" */
} ps_logits;

/* Where results go. Every array is caller-owned and has the size stated, or is NULL where
 * allowed. */
typedef struct {
    float *lse;             /* n_rows: float32 logsumexp of the row (may be NULL) */
    float *target_logprob;  /* n_rows: float32(logit[target]) - lse (NULL when targets is NULL);
                               NaN where the row has no target */
    int32_t *top_ids;       /* n_rows * k: top-K ids, by logit descending, ties by ascending id */
    float *top_logprobs;    /* n_rows * k: float32(logit[id]) - lse for those ids */
    /* Optional statistics (NULL, the default of a zero-initialised struct: not computed, and
     * nothing else changes). */
    float *entropy;         /* n_rows: -sum_i p_i log p_i in nats over the whole row, with
                               log p_i = float32(logit[i]) - lse and p_i its canonical exp; -inf
                               logits add 0. Summed in a fixed order (the lse's 64 lanes, per
                               4096-logit chunk into double lane totals, then a pairwise tree):
                               the same bits on every ISA and thread count. NaN for a row of
                               only -inf */
    int32_t *rank;          /* n_rows: the 1-based rank of the target in the whole row, equal
                               logits ordered by ascending id as the top-K lists them (rank 1 is
                               the top-1); 0 where the row has no target (or targets is NULL) */
    /* Appended after the fields above (a zero-initialised struct still means "not computed"): */
    float *varentropy;      /* n_rows: the variance of log p under p, sum_i p_i (log p_i)^2 -
                               (sum_i p_i log p_i)^2 in nats^2, over the whole row in the same
                               read as the entropy (computed with it; the entropy keeps its
                               bits). From the same float32 log p_i and canonical p_i: S0 =
                               sum p_i, S1 = sum p_i log p_i (each product exact) and S2 = sum
                               p_i (log p_i)^2, all in double (64 lanes in element order, the
                               fixed pairwise tree); then S2/S0 - (S1/S0)^2 in double, raised
                               to 0 where rounding leaves it below, rounded once: the same
                               bits on every ISA and thread count. NaN for a row of only -inf */
} ps_topk_out;

typedef struct {
    int32_t k;       /* alternatives per row, >= 0 */
    ps_isa isa;      /* PS_ISA_AUTO picks ps_isa_best() */
    ps_pool *pool;   /* rows are spread over it; NULL = the calling thread */
} ps_topk_params;

/* k = 5, PS_ISA_AUTO, no pool. */
PS_API ps_topk_params ps_topk_default_params(void);

/*
 * The fast path: for every row, one canonical float32 logsumexp, the scored token's logprob,
 * and the exact top-K through a block-max prefilter (64-logit blocks; keep the K blocks with the
 * largest maxima, ties by ascending block index; select the exact top-K among their logits).
 *
 * Every output value is bitwise equal to what ps_topk_reference() gives, for every ISA and
 * thread count.
 *
 * Edge cases:
 *   - k == 0: only lse and target_logprob are written (top_ids/top_logprobs may be NULL).
 *   - k > n_vocab: the first n_vocab entries of each row hold every token; the rest are
 *     id -1, logprob -INFINITY.
 *   - -inf logits are ranked below every finite logit (ties among them by ascending id); a
 *     target at -inf has logprob -inf. A row entirely -inf has lse = -inf and every logprob
 *     -inf.
 *   - A NaN or +inf logit anywhere in a row: PS_ERR_NAN, the message names the row and column
 *     (the lowest such row); outputs are then unspecified.
 *   - A target id >= n_vocab: PS_ERR_TOKEN_RANGE naming the row (checked for every row before
 *     any logit is read, so it wins over PS_ERR_NAN).
 *   - Padding between n_vocab and row_stride is never read.
 * Returns PS_OK, PS_ERR_INVALID_ARG (bad sizes/pointers/dtype/ISA not on this CPU), PS_ERR_NAN,
 * PS_ERR_TOKEN_RANGE, PS_ERR_NOMEM. Thread safety: reentrant (scratch is per call).
 */
PS_API ps_status ps_topk_compute(const ps_topk_params *params, const ps_logits *logits,
                          const ps_topk_out *out, ps_error *err);

/* The reference path: materialises the full float32 log-softmax row (logit - lse with the same
 * canonical lse) and sorts all of it with the same tie rule. Slow; kept for tests and
 * benchmarks. Same contract and outputs as ps_topk_compute. */
PS_API ps_status ps_topk_reference(const ps_topk_params *params, const ps_logits *logits,
                            const ps_topk_out *out, ps_error *err);

/* KL divergence KL(base || other) = sum_i p_base(i) (log p_base(i) - log p_other(i)) in nats
 * over the whole vocabulary, per row, from float32 log-probabilities (logit - the canonical
 * lse of each row) and p_base(i) the canonical exp of its logprob; the terms are summed in the
 * same fixed order as ps_topk_out.entropy (same bits on every ISA and thread count; a batch
 * compared with itself gives exactly 0). base and other must have the same n_rows, n_vocab
 * and dtype (targets are ignored); kld has n_rows floats (NaN for a row of only -inf; +inf
 * where other has -inf where base does not). params: isa and pool (k is ignored). Returns
 * PS_OK, PS_ERR_INVALID_ARG (shapes differ, NULL pointers), PS_ERR_NAN (a NaN or +inf logit
 * in either; the message names the row), PS_ERR_NOMEM. Reentrant. */
PS_API ps_status ps_kld_compute(const ps_topk_params *params, const ps_logits *base,
                                const ps_logits *other, float *kld, ps_error *err);

/* The canonical float32 logsumexp of n f32 values (the one every path uses; see
 * src/kernels/topk.h): 64 lanes (lane j sums exp(x - shift) over the elements with index =
 * j mod 64, in order, per chunk of 4096; the shift is the first block's maximum, raised only
 * when a chunk's maximum exceeds it by more than 64), one FMA-polynomial exp, a fixed pairwise
 * tree over the lanes, and shift + log(sum) in double rounded once. Same bits on every ISA and
 * thread count; within 2 ulp of a float64 logsumexp (docs/figures.md has the error measured).
 * -inf when every value is -inf or n <= 0; NaN when x holds a NaN or +inf. */
PS_API float ps_lse_f32(const float *x, int64_t n);

/* ------------------------------------------------------------------------------------------ */
/* Models and vocabularies                                                                    */
/* ------------------------------------------------------------------------------------------ */

typedef struct ps_model ps_model;
typedef struct ps_vocab ps_vocab;

typedef struct {
    int32_t n_ctx;       /* context length; 0 = the model's own (`<arch>.context_length`) */
    bool vocab_only;     /* load only the tokenizer (files without tensors load this way) */
    bool no_repack;      /* keep BF16 weights and Q4_K / Q6_K experts only in the file's
                          * layout. By
                          * default BF16 matrices are copied once at load into the layout their
                          * kernel reads (info.tile_bytes), where PS_ISA does not turn that
                          * kernel off: where AMX is usable, its tile layout (as many bytes
                          * again as the BF16 weights); else, with AVX-512 BF16, the vdpbf16ps
                          * tile layout, which replaces the file's pages of those matrices in
                          * memory (with the float32 norm and bias vectors, copied out too; the
                          * matrices are read again only by a session on another road: act
                          * f32, or an ISA without AVX-512). Likewise, with AVX-512 VNNI and no
                          * AMX, the Q4_K and Q6_K expert matrices of a mixture-of-experts
                          * model are copied into 16-row tiles (1.03x / 1.01x their bytes),
                          * replacing their pages. Without a copy the kernel builds its tiles per call:
                          * the same results, slower */
} ps_model_params;

/* n_ctx = 0, vocab_only = false, no_repack = false. */
PS_API ps_model_params ps_model_default_params(void);

/* Loads a GGUF file (memory-mapped; weights are used in place, except the tile copies of BF16
 * matrices and Q4_K / Q6_K experts: ps_model_params.no_repack).
 * Supported (README "What loads" is the one full list): architectures llama (also with experts),
 * qwen2, qwen3, qwen3moe, qwen35, qwen35moe, gpt-oss, phi3, olmo2, gemma, gemma2, gemma3; tensor
 * types F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K .. Q6_K, IQ4_NL, IQ4_XS, MXFP4;
 * tokenizers llama (SentencePiece) and gpt2 (byte-level BPE with llama.cpp's pre-tokenizers).
 * Returns PS_OK, PS_ERR_IO (cannot open or map it; also a path that is not a regular file — a
 * FIFO, directory, device or socket — refused right after a non-blocking open, before any read,
 * so the call never waits on it; err names the kind), PS_ERR_FORMAT (malformed file: err names
 * key/tensor and offset), PS_ERR_UNSUPPORTED (architecture, tensor type, tokenizer),
 * PS_ERR_NOT_FOUND (missing key or tensor, named), PS_ERR_NOMEM. *out is set only on success. */
PS_API ps_status ps_model_load(const char *path, const ps_model_params *params, ps_model **out,
                        ps_error *err);
/* NULL is a no-op. Every session of the model must be freed first. */
PS_API void ps_model_free(ps_model *model);

typedef struct {
    char arch[32];          /* general.architecture: "llama", "qwen3", "gemma3", ... */
    char name[128];         /* general.name, or the file's base name */
    char file[128];         /* the file's base name ("" when loaded from an open ps_gguf) */
    char weight_type[16];   /* the type holding most matrix weights ("BF16", "Q8_0"); "" when
                               vocab-only */
    int32_t n_vocab;
    int32_t n_ctx;          /* effective context length */
    int32_t n_ctx_train;    /* from the file */
    int32_t n_embd, n_layer, n_head, n_head_kv, head_dim;
    int32_t n_ff;           /* the dense FFN's width, or one expert's when the file has none */
    int32_t n_expert, n_expert_used; /* experts per layer and per token (0 without experts) */
    int64_t n_params;       /* weights in the file (0 for vocab-only) */
    int64_t file_bytes;
    bool vocab_only;
    int64_t tile_bytes;     /* bytes of the weights' tile copies (BF16 matrices, Q4_K / Q6_K
                             * experts; 0: none; ps_model_params.no_repack) */
    double tile_seconds;    /* the time the copies took at load */
} ps_model_info;

PS_API void ps_model_get_info(const ps_model *model, ps_model_info *info);
/* The model's tokenizer; owned by the model. */
PS_API const ps_vocab *ps_model_vocab(const ps_model *model);

/* Number of tokens in the vocabulary. */
PS_API int32_t ps_vocab_n_tokens(const ps_vocab *vocab);
/* Special ids, -1 when the model has none. */
PS_API int32_t ps_vocab_bos(const ps_vocab *vocab);
PS_API int32_t ps_vocab_eos(const ps_vocab *vocab);
/* Whether the model asks for BOS at the start of a prompt (tokenizer.ggml.add_bos_token, or the
 * tokenizer's default). */
PS_API bool ps_vocab_add_bos(const ps_vocab *vocab);

/* Text (UTF-8 bytes, any content, len bytes) -> token ids.
 * add_bos: prepend BOS when the vocab has one and ps_vocab_add_bos() is true.
 * parse_special: when true, the text of control / user-defined tokens ("<s>", "<|endoftext|>")
 * becomes those tokens; when false it is plain text.
 * Writes up to `capacity` ids to `ids` (may be NULL when capacity is 0) and sets *n_ids to the
 * number the text needs; when *n_ids > capacity the call still returns PS_OK and the caller
 * retries with a larger buffer.
 * Returns PS_OK, PS_ERR_NOMEM, PS_ERR_INVALID_ARG. Thread safe (const vocab). */
PS_API ps_status ps_vocab_tokenize(const ps_vocab *vocab, const char *text, size_t len, bool add_bos,
                            bool parse_special, int32_t *ids, int32_t capacity, int32_t *n_ids,
                            ps_error *err);

/* The exact bytes one token stands for when detokenised (SentencePiece "▁" -> " ", byte tokens
 * "<0x0A>" -> "\n", BPE byte-level map undone, control tokens -> their own text such as "<s>").
 * The bytes may be invalid UTF-8 on their own. *bytes points into the vocab (valid as long as it
 * is). Returns PS_OK or PS_ERR_TOKEN_RANGE. */
PS_API ps_status ps_vocab_token_bytes(const ps_vocab *vocab, int32_t id, const char **bytes,
                               size_t *len);

/* The token's piece as stored in the file ("▁the", "<0x0A>", "Ġthe"). */
PS_API ps_status ps_vocab_token_piece(const ps_vocab *vocab, int32_t id, const char **piece,
                               size_t *len);

/* True for control tokens (BOS, EOS, <|im_start|>, ...). */
PS_API bool ps_vocab_is_control(const ps_vocab *vocab, int32_t id);

/* ids -> text, the concatenation of ps_vocab_token_bytes of each id, except that a
 * SentencePiece vocab that adds a space prefix drops the leading space of the first token when
 * remove_leading_space is true (so detokenize(tokenize(s)) == s). Writes up to capacity bytes
 * and a terminating NUL when it fits; *len is the number of bytes needed (without the NUL).
 * Returns PS_OK or PS_ERR_TOKEN_RANGE. */
PS_API ps_status ps_vocab_detokenize(const ps_vocab *vocab, const int32_t *ids, int32_t n_ids,
                              bool remove_leading_space, char *text, size_t capacity,
                              size_t *len);

/* lm-evaluation-harness's tokenization of a (context, continuation) pair (its TemplateLM
 * loglikelihood and _encode_pair), so that scoring the result and summing the continuation
 * gives the number lm-eval computes:
 *   - the context's trailing whitespace (the code points Python's str.isspace accepts) moves
 *     to the front of the continuation;
 *   - whole = encode(context + continuation), context_enc = encode(context), the
 *     continuation's tokens are whole[len(context_enc):], and the sequence is context_enc
 *     followed by them (where a token of whole spans the boundary the sequence is not whole:
 *     lm-eval scores this one too);
 *   - an empty context (before the move) gives context_enc = [BOS], or [EOS] where the
 *     vocabulary has no BOS, and continuation tokens encode(continuation) without BOS.
 * encode is ps_vocab_tokenize with add_bos (lm-eval's add_bos_token) and parse_special.
 * Writes the sequence to ids as ps_vocab_tokenize does (up to
 * capacity; *n_ids the count needed) and the index of the first continuation token to
 * *continuation_start (>= 1 on success). Returns PS_OK, PS_ERR_INVALID_ARG (NULL arguments;
 * a context of only whitespace without BOS, which leaves nothing to condition on; a
 * continuation that gives no token of its own, e.g. ""), PS_ERR_UNSUPPORTED (an empty
 * context in a vocabulary with neither BOS nor EOS), PS_ERR_NOMEM. Thread safe. */
PS_API ps_status ps_vocab_tokenize_pair(const ps_vocab *vocab, const char *context,
                                        size_t context_len, const char *continuation,
                                        size_t continuation_len, bool add_bos,
                                        bool parse_special, int32_t *ids, int32_t capacity,
                                        int32_t *n_ids, int32_t *continuation_start,
                                        ps_error *err);
/* Where each token of a text prompt starts in that text, in bytes: the CLI's and the server's
 * `prompt_offset` (docs/api.md, "The logprobs object"). ids: the n_ids ids ps_vocab_tokenize made
 * of text (len bytes) with the same parse_special; bos_added: ids[0] is the BOS it added.
 * offsets[i] = the byte offset of token i in text, or -1 for a token that stands for no byte
 * of it (the added BOS, a lone SentencePiece space prefix, a token the text does not spell at
 * that point such as <unk>, an id outside the vocabulary). Returns PS_OK, or
 * PS_ERR_INVALID_ARG (NULL vocab, NULL text with len > 0, NULL ids or offsets with
 * n_ids > 0, n_ids < 0). Thread safe (const vocab). */
PS_API ps_status ps_vocab_byte_offsets(const ps_vocab *vocab, const char *text, size_t len,
                                       const int32_t *ids, int32_t n_ids, bool bos_added,
                                       int32_t *offsets);

/* ------------------------------------------------------------------------------------------ */
/* Sessions: the per-sequence state (KV cache) and the forward pass                           */
/* ------------------------------------------------------------------------------------------ */

typedef struct ps_session ps_session;

/* What the matrix products take as activations (the weights are never changed).
 * PS_ACT_NATIVE, the default, as llama.cpp: BF16 weights meet activations rounded to bf16
 * (AVX-512 BF16 vdpbf16ps where the CPU has it, twice the products per instruction of float32),
 * Q8_0 weights meet activations quantised to Q8_0 blocks (int8 dot products); F16 weights
 * meet activations rounded to half (llama.cpp's F16 products take f16 on both sides); F32
 * weights meet float32 activations. PS_ACT_F32: float32 activations for every weight type
 * (weights widened exactly to float32), the closest to a float64 forward pass (logits within
 * 1e-4 of the numpy reference in tests/reference, where the native rounding is not), at a
 * fraction of the native matrix speed (docs/figures.md). F32 models compute the same either
 * way. The choice is part of what a score means: it changes logprobs (docs/correctness.md). */
typedef enum {
    PS_ACT_NATIVE = 0,
    PS_ACT_F32 = 1
} ps_act;

/* "native" / "f32"; "?" for other values. */
PS_API const char *ps_act_name(ps_act act);

/* The element type of the K/V cache. PS_KV_F32, the default: keys and values as the forward
 * pass computed them. PS_KV_F16 / PS_KV_BF16: each key and value is rounded once, to nearest
 * even, when it is written (as llama.cpp's f16 / bf16 caches), and widened exactly to float32
 * when attention reads it; the cache takes half the memory. Recurrent state (the hybrid
 * models' delta rule and conv) stays float32. Like act, the choice is part of what a score
 * means (docs/correctness.md, "The K/V cache types", says how far each moves logprobs);
 * for any one type, chunking, threads, batching and the prefix cache never change a bit.
 * PS_KV_BF16_DOT stores K and V as PS_KV_BF16 does and also runs attention's two products in
 * bfloat16, as GPU attention kernels do: each query row and each row of softmax probabilities
 * is rounded to bf16 (nearest even), and each score and output sums bf16 x bf16 pairs in
 * float32 in a fixed order, that of AVX-512 BF16's vdpbf16ps (per pair of elements: the odd
 * product, then the even one, each added with rounding to nearest even; bf16 subnormals read
 * as zero, float32 subnormal sums flushed to zero). Every CPU gives the same bits (without
 * AVX-512 BF16 a scalar form computes them, slowly); with it, the two products take half the
 * instructions of float32, which shows on long prompts only (docs/figures.md). It moves
 * logprobs more than PS_KV_BF16 does.
 * PS_KV_F16_DOT stores K and V as PS_KV_F16 does and also rounds each query row and each row
 * of softmax probabilities to half (nearest even) before the two products, which then run as
 * on PS_KV_F16: the roundings of llama.cpp's CPU attention without flash attention (its f16
 * cache's products convert their float32 operand to f16), so that an f16-cache comparison
 * with llama.cpp differs by accumulation order only rather than by those roundings. */
typedef enum {
    PS_KV_F32 = 0,
    PS_KV_F16 = 1,
    PS_KV_BF16 = 2,
    PS_KV_BF16_DOT = 3,
    PS_KV_F16_DOT = 4
} ps_kv_type;

/* "f32" / "f16" / "bf16" / "bf16-dot" / "f16-dot"; "?" for other values. */
PS_API const char *ps_kv_type_name(ps_kv_type type);

typedef struct {
    int32_t n_ctx;     /* positions the KV cache holds; 0 = the model's n_ctx */
    int32_t n_batch;   /* positions per forward call, 1..256; default 256 */
    ps_pool *pool;     /* threads for the forward pass; NULL = calling thread */
    ps_isa isa;        /* kernels; PS_ISA_AUTO: ps_isa_best(), plus AMX tiles where usable
                        * unless PS_ISA says otherwise (PS_ISA=amx requires them). PS_ISA_AMX
                        * requires AMX; PS_ISA_AVX512 keeps it off */
    ps_act act;        /* activations of the matrix products; default PS_ACT_NATIVE */
    ps_kv_type kv_type; /* the K/V cache's element type; default PS_KV_F32 */
} ps_session_params;

/* n_ctx = 0, n_batch = 256, pool NULL, PS_ISA_AUTO, PS_ACT_NATIVE, PS_KV_F32. */
PS_API ps_session_params ps_session_default_params(void);

/* Allocates a KV cache of n_ctx positions in kv_type (4 bytes per element for PS_KV_F32, 2 for
 * PS_KV_F16 / PS_KV_BF16 / PS_KV_BF16_DOT) and scratch for n_batch positions.
 * Returns PS_OK, PS_ERR_INVALID_ARG (vocab-only model, bad sizes, an unknown act or kv_type),
 * PS_ERR_NOMEM. */
PS_API ps_status ps_session_create(const ps_model *model, const ps_session_params *params,
                            ps_session **out, ps_error *err);
PS_API void ps_session_free(ps_session *session);
/* Forgets every cached position. */
PS_API void ps_session_reset(ps_session *session);
/* Number of positions now in the KV cache. */
PS_API int32_t ps_session_n_past(const ps_session *session);
/* Drops cached positions from n_keep on (n_keep <= n_past), e.g. to reuse a shared prefix.
 * Models with recurrent layers (qwen35, qwen35moe) keep one state for all positions, so there
 * n_keep must be 0 or n_past: otherwise PS_ERR_UNSUPPORTED and nothing changes. Sliding-window
 * layers (gemma2, gemma3, ...) keep only the last window + n_batch - 1 positions when that is
 * shorter than n_ctx, so there at most n_batch positions can be dropped (or all of them):
 * otherwise PS_ERR_UNSUPPORTED and nothing changes. */
PS_API ps_status ps_session_truncate(ps_session *session, int32_t n_keep);

/* Runs n_tokens (1..n_batch) positions after the cached ones and appends them to the KV cache.
 * logits, when not NULL, receives n_tokens * n_vocab float32 logits (row i = position i).
 * Returns PS_OK, PS_ERR_TOKEN_RANGE (an id outside the vocabulary; the message names its index),
 * PS_ERR_CONTEXT (n_past + n_tokens > n_ctx), PS_ERR_INVALID_ARG. On error the cache is
 * unchanged. */
PS_API ps_status ps_session_forward(ps_session *session, const int32_t *tokens, int32_t n_tokens,
                             float *logits, ps_error *err);

/* ------------------------------------------------------------------------------------------ */
/* Scoring (and generation on the same loop)                                                  */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    int32_t k;              /* top-K alternatives per position, >= 0; default 5 */
    int32_t chunk;          /* positions per forward pass; default 256 (part of the result's
                               definition: other values may change scores by an ulp) */
    /* generation after the prompt */
    int32_t max_tokens;     /* tokens to generate, >= 0; default 0 */
    float temperature;      /* 0 = greedy (ties by lowest id); default 0 */
    float top_p;            /* nucleus sampling, (0, 1]; default 1 */
    uint64_t seed;          /* sampling seed; same seed, same tokens */
    const char *const *stop;/* stop strings, n_stop of them (NUL-terminated); may be NULL */
    int32_t n_stop;
    bool stop_at_eos;       /* stop when EOS is generated; default true */
    /* cancellation: polled between chunks; returning true stops with PS_ERR_CANCELLED */
    bool (*cancel)(void *ctx);
    void *cancel_ctx;
    /* an exact prefix cache shared by the sessions of one model (see ps_prefix_cache_create);
     * NULL (the default) = none. It never changes a result's bits. */
    struct ps_prefix_cache *cache;
    /* per-position statistics (off by default; when off, nothing else changes): the entropy,
     * rank and varentropy arrays of the result (ps_topk_out.entropy / .rank / .varentropy of
     * each position's full distribution). Like every other value they are bitwise invariant across chunk, threads,
     * ps_score_batch's packing and the prefix cache. */
    bool stats;
    /* a second model compared with this one (NULL, the default: none): a session of a model
     * with the same vocabulary (same size; the caller checks the tokens, e.g. with
     * ps_vocab_same), other than `session`. The prompt runs through both, chunk by chunk over
     * the same tokens (memory: one chunk of logits each and the two K/V caches; nothing is
     * written anywhere), and the result gets kld, same_top1 and dp. Only ps_score_tokens does
     * it, without generation (max_tokens 0) and without a prefix cache; the compared
     * session's n_batch must hold the chunk and its n_ctx the prompt. The base's own
     * answers are bitwise those of a score without compare. */
    ps_session *compare;
    /* (added with many compared models) several models compared with this one in one pass:
     * compares[0 .. n_compares), each as `compare` above (same vocabulary size, n_batch and
     * n_ctx conditions, no generation, no prefix cache), all distinct and none `session`.
     * The base forwards each chunk ONCE; each compared session then forwards the same chunk
     * into its own logits buffer (memory: one chunk of logits per model and every model's
     * K/V). The result's `compares` gets one entry per session, in this order, each bitwise
     * the kld / same_top1 / dp that `compare` alone with that session gives. Excludes
     * `compare`. NULL / 0 (the default): none. */
    ps_session *const *compares;
    int32_t n_compares;
    /* Fields below were added after compare (appended so that earlier layouts stay). */
    /* named tokens (NULL / 0, the default: none): n_token_ids ids, each in [0, n_vocab),
     * repeats allowed, at most n_vocab of them. Every scored position's result then holds the
     * log-probability of each of them, in this order, whatever its rank: bitwise
     * float32(logit[id]) - lse, the value the full log-softmax gives and top_logprobs lists.
     * A score with named tokens reads no block of a prefix cache (its named values are not
     * stored there; it still adds its blocks), so its bits do not depend on the cache. */
    const int32_t *token_ids;
    int32_t n_token_ids;
    /* a continuation (0, the default: none): the index of the first continuation token in
     * the scored tokens (1..n_tokens - 1, as ps_vocab_tokenize_pair gives it). The result then
     * holds continuation_logprob and is_greedy of tokens[continuation_start ..]. */
    int32_t continuation_start;
    /* word scores (issue 50; off by default, and then nothing else changes): the result gets
     * word_start and word_start_nonbow, from which ps_score_words gives each word's surprisal
     * with the beginning-of-word correction (docs/api.md, "Words"). Needs a vocabulary that
     * marks word starts (PS_ERR_UNSUPPORTED otherwise) and max_tokens 0; a score with words
     * does not use params.cache (its blocks do not hold these masses), so its bits are those
     * of a score without a cache. */
    bool words;
} ps_score_params;

/* k = 5, chunk = 256, no generation, temperature 0, top_p 1, seed 0, stop_at_eos, no cache,
 * no stats, no compare, no named tokens, no continuation. */
PS_API ps_score_params ps_score_default_params(void);

typedef enum { PS_FINISH_LENGTH = 0, PS_FINISH_STOP = 1 } ps_finish_reason;

/* One compared model's per-position values in a result (ps_score_params.compares): arrays of
 * n_total entries, as ps_score_result's kld, same_top1 and dp. */
typedef struct {
    const char *model;  /* the compared model's file base name (ps_model_info.file; owned by
                           the model, valid while it is loaded) */
    float *kld;         /* KL(base || this model) in nats over the whole vocabulary; NaN at 0 */
    int32_t *same_top1; /* 1 when both top-1 tokens agree, else 0; -1 at i = 0 */
    float *dp;          /* p_this(tokens[i]) - p_base(tokens[i]); NaN at i = 0 */
} ps_score_compare;

/* The result of scoring n_prompt tokens and generating n_gen more. Entry i (0 <= i < n_total)
 * describes token i given tokens [0, i). Entry 0 has no distribution: logprob NaN, top ids -1.
 * All arrays are owned by the result. */
typedef struct {
    int32_t n_prompt;
    int32_t n_gen;
    int32_t n_total;         /* n_prompt + n_gen */
    int32_t k;
    int32_t *tokens;         /* n_total */
    float *logprobs;         /* n_total: logprob of tokens[i]; NaN at i = 0 */
    int32_t *top_ids;        /* n_total * k; row i at top_ids + i * k; -1 padding */
    float *top_logprobs;     /* n_total * k */
    double sum_logprob;      /* sum of logprobs[1 .. n_prompt - 1] (the prompt's own tokens) */
    ps_finish_reason finish;
    int32_t stop_text_len;   /* with a stop string: bytes of the last generated token's text
                                (ps_vocab_token_bytes) that precede the stop string (the text is
                                cut there), else -1 (every token's text is whole). A stop
                                string that begins exactly at a token's start drops that token
                                and the rest; EOS (stop_at_eos) is not included in the result. */
    /* with params.stats (else NULL): */
    float *entropy;          /* n_total: entropy in nats of the distribution that scored
                                tokens[i] (ps_topk_out.entropy); NaN at i = 0 */
    int32_t *rank;           /* n_total: 1-based rank of tokens[i] in that distribution, equal
                                logits by ascending id as in top_ids; 0 at i = 0 */
    /* with params.compare (else NULL), the base being this score's model: */
    float *kld;              /* n_total: KL(base || compared) in nats over the whole vocabulary
                                (ps_kld_compute); exactly 0 for a model compared with itself;
                                NaN at i = 0 */
    int32_t *same_top1;      /* n_total: 1 when both models' top-1 token (ties by ascending id)
                                is the same, else 0; -1 at i = 0 */
    float *dp;               /* n_total: p_compared(tokens[i]) - p_base(tokens[i]), the exp of
                                each float32 logprob in double, rounded to float; NaN at i = 0 */
    /* (added with many compared models) with params.compares (else 0 / NULL): one entry per
     * compared session, in the order given; owned by the result */
    int32_t n_compares;
    ps_score_compare *compares;
    /* Appended after the fields above: */
    float *varentropy;       /* with params.stats (else NULL), n_total: the varentropy in
                                nats^2 of the distribution that scored tokens[i]
                                (ps_topk_out.varentropy); NaN at i = 0 */
    float *compare_logprob;  /* with params.compare (else NULL), n_total: the compared model's
                                float32 logprob of tokens[i] (its own top-K kernel); NaN at
                                i = 0 */
    /* Fields below were added after dp (appended so that earlier layouts stay). */
    /* with params.token_ids (else NULL and 0): */
    int32_t n_token_ids;
    float *token_id_logprobs;   /* n_total * n_token_ids; row i at token_id_logprobs + i *
                                   n_token_ids: the named ids' logprobs in the distribution
                                   that scored tokens[i], in the order asked; NaN at i = 0 */
    /* with params.continuation_start (else 0, 0, false): */
    int32_t continuation_start;  /* as asked */
    double continuation_logprob; /* logprobs[continuation_start .. n_prompt - 1] (float32
                                    terms) added in this order in double */
    bool is_greedy;              /* every continuation token is the top-1 of its distribution
                                    (the largest logit, ties by ascending id: rank 1) */
    /* with params.words (else NULL / NaN), issue 50: */
    float *word_start;       /* n_prompt + 1: log sum_{s in BOW or s = EOS} p(s | tokens[0..i)),
                                BOW the ids whose text begins with whitespace (control tokens
                                never): the log-probability that a word begins, or the text
                                ends, after tokens [0, i). NaN at i = 0; entry n_prompt is from
                                the row after the last prompt token. Bitwise invariant like
                                logprobs */
    float word_start_nonbow; /* when tokens[0] is a control token (BOS): log sum over the ids
                                neither in BOW nor EOS after it (the text begins inside a word);
                                else NaN */
} ps_score_result;

/* Scores tokens (verbatim: no BOS is added here) through the session: forward in chunks of
 * params->chunk positions (1..the session's n_batch) into one reused (chunk, n_vocab) logits
 * buffer, the top-K kernel on each chunk's logits (on the session's pool), then optional
 * generation. The session is reset first. Memory does not grow with the prompt beyond the KV cache.
 * Returns PS_OK, PS_ERR_INVALID_ARG (n_tokens < 1, bad params: also more named token_ids than
 * n_vocab, a continuation_start outside 1..n_tokens - 1), PS_ERR_TOKEN_RANGE (a token or a
 * named id outside the vocabulary; names the index), PS_ERR_CONTEXT (n_tokens + max_tokens > n_ctx, both numbers in the message),
 * PS_ERR_NAN, PS_ERR_CANCELLED, PS_ERR_NOMEM. *out is set only on success. */
PS_API ps_status ps_score_tokens(ps_session *session, const int32_t *tokens, int32_t n_tokens,
                          const ps_score_params *params, ps_score_result **out, ps_error *err);
PS_API void ps_score_result_free(ps_score_result *result);

/* One prompt of ps_score_batch: tokens[0..n_tokens) and its parameters (NULL: defaults). */
typedef struct {
    const int32_t *tokens;
    int32_t n_tokens;
    const ps_score_params *params;
} ps_score_prompt;

/* Scores n_prompts prompts with several of them in each forward pass: chunks of up to the
 * smallest params->chunk rows are packed with the positions of prompts in order (at most
 * max_seqs prompts per pass, within max_seqs consecutive ones; max_seqs < 1 or above the
 * chunk means the chunk), each prompt on its own sequence (its KV cache sized to its
 * n_tokens + max_tokens rounded up to 16, kept by the session for later calls) with its own
 * positions and causal mask; then each prompt's generation, if any, alone. results[i] is
 * bitwise what ps_score_tokens(session, prompts[i]) gives. With a prefix cache (params->cache), a prompt that shares whole blocks with an
 * earlier prompt of the call still computing them waits until that one is done and its blocks
 * are cached, then restores them: a prefix shared within one call is computed once. The
 * session's own sequence (ps_session_forward) is not touched. Returns what
 * ps_score_tokens would for the first prompt that fails (the message names the prompt); on any
 * error every results[i] is NULL. */
PS_API ps_status ps_score_batch(ps_session *session, const ps_score_prompt *prompts,
                                int32_t n_prompts, int32_t max_seqs, ps_score_result **results,
                                ps_error *err);

/* One word of a scored text (ps_score_words). */
typedef struct {
    const char *text;        /* the word's bytes, len of them and a NUL (owned by ps_words) */
    int32_t len;
    int64_t offset;          /* byte offset of the word in the text (see ps_score_words) */
    int32_t first_token;     /* its tokens: [first_token, first_token + n_tokens) of the result */
    int32_t n_tokens;
    double surprisal;        /* -log p(word | the words before it), nats, with the
                                beginning-of-word correction; NaN when the first token has no
                                distribution (a text without BOS: its first word) */
    double surprisal_naive;  /* -sum of the word's float32 token logprobs, in order, in double;
                                NaN likewise */
} ps_word;

typedef struct {
    int32_t n_words;
    ps_word *words;
    char *text_;             /* the words' bytes (internal) */
} ps_words;

/*
 * The words of a text scored with params.words, and their surprisal (docs/api.md, "Words"):
 *   - words are the maximal runs of text between Unicode whitespace (punctuation stays with
 *     the word it touches); a control token ends a word and belongs to none;
 *   - a token belongs to the word holding its first non-whitespace byte; a token of only
 *     whitespace belongs to the word after it (none when no word follows before the end or a
 *     control token); a token holding text of two runs joins them into one word;
 *   - surprisal = surprisal_naive + D - N with N = word_start[last + 1] (the row after the
 *     word's last token; 0 when that token ends in whitespace: the boundary is inside it) and
 *     D = word_start[first] when the first token begins with whitespace, word_start_nonbow
 *     for the text's first word after BOS when its first token does not, else 0
 *     (Pimentel & Meister, "How to Compute the Probability of a Word", EMNLP 2024).
 * offsets: the result's n_prompt byte offsets into the user's text (-1 where a token spells
 * none; what the front ends give as prompt_offset), or NULL: offsets into the text the
 * non-control tokens spell (ps_vocab_token_bytes, the SentencePiece space prefix left out),
 * the same for a text without <unk> or special-token text. Returns PS_OK,
 * PS_ERR_INVALID_ARG (NULL arguments, a result scored without params.words), PS_ERR_NOMEM.
 * *out is set only on success; free it with ps_words_free.
 */
PS_API ps_status ps_score_words(const ps_vocab *vocab, const ps_score_result *result,
                                const int32_t *offsets, ps_words **out, ps_error *err);
/* NULL is a no-op. */
PS_API void ps_words_free(ps_words *words);

/* Whether two vocabularies are the same, token for token: the same number of tokens; for every
 * id the same bytes (ps_vocab_token_bytes) and the same type (normal, control, byte, ...); the
 * same special ids (every tokenizer.ggml.*_token_id the loader reads: bos, eos, unknown,
 * padding, seperator, cls, mask, eot, eom, the FIM ids) and the same add_bos_token /
 * add_eos_token. PS_OK, or PS_ERR_INVALID_ARG with a message naming the first difference
 * (both sizes; the id and both texts, escaped, or both types; the key and both values). For
 * ps_score_params.compare. */
PS_API ps_status ps_vocab_same(const ps_vocab *a, const ps_vocab *b, ps_error *err);

/* ------------------------------------------------------------------------------------------ */
/* Contamination (membership) scores of one scored prompt (docs/api.md)                       */
/* ------------------------------------------------------------------------------------------ */

#define PS_DETECT_MAX_K 16 /* percentages of one ps_detect_compute call */

/* Over the n = n_prompt - 1 scored tokens of a result (entries 1 .. n_prompt - 1), as the
 * cited reference code defines each (mink-plus-plus run.py, mimir's attacks):
 *   count[j] = int(n * (k[j] / 100)) in double, as Python computes int(len * ratio);
 *   min_k[j]: the mean of the count[j] lowest logprobs (sorted ascending, equal values by
 *     position), summed in that order in double; NaN when count[j] is 0;
 *   min_k_pp[j]: the same over z_t = (logprob_t - mu_t) / sigma_t with mu_t = -entropy_t and
 *     sigma_t = sqrt(varentropy_t) of the distribution that scored token t (double, IEEE:
 *     sigma_t = 0 gives +-inf or NaN as the reference's division does; NaN sorts last);
 *   mean_nll = -sum_logprob / n;
 *   ref_mean_nll = -(sum of compare_logprob) / n, ref_ratio = mean_nll - ref_mean_nll (NaN
 *     both when the result has no compare_logprob). */
typedef struct {
    int32_t n_k;
    int32_t k[PS_DETECT_MAX_K];      /* the percentages asked, in order */
    int32_t count[PS_DETECT_MAX_K];  /* tokens each mean is over */
    double min_k[PS_DETECT_MAX_K];
    double min_k_pp[PS_DETECT_MAX_K];
    int32_t n_scored;                /* n */
    double mean_nll;
    double ref_mean_nll;
    double ref_ratio;
} ps_detect_scores;

/* Fills *out from a result scored with params.stats (its entropy and varentropy) and, for
 * ref_ratio, params.compare. k: n_k percentages (1 <= n_k <= PS_DETECT_MAX_K), each in
 * [1, 100]. Returns PS_OK, or PS_ERR_INVALID_ARG: NULL pointers, a k out of range (the
 * message names it), a result without statistics, nothing scored (a one-token prompt).
 * Deterministic: the same result gives the same bits. Reentrant. */
PS_API ps_status ps_detect_compute(const ps_score_result *r, const int32_t *k, int32_t n_k,
                                   ps_detect_scores *out, ps_error *err);

/* ------------------------------------------------------------------------------------------ */
/* Perplexity of a token sequence (the `perplexity` command's two procedures)                 */
/* ------------------------------------------------------------------------------------------ */

typedef enum {
    PS_PPL_SLIDING = 0, /* windows of ctx tokens advancing by stride; every token but the first
                         * scored once (ps_score_tokens' float32 logprobs), with as much
                         * context as its window gives */
    PS_PPL_LLAMA = 1    /* llama.cpp's llama-perplexity: non-overlapping chunks of ctx tokens,
                         * BOS in front of each (when the vocab adds one), the second half of
                         * each scored with its float/double negative log-likelihood */
} ps_ppl_mode;

/* One compared model's statistics in llama mode (ps_ppl_params.compares): llama-perplexity
 * --kl-divergence's, from the exact float32 logprobs of both models (logit - the canonical
 * lse) over every scored token: nll_Q and nll_base, KLD = KL(base || Q) over the whole
 * vocabulary (ps_kld_compute), Δp = p_Q - p_base of the token, whether the two top-1 tokens
 * agree. Means and errors are llama.cpp's (for a mean of x: sqrt((Σx²/n - mean²) / (n - 1)),
 * 0 when n <= 10 or the variance is not positive); Δp values are fractions (the CLI prints
 * percent). The distribution (max, min, median, percentiles, interpolated linearly at
 * fraction (n - 1) of the sorted values) is filled in the result only; in an on_window report
 * those fields are NaN. */
typedef struct {
    const char *model;        /* the compared model's file base name (owned by the model) */
    int64_t count;            /* tokens compared */
    double ppl_q, ppl_q_stderr, ppl_base, ppl_base_stderr;
    double cor_ln_ppl;        /* correlation of ln PPL(Q) and ln PPL(base) */
    double ln_ppl_ratio, ln_ppl_ratio_stderr, ppl_ratio, ppl_ratio_stderr;
    double ppl_diff, ppl_diff_stderr;
    double kld_mean, kld_mean_stderr;
    double dp_mean, dp_mean_stderr;
    double rms_dp, rms_dp_stderr;
    double same_top, same_top_stderr; /* the share of tokens whose top-1 agree, 0..1 */
    float kld_max, kld_median, kld_min;
    float kld_pct[8];         /* KLD at 99.9, 99, 95, 90, 10, 5, 1, 0.1 % */
    float dp_max, dp_median, dp_min;
    float dp_pct[10];         /* Δp at 99.9, 99, 95, 90, 75, 25, 10, 5, 1, 0.1 % */
} ps_ppl_compare;

/* What ps_perplexity reports after each window (sliding) or chunk (llama) when
 * ps_ppl_params.on_window is set: the running figures, and in sliding mode the tokens the
 * window scored, so a caller can print as it goes (the CLI's --per-token lines and llama
 * mode's "[i]running," row). */
typedef struct {
    int32_t index;         /* 1-based number of the window or chunk just evaluated */
    int32_t n_windows;     /* llama: the chunks that will run; sliding: 0 (not known ahead) */
    int64_t tokens_scored; /* so far, this window's included */
    double running;        /* exp(sum of nll / tokens_scored) so far */
    int32_t first, n;      /* sliding: this window scored ids[first .. first + n); llama: 0 */
    const float *logprobs; /* sliding: their n float32 logprobs, valid during the call only;
                              llama: NULL */
    /* (added with many compared models) llama mode with compares: each compared model's
     * running statistics so far (the distribution fields NaN), valid during the call only */
    int32_t n_compares;
    const ps_ppl_compare *compares;
} ps_ppl_window;

typedef struct {
    ps_ppl_mode mode;   /* default PS_PPL_SLIDING */
    int32_t ctx;        /* window (sliding) or chunk (llama) length in tokens; 0 = the
                           session's n_ctx (sliding) or 512 (llama). llama needs >= 3 */
    int32_t stride;     /* sliding: window advance, 1..ctx; 0 = max(1, ctx / 2) */
    int32_t max_chunks; /* llama: use at most the first N chunks; 0 = all */
    int32_t chunk;      /* positions per forward pass, 1..the session's n_batch; default 256 */
    /* called after each window or chunk, on the calling thread; returning false stops with
       PS_ERR_CANCELLED. NULL (default): not called */
    bool (*on_window)(void *user, const ps_ppl_window *w);
    void *user; /* passed to on_window */
    /* (added with many compared models) llama mode only: models compared with the session's
     * in one pass, llama-perplexity --kl-divergence for each (ps_ppl_compare): sessions of
     * models with the same vocabulary size, all distinct and none `session`, each holding
     * ctx positions and chunk rows. Each chunk runs through the base ONCE, then through each
     * compared session batch by batch (one batch of logits per model, no file); the base's own
     * figures are bitwise those without compares. NULL / 0 (the default): none. */
    ps_session *const *compares;
    int32_t n_compares;
} ps_ppl_params;

/* The summary the `perplexity` command prints with --json. */
typedef struct {
    ps_ppl_mode mode;
    double perplexity;        /* exp(mean_nll) */
    double perplexity_stderr; /* llama: sqrt(var / (count - 1)) * perplexity; sliding: NaN */
    double mean_nll;          /* sum of negative log-likelihoods / tokens_scored */
    int64_t tokens_scored;
    int32_t n_tokens;         /* tokens of the input */
    int32_t n_windows;        /* sliding: windows run; llama: chunks run */
    int32_t ctx, stride;      /* as used (stride 0 in llama mode) */
    double *running;          /* llama: n_windows running estimates exp(sum nll / count) after
                                 each chunk (owned by the result); sliding: NULL */
    /* (added with many compared models) with params.compares: one entry per compared session,
     * in the order given (owned by the result); else 0 / NULL */
    int32_t n_compares;
    ps_ppl_compare *compares;
} ps_ppl_result;

/* sliding, ctx 0, stride 0, max_chunks 0, chunk 256, no on_window. */
PS_API ps_ppl_params ps_ppl_default_params(void);

/* The perplexity of ids[0..n) through `session` (reset first, as each window or chunk is
 * evaluated from an empty cache), by the procedure `params->mode` names; the numbers are
 * bitwise those `promptscore perplexity --json` prints for the same ids (the CLI tokenizes the
 * file with BOS as the vocab says and special-token text left as text, and in llama mode drops
 * one trailing newline first: callers wanting its numbers do the same). See
 * src/score/perplexity.c (and src/score/ppl_compare.c for compares) for the procedures in
 * full. The session must hold ctx positions. Returns PS_OK, PS_ERR_INVALID_ARG (NULL
 * arguments, stride > ctx, ctx < 3 in llama mode, a chunk outside 1..n_batch, fewer than 2
 * tokens (sliding) or than 2 * ctx (llama), a variance that is not positive, compares in
 * sliding mode, a compared session that is the base's or listed twice, another vocabulary
 * size), PS_ERR_TOKEN_RANGE, PS_ERR_CONTEXT (ctx beyond the session or a compared one),
 * PS_ERR_NAN, PS_ERR_NOMEM, PS_ERR_CANCELLED (on_window returned false). *out is set only on
 * success; free it with ps_ppl_result_free. */
PS_API ps_status ps_perplexity(ps_session *session, const int32_t *ids, int32_t n,
                               const ps_ppl_params *params, ps_ppl_result **out, ps_error *err);
/* NULL is a no-op. */
PS_API void ps_ppl_result_free(ps_ppl_result *result);

/* ------------------------------------------------------------------------------------------ */
/* The exact prefix cache                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* Prompts that share a prefix (a multiple-choice question sent once per choice) share its work:
 * the cache keeps, per block of `block` positions of a prompt's token ids, the KV of those
 * positions in every attention layer (and, for models with recurrent layers, their state at
 * the block's end) and each position's answer (logprob and top-K up to the largest K stored).
 * ps_score_tokens with params.cache restores the longest cached whole-block prefix into the
 * session, takes those positions' answers, and computes the rest; its results are bitwise
 * those of the same call without a cache (the forward pass is chunk-invariant). A request with
 * a larger K than a block holds recomputes it and stores the larger K. Blocks are found by a
 * chain hash of the ids and compared id by id. Unreferenced blocks are evicted least recently
 * used first when the budget is reached; their memory serves the next new blocks (cached plus
 * idle bytes stay within the budget). A block keeps K/V in the element type of the session
 * that computed it (half the bytes for PS_KV_F16 / PS_KV_BF16) and is found only by sessions
 * of the same kv_type (and ISA, act). Thread-safe: one cache serves any number of sessions
 * of its model on any threads. */
typedef struct ps_prefix_cache ps_prefix_cache;

typedef struct {
    int64_t budget_bytes; /* memory for cached blocks, >= 0; default 256 MiB */
    int32_t block;        /* positions per block, a multiple of 16 in 16..1024; 0 (default) =
                             16, or 64 for models with recurrent layers (their state snapshot
                             per block is large) */
} ps_prefix_cache_params;

typedef struct {
    int64_t hits;          /* blocks found by lookups */
    int64_t misses;        /* whole blocks of looked-up prompts that were not found */
    int64_t inserts;       /* blocks added */
    int64_t evictions;     /* blocks evicted for room */
    int64_t bytes;         /* memory held by cached blocks now */
    int64_t budget_bytes;
    int64_t blocks;        /* blocks cached now */
    int32_t block;         /* positions per block */
    int64_t idle_bytes;    /* memory of evicted or unused blocks kept for new ones (reused
                              instead of fresh memory; counted in the budget with bytes) */
} ps_prefix_cache_stats;

/* budget 256 MiB, block 0 (the model's default). */
PS_API ps_prefix_cache_params ps_prefix_cache_default_params(void);
/* A cache for sessions of `model` (which must outlive it). Returns PS_OK, PS_ERR_INVALID_ARG
 * (NULL model or out, a vocab-only model, a bad block or budget), PS_ERR_NOMEM. */
PS_API ps_status ps_prefix_cache_create(const ps_model *model, const ps_prefix_cache_params *params,
                                 ps_prefix_cache **out, ps_error *err);
/* Frees every block. No score may be using the cache. NULL is a no-op. */
PS_API void ps_prefix_cache_free(ps_prefix_cache *cache);
/* The counters and sizes now (zeros for NULL). */
PS_API void ps_prefix_cache_get_stats(ps_prefix_cache *cache, ps_prefix_cache_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* PROMPTSCORE_H */
