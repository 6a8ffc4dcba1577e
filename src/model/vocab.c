/*
 * vocab.c — the tokenizers: SentencePiece-style BPE ("llama") and byte-level BPE ("gpt2"), loaded
 * from the tokenizer.ggml.* keys of a GGUF file and matching llama.cpp token for token.
 *
 * Loading copies every token's text into one blob and precomputes what tokenizing and
 * detokenizing need: a hash table text -> id, each token's detokenised bytes, the special tokens
 * (control / user-defined / unknown) longest first, and for BPE a hash (left id, right id) ->
 * (merge rank, merged id). Merge halves that are not tokens get "pseudo ids" >= n_tokens in the
 * same text table, so merging works on integer ids only.
 *
 * Tokenizing runs in three stages, all with per-call scratch (the vocab stays const, so threads
 * may share it):
 *   1. special-token partition: the text of special tokens is cut out first (longest first);
 *      without parse_special only user-defined tokens are cut (as llama.cpp does);
 *   2. SPM: spaces -> U+2581 (plus a leading one after BOS/special tokens when add_space_prefix),
 *      UTF-8 characters merged by highest score with a priority queue, byte fallback <0xNN>;
 *      BPE: the pre-tokenizer's regexes (PCRE2, UTF + UCP, compiled once per vocab) split the
 *      text — each regex splits every piece of the previous one, and unmatched gaps are pieces
 *      too — then every piece's bytes (one symbol each, GPT-2 byte-to-unicode) are merged by
 *      lowest rank with a priority queue;
 *   3. ids are written to the caller's buffer (the count is always reported).
 * Invalid UTF-8 never fails: SPM falls back to byte tokens, byte-level BPE keeps raw bytes
 * (PCRE2_MATCH_INVALID_UTF lets regexes skip them).
 */
#include "model/vocab.h"
#include "base/util.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdio.h>
#include <stdlib.h>

enum { VOCAB_SPM = 1, VOCAB_BPE = 2 };

/* tokenizer.ggml.token_type values */
enum {
    TT_UNDEFINED = 0,
    TT_NORMAL = 1,
    TT_UNKNOWN = 2,
    TT_CONTROL = 3,
    TT_USER_DEFINED = 4,
    TT_UNUSED = 5,
    TT_BYTE = 6
};

#define MAX_REGEX 8

/* ------------------------------------------------------------------------------------------ */
/* Pre-tokenizers (byte-level BPE): regex lists as llama.cpp uses them                          */
/* ------------------------------------------------------------------------------------------ */

/* In these patterns \s and \S mean llama.cpp's whitespace set (Unicode White_Space); they are
 * rewritten to explicit classes before compiling (see expand_ws), because PCRE2's \s with UCP
 * leaves out U+0085. */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_LLAMA3                                                                               \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                                \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" \
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* qwen35 (Qwen3.5 / 3.6): qwen2's split with combining marks (\p{M}) kept inside words */
#define RE_QWEN35                                                                               \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|" \
    "\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* gpt-4o (o200k, gpt-oss) and tekken: the letters of a word are an optional run of "upper" letters
 * then "lower" ones (or upper ones then optional lower ones). llama.cpp evaluates its form of
 * tokenizer.json's pattern on text whose non-ASCII characters are collapsed to their category, so
 * a non-ASCII letter counts as upper and lower alike and only ASCII has case: (?=\p{L})[^a-z] is
 * "a letter but not a-z", (?=\p{L})[^A-Z] "a letter but not A-Z". Combining marks are not word
 * characters in either (tokenizer.json has \p{M} in the letter classes; llama.cpp does not). */
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_UPPER "((?=[\\p{L}])([^a-z]))"
#define RE_LOWER "((?=[\\p{L}])([^A-Z]))"
#define RE_GPT4O                                                                                \
    "[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER "*" RE_LOWER "+" RE_CONTRACTIONS "?|"                     \
    "[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER "+" RE_LOWER "*" RE_CONTRACTIONS "?|"                     \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_TEKKEN                                                                               \
    "[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER "*" RE_LOWER "+|"                                         \
    "[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER "+" RE_LOWER "*|"                                         \
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* granite-embed-multi-97m: gpt-4o's with combining marks counted as letters */
#define RE_UPPER_M "((?=[\\p{L}\\p{M}])([^a-z]))"
#define RE_LOWER_M "((?=[\\p{L}\\p{M}])([^A-Z]))"
#define RE_GRANITE_MULTI                                                                        \
    "[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER_M "*" RE_LOWER_M "+" RE_CONTRACTIONS "?|"                 \
    "[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER_M "+" RE_LOWER_M "*" RE_CONTRACTIONS "?|"                 \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* jais-2: llama3's with whitespace runs cut into powers of two (512 down to 4, then 1-2) */
#define RE_JAIS2                                                                                \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"  \
    "\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|"              \
    "\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}"
/* seed-coder: qwen2's, but punctuation runs take no line breaks and stop at them */
#define RE_SEED_CODER                                                                           \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|"       \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* bailingmoe: qwen2's with one line break per newline piece */
#define RE_BAILING                                                                              \
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"           \
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"
/* exaone-moe: words may hold marks and single spaces between letters */
#define RE_EXAONE_MOE                                                                           \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}|"       \
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"
/* minicpm5: digits in threes first, then llama3's with \p{N}+ */
#define RE_MINICPM5                                                                             \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"     \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_LINES "[^\\n]+|[\\n]+"
#define RE_CJK "[一-龥ࠀ-一가-퟿]+"
#define RE_DEEPSEEK_LETTERS                                                                     \
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\\x{1F7D}" \
    "ᾀ-ᾴᾶ-ᾼ\\x{1FBE}ῂ-ῄῆ-ῌῐ-\\x{1FD3}ῖ-\\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\\x{2126}ℨ\\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ"   \
    "𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+"

typedef struct {
    const char *names; /* '|'-separated names of tokenizer.ggml.pre */
    const char *regex[MAX_REGEX];
    bool ignore_merges; /* a piece that is itself a token is taken whole (Llama 3) */
    bool add_bos;       /* default for add_bos when the file does not say */
} pre_tokenizer;

/* Names as llama.cpp's loader spells them (src/llama-vocab.cpp), grouped by the regex list it
 * gives them. */
static const pre_tokenizer PRE_TOKENIZERS[] = {
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, false, false},
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|jina-v5-nano", {RE_LLAMA3},
     true, true},
    {"dbrx|smaug-bpe|chatglm-bpe|glm4", {RE_LLAMA3}, false, false},
    {"jais-2", {RE_JAIS2}, false, false},
    {"deepseek-llm",
     {"[\r\n]", RE_DEEPSEEK_LETTERS, "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", RE_CJK, "\\p{N}+"},
     false, false},
    {"deepseek-coder", {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK, "\\p{N}"}, false, false},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}, false, false},
    {"starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b|mellum2", {"\\p{N}", RE_GPT2},
     false, false},
    {"gpt-2|gpt-neox|phi-2|roberta-bpe|mpt|olmo|jais|jina-es|jina-de|jina-v2-es|jina-v2-de|"
     "gigachat|a.x-4.0|mellum|modern-bert|exaone4|trillion|granite-docling",
     {RE_GPT2}, false, false},
    {"qwen2|stablelm2|megrez|deepseek-r1-qwen|kormo|f2llmv2|hunyuan|solar-open|grok-2", {RE_QWEN2},
     false, false},
    {"qwen35", {RE_QWEN35}, false, false},
    {"laguna", {RE_LINES, RE_QWEN2}, false, false},
    {"seed-coder", {RE_SEED_CODER}, false, false},
    {"bailingmoe|bailingmoe2|llada-moe", {RE_BAILING}, false, false},
    {"exaone-moe", {RE_EXAONE_MOE}, false, false},
    {"minicpm5", {"\\p{N}{1,3}", RE_MINICPM5}, true, false},
    {"poro-chat|bloom|gpt3-finnish", {" ?[^(\\s|.,!?…。，、।۔،)]+"}, false, false},
    {"viking", {" ?[^(\\s|.,!?…。，、।۔،)]+", "\\p{N}"}, false, false},
    {"gpt-4o|llama4|kanana2|talkie|minimax-m2", {RE_GPT4O}, false, false},
    {"tekken", {RE_TEKKEN}, true, true},
    {"granite-embed-multi-97m", {RE_GRANITE_MULTI}, true, false},
    {"chameleon",
     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
      "[\\p{P}!-/:-@\\[-`{-~]", RE_GPT2},
     false, true},
};

/* Names llama.cpp knows whose split is not one of the regex lists above (a hand-written
 * splitter in llama.cpp, or text that is not byte-level encoded): refused by name, saying why. */
static const struct {
    const char *names, *why;
} PRE_REFUSED[] = {
    {"kimi-k2", "llama.cpp splits Han text with a hand-written splitter"},
    {"afmoe|tiny_aya|cohere2moe", "llama.cpp groups digits with a hand-written splitter"},
    {"superbpe", "its digit split is an empty-match lookahead as std::regex evaluates it"},
    {"deepseek-v3|hunyuan-dense|joyai-llm|youtu",
     "llama.cpp's collapsed-category classes (\\p{S} without '~', \\p{Lu} as any letter) are not "
     "reproduced here"},
    {"gemma4|granite-embed-multi-311m|sarvam-moe|whitespace",
     "its BPE runs on raw UTF-8 text, not on byte-level (GPT-2) symbols"},
    {"jina-v1-en|jina-v2-code", "an encoder vocabulary that appends a separator token"},
};

/* For error messages (the most used first). */
static const char PRE_NAMES[] =
    "default, gpt-2, llama-bpe (llama3, llama-v3), qwen2, qwen35, gpt-4o (o200k: gpt-oss, llama4), "
    "tekken, deepseek-llm, deepseek-coder, falcon, starcoder, refact, mpt, gpt-neox, smollm, olmo, "
    "command-r, dbrx, smaug-bpe, chatglm-bpe (glm4), falcon3, stablelm2, poro-chat, bloom, "
    "gpt3-finnish, viking, jais, jais-2, codeshell, exaone, phi-2, seed-coder, bailingmoe, "
    "exaone-moe, minicpm5, laguna, chameleon, ... (and llama.cpp's other names for these)";

/* llama.cpp's whitespace set, as the body of a character class. */
#define WS_CLASS "\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

/* Token texts that llama.cpp always treats as control tokens (end-of-generation and FIM
 * markers), whatever their type in the file. */
static const char *const FORCED_CONTROL[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
    "<EOT>", "<｜end▁of▁sentence｜>", "<|fim_prefix|>", "<fim-prefix>", "<｜fim▁begin｜>",
    "<PRE>", "<|fim_suffix|>", "<fim-suffix>", "<｜fim▁hole｜>", "<SUF>", "<|fim_middle|>",
    "<fim-middle>", "<｜fim▁end｜>", "<MID>", "<|fim_pad|>", "<fim-pad>", "<PAD>",
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<|file_sep|>",
};

/* ------------------------------------------------------------------------------------------ */
/* The vocabulary                                                                             */
/* ------------------------------------------------------------------------------------------ */

/* The special-id keys llama.cpp reads (tokenizer.ggml.<name>_token_id; "seperator" as it spells
 * it; prefix / suffix / middle the older FIM keys). The first four are used here (bos, eos,
 * unk, pad); the others are only checked to lie in the vocabulary and compared by
 * ps_vocab_same. */
static const char *const SPECIAL_KEYS[] = {
    "bos", "eos", "unknown", "padding", "seperator", "cls", "mask", "eot", "eom", "fim_pre",
    "fim_suf", "fim_mid", "fim_pad", "fim_rep", "fim_sep", "prefix", "suffix", "middle"};
#define N_SPECIAL_KEYS 18
_Static_assert(PS_ARRAY_LEN(SPECIAL_KEYS) == N_SPECIAL_KEYS, "one id per special key");
enum { SK_BOS, SK_EOS, SK_UNK, SK_PAD };

/* tokenizer.ggml.token_type's names, for messages. */
static const char *const TYPE_NAMES[] = {"undefined", "normal", "unknown", "control",
                                         "user-defined", "unused", "byte"};

typedef struct {
    uint32_t piece_off, piece_len; /* text as stored in the file, in blob */
    uint32_t bytes_off, bytes_len; /* detokenised bytes, in blob */
    float score;
    uint8_t type;
} token_info;

typedef struct {
    uint32_t off, len; /* in blob */
    int32_t id;        /* token id, or >= n_tokens for a merge half that is no token */
    uint32_t hash;
} str_entry;

typedef struct {
    uint64_t key; /* (left id << 32) | right id; UINT64_MAX = empty */
    int32_t rank;
    int32_t result; /* id of the merged text, or -1 */
} pair_slot;

struct ps_vocab {
    /* hyperparameters */
    int kind;              /* VOCAB_SPM / VOCAB_BPE */
    int32_t n_tokens;
    int32_t bos, eos, unk, pad;
    int32_t ids[N_SPECIAL_KEYS]; /* every special id of SPECIAL_KEYS (-1: none); bos .. pad
                                    repeat the fields above */
    bool add_bos, add_eos, add_space_prefix, ignore_merges;
    bool spm_split; /* no token has U+2581 after a character that is not U+2581: SentencePiece
                       may then work on each "▁word" separately (same result, far less work) */
    const pre_tokenizer *pre;

    /* tokens and strings */
    char *blob;
    size_t blob_len, blob_cap;
    token_info *tok;
    str_entry *strs; /* text table entries */
    uint32_t n_strs, strs_cap;
    uint32_t *str_slots; /* open addressing: entry index + 1, 0 = empty */
    uint32_t str_mask;
    int32_t n_ids;       /* tokens + pseudo ids */

    /* byte tables: SPM <0xNN> tokens; BPE the id (token or pseudo) of each byte's GPT-2
     * character, where merging starts */
    int32_t byte_id[256];
    char benc[256][2]; /* GPT-2 byte -> UTF-8 of its stand-in character */
    uint8_t benc_len[256];

    /* BPE merges */
    pair_slot *pairs;
    uint64_t pair_mask;

    /* special tokens (control, user-defined, unknown), longest text first */
    int32_t *special;
    int32_t n_special;

    /* pre-tokenizer regexes */
    pcre2_general_context *gctx;
    pcre2_code *re[MAX_REGEX];
    int n_re;
};

/* ------------------------------------------------------------------------------------------ */
/* Small helpers                                                                              */
/* ------------------------------------------------------------------------------------------ */

static uint32_t hash_bytes(const char *s, size_t n) {
    const uint64_t h = ps_fnv1a64(PS_FNV1A64_INIT, s, n);
    return (uint32_t)(h ^ (h >> 32));
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* Bytes of the UTF-8 character that starts with lead byte c (1 for stray continuation bytes),
 * as llama.cpp counts them. */
static inline size_t utf8_len(uint8_t c) {
    static const uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[c >> 4];
}

/* Whether the 3 bytes at p are U+2581 (SentencePiece's escaped space). */
static inline bool is_2581(const char *p) {
    return (uint8_t)p[0] == 0xE2 && (uint8_t)p[1] == 0x96 && (uint8_t)p[2] == 0x81;
}

static size_t utf8_put(char *out, uint32_t cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes one well-formed UTF-8 character at s (n bytes available); returns its length, or 0
 * when the bytes there are not a valid character. */
static size_t utf8_get(const char *s, size_t n, uint32_t *cp) {
    const uint8_t *u = (const uint8_t *)s;
    if (n == 0) return 0;
    if (u[0] < 0x80) {
        *cp = u[0];
        return 1;
    }
    size_t len = u[0] >= 0xF0 ? 4 : u[0] >= 0xE0 ? 3 : u[0] >= 0xC0 ? 2 : 0;
    if (len == 0 || len > n || u[0] > 0xF4) return 0;
    uint32_t c = u[0] & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((u[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (u[i] & 0x3F);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min_cp[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return len;
}

/* The GPT-2 byte-to-unicode table: printable bytes stand for themselves, the other 68 are
 * numbered from U+0100 in byte order. */
static bool gpt2_byte_is_self(int b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

static uint32_t gpt2_byte_to_cp(int b) {
    if (gpt2_byte_is_self(b)) return (uint32_t)b;
    uint32_t n = 0;
    for (int c = 0; c < b; c++)
        if (!gpt2_byte_is_self(c)) n++;
    return 256 + n;
}

/* Inverse: the byte a code point stands for, or -1. */
static int gpt2_cp_to_byte(uint32_t cp) {
    if (cp < 256) return gpt2_byte_is_self((int)cp) ? (int)cp : -1;
    uint32_t n = 256;
    for (int c = 0; c < 256; c++) {
        if (gpt2_byte_is_self(c)) continue;
        if (n == cp) return c;
        n++;
    }
    return -1;
}

/* ------------------------------------------------------------------------------------------ */
/* Building: blob, text table, pair table                                                     */
/* ------------------------------------------------------------------------------------------ */

static bool blob_reserve(ps_vocab *v, size_t extra) {
    if (v->blob_len + extra <= v->blob_cap) return true;
    size_t cap = v->blob_cap ? v->blob_cap : 4096;
    while (cap < v->blob_len + extra) cap *= 2;
    if (cap > UINT32_MAX) return false;
    char *p = ps_realloc(v->blob, cap);
    if (!p) return false;
    v->blob = p;
    v->blob_cap = cap;
    return true;
}

/* Appends n bytes; returns the offset or UINT32_MAX on no memory. */
static uint32_t blob_add(ps_vocab *v, const char *s, size_t n) {
    if (!blob_reserve(v, n + 1)) return UINT32_MAX;
    uint32_t off = (uint32_t)v->blob_len;
    if (n) memcpy(v->blob + off, s, n);
    v->blob_len += n;
    return off;
}

/* Looks text up in the text table: its id (token or pseudo id), or -1. */
static int32_t str_find(const ps_vocab *v, const char *s, size_t n) {
    if (!v->str_slots) return -1;
    uint32_t h = hash_bytes(s, n);
    for (uint32_t i = h & v->str_mask;; i = (i + 1) & v->str_mask) {
        uint32_t e = v->str_slots[i];
        if (!e) return -1;
        const str_entry *se = &v->strs[e - 1];
        if (se->hash == h && se->len == n && !memcmp(v->blob + se->off, s, n)) return se->id;
    }
}

/* The id of a real token with this text, or -1. */
static inline int32_t token_find(const ps_vocab *v, const char *s, size_t n) {
    int32_t id = str_find(v, s, n);
    return id < v->n_tokens ? id : -1;
}

static bool str_rehash(ps_vocab *v, uint32_t cap) {
    uint32_t *slots = ps_calloc(cap, sizeof *slots);
    if (!slots) return false;
    for (uint32_t e = 0; e < v->n_strs; e++) {
        uint32_t i = v->strs[e].hash & (cap - 1);
        while (slots[i]) i = (i + 1) & (cap - 1);
        slots[i] = e + 1;
    }
    ps_free(v->str_slots);
    v->str_slots = slots;
    v->str_mask = cap - 1;
    return true;
}

/* Adds (or, for an existing text, re-points) text blob[off, off+len) -> id. A duplicate token
 * text keeps the later id, as llama.cpp's map does. Returns false on no memory. */
static bool str_put(ps_vocab *v, uint32_t off, uint32_t len, int32_t id) {
    uint32_t h = hash_bytes(v->blob + off, len);
    if (v->str_slots) {
        for (uint32_t i = h & v->str_mask;; i = (i + 1) & v->str_mask) {
            uint32_t e = v->str_slots[i];
            if (!e) break;
            str_entry *se = &v->strs[e - 1];
            if (se->hash == h && se->len == len && !memcmp(v->blob + se->off, v->blob + off, len)) {
                se->id = id;
                return true;
            }
        }
    }
    if (v->n_strs == v->strs_cap) {
        uint32_t cap = v->strs_cap ? v->strs_cap * 2 : 1024;
        str_entry *p = ps_realloc(v->strs, (size_t)cap * sizeof *p);
        if (!p) return false;
        v->strs = p;
        v->strs_cap = cap;
    }
    if (!v->str_slots || (uint64_t)(v->n_strs + 1) * 2 > (uint64_t)v->str_mask + 1) {
        uint32_t cap = v->str_slots ? (v->str_mask + 1) * 2 : 2048;
        while ((uint64_t)(v->n_strs + 1) * 2 > cap) cap *= 2;
        if (!str_rehash(v, cap)) return false;
    }
    v->strs[v->n_strs] = (str_entry){off, len, id, h};
    uint32_t i = h & v->str_mask;
    while (v->str_slots[i]) i = (i + 1) & v->str_mask;
    v->str_slots[i] = ++v->n_strs;
    return true;
}

/* The id of this text in the table, adding it with a new pseudo id when absent. -1 = no memory. */
static int32_t str_intern(ps_vocab *v, const char *s, size_t n) {
    int32_t id = str_find(v, s, n);
    if (id >= 0) return id;
    if (v->n_ids == INT32_MAX) return -1;
    uint32_t off = blob_add(v, s, n);
    if (off == UINT32_MAX) return -1;
    id = v->n_ids++;
    if (!str_put(v, off, (uint32_t)n, id)) return -1;
    return id;
}

static const pair_slot *pair_find(const ps_vocab *v, int32_t left, int32_t right) {
    if (!v->pairs || left < 0 || right < 0) return NULL;
    uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    for (uint64_t i = mix64(key) & v->pair_mask;; i = (i + 1) & v->pair_mask) {
        const pair_slot *p = &v->pairs[i];
        if (p->key == UINT64_MAX) return NULL;
        if (p->key == key) return p;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Loading                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static void *pcre_malloc_hook(PCRE2_SIZE size, void *data) {
    (void)data;
    return ps_malloc(size);
}

static void pcre_free_hook(void *ptr, void *data) {
    (void)data;
    ps_free(ptr);
}

void ps_vocab_free(ps_vocab *v) {
    if (!v) return;
    for (int i = 0; i < v->n_re; i++) pcre2_code_free(v->re[i]);
    pcre2_general_context_free(v->gctx);
    ps_free(v->blob);
    ps_free(v->tok);
    ps_free(v->strs);
    ps_free(v->str_slots);
    ps_free(v->pairs);
    ps_free(v->special);
    ps_free(v);
}

/* Reads an optional token id key: absent -> def; UINT32_MAX or -1 -> -1 ("none", as some
 * converters write it: read_ids_and_flags refuses it where the id is needed); any other value
 * outside [0, n_tokens) -> FORMAT naming the key. */
static ps_status get_id(const ps_gguf *g, const char *key, int32_t n_tokens, int32_t def,
                        int32_t *out, ps_error *err) {
    int64_t x;
    ps_status st = ps_gguf_get_i64(g, key, &x, err);
    if (st == PS_ERR_NOT_FOUND) {
        *out = def;
        return PS_OK;
    }
    if (st != PS_OK) return st;
    if (x == -1 || x == (int64_t)UINT32_MAX) {
        *out = -1;
        return PS_OK;
    }
    if (x < 0 || x >= n_tokens)
        return ps_fail(err, PS_ERR_FORMAT, -1,
                       "%s = %lld is outside the vocabulary [0, %d): the model's special tokens "
                       "are wrong",
                       key, (long long)x, n_tokens);
    *out = (int32_t)x;
    return PS_OK;
}

static ps_status get_flag(const ps_gguf *g, const char *key, bool def, bool *out, ps_error *err) {
    ps_status st = ps_gguf_get_bool(g, key, out, err);
    if (st == PS_ERR_NOT_FOUND) {
        *out = def;
        return PS_OK;
    }
    return st;
}

/* Rewrites \s and \S of a pattern into explicit classes of llama.cpp's whitespace set. */
static char *expand_ws(const char *pat) {
    size_t n = strlen(pat), cap, count = 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (pat[i] == '\\') {
            if (pat[i + 1] == 's' || pat[i + 1] == 'S') count++;
            i++;
        }
    cap = n + count * (sizeof WS_CLASS + 4) + 1;
    char *out = ps_malloc(cap);
    if (!out) return NULL;
    size_t o = 0;
    bool in_class = false;
    for (size_t i = 0; i < n; i++) {
        char c = pat[i];
        if (c == '\\' && i + 1 < n) {
            char d = pat[i + 1];
            if (d == 's' || d == 'S') {
                const char *pre = d == 's' ? (in_class ? "" : "[") : (in_class ? NULL : "[^");
                /* \S inside a class does not occur in the patterns above */
                assert(pre);
                memcpy(out + o, pre, strlen(pre));
                o += strlen(pre);
                memcpy(out + o, WS_CLASS, sizeof WS_CLASS - 1);
                o += sizeof WS_CLASS - 1;
                if (!in_class) out[o++] = ']';
            } else {
                out[o++] = c;
                out[o++] = d;
            }
            i++;
            continue;
        }
        if (c == '[' && !in_class) in_class = true;
        else if (c == ']' && in_class) in_class = false;
        out[o++] = c;
    }
    out[o] = 0;
    assert(o < cap);
    return out;
}

static bool name_in_list(const char *list, const char *name, size_t name_len) {
    const char *p = list;
    while (*p) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == name_len && !memcmp(p, name, len)) return true;
        if (!bar) break;
        p = bar + 1;
    }
    return false;
}

static ps_status compile_regexes(ps_vocab *v, ps_error *err) {
    v->gctx = pcre2_general_context_create(pcre_malloc_hook, pcre_free_hook, NULL);
    if (!v->gctx) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory for the regex context");
    pcre2_compile_context *cctx = pcre2_compile_context_create(v->gctx);
    if (!cctx) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory for the regex context");
    ps_status st = PS_OK;
    for (int i = 0; i < MAX_REGEX && v->pre->regex[i]; i++) {
        char *pat = expand_ws(v->pre->regex[i]);
        if (!pat) {
            st = ps_fail(err, PS_ERR_NOMEM, -1, "out of memory compiling the pre-tokenizer");
            break;
        }
        int ecode = 0;
        PCRE2_SIZE eoff = 0;
        pcre2_code *code = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                                         PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF |
                                             PCRE2_DOLLAR_ENDONLY,
                                         &ecode, &eoff, cctx);
        ps_free(pat);
        if (!code) {
            if (ecode == PCRE2_ERROR_HEAP_FAILED || ecode == PCRE2_ERROR_NOMEMORY) {
                st = ps_fail(err, PS_ERR_NOMEM, -1, "out of memory compiling the pre-tokenizer");
            } else {
                PCRE2_UCHAR msg[120];
                pcre2_get_error_message(ecode, msg, sizeof msg);
                st = ps_fail(err, PS_ERR_INTERNAL, -1,
                             "pre-tokenizer regex %d does not compile at offset %zu: %s", i,
                             (size_t)eoff, (const char *)msg);
            }
            break;
        }
        /* JIT when available; matching falls back to the interpreter otherwise. */
        (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
        v->re[v->n_re++] = code;
    }
    pcre2_compile_context_free(cctx);
    return st;
}

static int cmp_special(const void *a, const void *b, void *ctx);

/* The value of one hex digit, or -1. */
static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The detokenised bytes of token id, appended to the blob. */
static bool make_bytes(ps_vocab *v, int32_t id) {
    token_info *t = &v->tok[id];
    const char *piece = v->blob + t->piece_off;
    size_t n = t->piece_len;
    /* worst case: BPE pieces shrink or stay; SPM "▁" (3 bytes) -> " " (1) */
    if (!blob_reserve(v, n + 1)) return false;
    piece = v->blob + t->piece_off; /* blob may have moved */
    char *out = v->blob + v->blob_len;
    size_t o = 0;
    if (t->type == TT_CONTROL || t->type == TT_USER_DEFINED || t->type == TT_UNKNOWN) {
        memcpy(out, piece, n);
        o = n;
    } else if (t->type == TT_UNUSED || t->type == TT_UNDEFINED) {
        o = 0; /* llama.cpp prints nothing for these */
    } else if (v->kind == VOCAB_SPM) {
        /* pieces are not NUL-terminated in the blob: parse the two digits by hand */
        int hi = n == 6 ? hex_digit(piece[3]) : -1, lo = n == 6 ? hex_digit(piece[4]) : -1;
        if (t->type == TT_BYTE && n == 6 && !memcmp(piece, "<0x", 3) && piece[5] == '>' &&
            hi >= 0 && lo >= 0) {
            out[o++] = (char)(hi * 16 + lo);
        } else {
            for (size_t i = 0; i < n;) {
                if (i + 3 <= n && !memcmp(piece + i, "\xe2\x96\x81", 3)) {
                    out[o++] = ' ';
                    i += 3;
                } else {
                    out[o++] = piece[i++];
                }
            }
        }
    } else {
        /* BPE: undo the byte-to-unicode map; a character outside it is kept as it is */
        for (size_t i = 0; i < n;) {
            uint32_t cp;
            size_t len = utf8_get(piece + i, n - i, &cp);
            int b = len ? gpt2_cp_to_byte(cp) : -1;
            if (b >= 0) {
                out[o++] = (char)b;
                i += len;
            } else {
                size_t k = len ? len : 1;
                memcpy(out + o, piece + i, k);
                o += k;
                i += k;
            }
        }
    }
    t->bytes_off = (uint32_t)v->blob_len;
    t->bytes_len = (uint32_t)o;
    v->blob_len += o;
    return true;
}

static ps_status load_merges(ps_vocab *v, const ps_gguf *g, ps_error *err) {
    const char *key = "tokenizer.ggml.merges";
    ps_gguf_type et;
    uint64_t n;
    const void *data;
    ps_status st = ps_gguf_get_arr(g, key, &et, &n, &data, err);
    if (st == PS_ERR_NOT_FOUND)
        return ps_fail(err, PS_ERR_NOT_FOUND, -1,
                       "a gpt2 (byte-level BPE) vocabulary needs %s, and the file has none", key);
    if (st != PS_OK) return st;
    if (et != PS_GGUF_STRING)
        return ps_fail(err, PS_ERR_FORMAT, -1, "%s must be an array of strings (type %d)", key,
                       (int)et);
    if (n > INT32_MAX) return ps_fail(err, PS_ERR_FORMAT, -1, "%s has too many entries", key);
    uint64_t cap = 1024;
    while (cap < n * 2) cap *= 2;
    v->pairs = ps_malloc(cap * sizeof *v->pairs);
    if (!v->pairs) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory for %llu merges",
                                  (unsigned long long)n);
    for (uint64_t i = 0; i < cap; i++) v->pairs[i] = (pair_slot){UINT64_MAX, 0, -1};
    v->pair_mask = cap - 1;

    char *tmp = NULL;
    size_t tmp_cap = 0;
    for (uint64_t r = 0; r < n; r++) {
        ps_gguf_str s;
        st = ps_gguf_arr_str(g, key, r, &s, err);
        if (st != PS_OK) break;
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        if (!sp) {
            st = ps_fail(err, PS_ERR_FORMAT, -1,
                         "%s[%llu] is not two pieces separated by a space (\"%.*s\")", key,
                         (unsigned long long)r, (int)PS_MIN(s.len, 40), s.ptr);
            break;
        }
        size_t ln = (size_t)(sp - s.ptr), rn = s.len - ln - 1;
        if (ln + rn > tmp_cap) {
            tmp_cap = (ln + rn) * 2;
            char *p = ps_realloc(tmp, tmp_cap);
            if (!p) {
                st = ps_fail(err, PS_ERR_NOMEM, -1, "out of memory reading merges");
                break;
            }
            tmp = p;
        }
        int32_t left = str_intern(v, s.ptr, ln);
        int32_t right = left < 0 ? -1 : str_intern(v, sp + 1, rn);
        if (left < 0 || right < 0) {
            st = ps_fail(err, PS_ERR_NOMEM, -1, "out of memory reading merges");
            break;
        }
        memcpy(tmp, s.ptr, ln);
        memcpy(tmp + ln, sp + 1, rn);
        int32_t result = str_find(v, tmp, ln + rn);
        if (result < 0) { /* give the merged text an id too, so that it can merge further */
            result = str_intern(v, tmp, ln + rn);
            if (result < 0) {
                st = ps_fail(err, PS_ERR_NOMEM, -1, "out of memory reading merges");
                break;
            }
        }
        uint64_t pkey = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
        uint64_t i = mix64(pkey) & v->pair_mask;
        while (v->pairs[i].key != UINT64_MAX && v->pairs[i].key != pkey) i = (i + 1) & v->pair_mask;
        if (v->pairs[i].key == UINT64_MAX) /* a repeated merge keeps its first rank */
            v->pairs[i] = (pair_slot){pkey, (int32_t)r, result};
    }
    ps_free(tmp);
    return st;
}

/* ---- ps_vocab_load, phase by phase: the header keys, the tokens, the ids and flags, the
 * derived tables (bytes, specials), the merges ------------------------------------------- */

/* The tokenizer kind from tokenizer.ggml.model: llama (SentencePiece) or gpt2 (byte BPE). */
static ps_status read_kind(const ps_gguf *g, int *kind, ps_error *err) {
    ps_gguf_str model;
    ps_status st = ps_gguf_get_str(g, "tokenizer.ggml.model", &model, err);
    if (st == PS_ERR_NOT_FOUND)
        return ps_fail(err, PS_ERR_NOT_FOUND, -1, "the file has no tokenizer (tokenizer.ggml.model)");
    if (st != PS_OK) return st;
    if (model.len == 5 && !memcmp(model.ptr, "llama", 5)) *kind = VOCAB_SPM;
    else if (model.len == 4 && !memcmp(model.ptr, "gpt2", 4)) *kind = VOCAB_BPE;
    else
        return ps_fail(err, PS_ERR_UNSUPPORTED, -1,
                       "tokenizer.ggml.model \"%.*s\" is not supported (supported: llama, gpt2)",
                       (int)PS_MIN(model.len, 64), model.ptr);
    return PS_OK;
}

/* A gpt2 vocabulary's pre-tokenizer, named by tokenizer.ggml.pre (absent: the first of
 * PRE_TOKENIZERS); a name of PRE_REFUSED or an unknown name is refused. */
static ps_status read_pre(const ps_gguf *g, const pre_tokenizer **pre, ps_error *err) {
    ps_gguf_str pname;
    ps_status st = ps_gguf_get_str(g, "tokenizer.ggml.pre", &pname, err);
    if (st == PS_ERR_NOT_FOUND) {
        *pre = &PRE_TOKENIZERS[0];
        return PS_OK;
    }
    if (st != PS_OK) return st;
    for (size_t i = 0; i < PS_ARRAY_LEN(PRE_TOKENIZERS); i++)
        if (name_in_list(PRE_TOKENIZERS[i].names, pname.ptr, pname.len)) {
            *pre = &PRE_TOKENIZERS[i];
            return PS_OK;
        }
    for (size_t i = 0; i < PS_ARRAY_LEN(PRE_REFUSED); i++)
        if (name_in_list(PRE_REFUSED[i].names, pname.ptr, pname.len))
            return ps_fail(err, PS_ERR_UNSUPPORTED, -1,
                           "tokenizer.ggml.pre \"%.*s\" is not supported: %s",
                           (int)PS_MIN(pname.len, 40), pname.ptr, PRE_REFUSED[i].why);
    return ps_fail(err, PS_ERR_UNSUPPORTED, -1,
                   "tokenizer.ggml.pre \"%.*s\" is not supported; supported: %s",
                   (int)PS_MIN(pname.len, 40), pname.ptr, PRE_NAMES);
}

static const char TOKENS_KEY[] = "tokenizer.ggml.tokens";
static const char SCORES_KEY[] = "tokenizer.ggml.scores";
static const char TYPES_KEY[] = "tokenizer.ggml.token_type";

/* The per-token arrays of the file, as they lie in it. */
typedef struct {
    int32_t n;             /* tokens */
    const float *scores;   /* n float32, or NULL */
    const uint8_t *types;  /* n packed int32 little-endian, or NULL */
} token_arrays;

/* The token list's length (1 .. 2^30) and the optional scores and types arrays, each of that
 * length. */
static ps_status read_token_arrays(const ps_gguf *g, token_arrays *a, ps_error *err) {
    ps_gguf_type et;
    uint64_t n64;
    const void *tdata;
    ps_status st = ps_gguf_get_arr(g, TOKENS_KEY, &et, &n64, &tdata, err);
    if (st == PS_ERR_NOT_FOUND)
        return ps_fail(err, PS_ERR_NOT_FOUND, -1, "the file has no token list (%s)", TOKENS_KEY);
    if (st != PS_OK) return st;
    if (et != PS_GGUF_STRING)
        return ps_fail(err, PS_ERR_FORMAT, -1, "%s must be an array of strings (type %d)",
                       TOKENS_KEY, (int)et);
    if (n64 == 0 || n64 > (1u << 30))
        return ps_fail(err, PS_ERR_FORMAT, -1, "%s has %llu tokens (expected 1 .. 2^30)",
                       TOKENS_KEY, (unsigned long long)n64);
    const int32_t n = (int32_t)n64;
    *a = (token_arrays){n, NULL, NULL};

    uint64_t ns;
    const void *sdata;
    st = ps_gguf_get_arr(g, SCORES_KEY, &et, &ns, &sdata, err);
    if (st == PS_OK) {
        if (et != PS_GGUF_FLOAT32 || ns != n64)
            return ps_fail(err, PS_ERR_FORMAT, -1,
                           "%s must be %d float32 values (has %llu of type %d)", SCORES_KEY, n,
                           (unsigned long long)ns, (int)et);
        a->scores = sdata;
    } else if (st != PS_ERR_NOT_FOUND) {
        return st;
    }
    st = ps_gguf_get_arr(g, TYPES_KEY, &et, &ns, &sdata, err);
    if (st == PS_OK) {
        if ((et != PS_GGUF_INT32 && et != PS_GGUF_UINT32) || ns != n64)
            return ps_fail(err, PS_ERR_FORMAT, -1,
                           "%s must be %d int32 values (has %llu of type %d)", TYPES_KEY, n,
                           (unsigned long long)ns, (int)et);
        a->types = sdata;
    } else if (st != PS_ERR_NOT_FOUND) {
        return st;
    }
    return PS_OK;
}

/* v->tok (allocated, a->n entries) <- the token texts (into the blob), scores and types; then
 * the text -> id table, and the FORCED_CONTROL texts made control tokens. */
static ps_status fill_tokens(ps_vocab *v, const ps_gguf *g, const token_arrays *a,
                             ps_error *err) {
    const int32_t n = a->n;
    for (int32_t i = 0; i < n; i++) {
        ps_gguf_str s;
        ps_status st = ps_gguf_arr_str(g, TOKENS_KEY, (uint64_t)i, &s, err);
        if (st != PS_OK) return st;
        if (s.len > 65536)
            return ps_fail(err, PS_ERR_FORMAT, -1, "%s[%d] is %llu bytes long (at most 65536)",
                           TOKENS_KEY, i, (unsigned long long)s.len);
        uint32_t off = blob_add(v, s.ptr, s.len);
        if (off == UINT32_MAX)
            return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory for token texts");
        token_info *t = &v->tok[i];
        t->piece_off = off;
        t->piece_len = (uint32_t)s.len;
        if (a->scores) {
            float f;
            memcpy(&f, a->scores + i, 4);
            if (f != f) /* NaN orders no merge: the SentencePiece merges would depend on it */
                return ps_fail(err, PS_ERR_FORMAT, -1, "%s[%d] is NaN", SCORES_KEY, i);
            t->score = f;
        }
        t->type = TT_NORMAL;
        if (a->types) {
            int32_t ty;
            memcpy(&ty, a->types + 4 * (size_t)i, 4);
            if (ty < 0 || ty > TT_BYTE)
                return ps_fail(err, PS_ERR_FORMAT, -1, "%s[%d] = %d is not a token type (0..6)",
                               TYPES_KEY, i, ty);
            t->type = (uint8_t)ty;
        }
    }
    for (int32_t i = 0; i < n; i++) {
        token_info *t = &v->tok[i];
        if (t->piece_len == 0) continue; /* an empty token can never be matched */
        if (!str_put(v, t->piece_off, t->piece_len, i))
            return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory for the token table");
    }
    for (size_t k = 0; k < PS_ARRAY_LEN(FORCED_CONTROL); k++) {
        int32_t id = token_find(v, FORCED_CONTROL[k], strlen(FORCED_CONTROL[k]));
        if (id >= 0) v->tok[id].type = TT_CONTROL;
    }
    return PS_OK;
}

/* Whether SentencePiece text may be split at its spaces: no token holds a "▁" after its first
 * character other than in a run of them. */
static bool spm_split_ok(const ps_vocab *v) {
#ifndef PS_VOCAB_NO_SPLIT /* defined only to check the split against the whole-text merge */
    for (int32_t i = 0; i < v->n_tokens; i++) {
        const char *p = v->blob + v->tok[i].piece_off;
        size_t len = v->tok[i].piece_len;
        for (size_t k = 1; k + 3 <= len; k++)
            if (is_2581(p + k) && !(k >= 3 && is_2581(p + k - 3))) return false;
    }
    return true;
#else
    (void)v;
    return false;
#endif
}

/* The special ids (SPECIAL_KEYS; bos, eos, unk with the kind's defaults) and the add_* flags. */
static ps_status read_ids_and_flags(ps_vocab *v, const ps_gguf *g, ps_error *err) {
    const int32_t n = v->n_tokens;
    const bool spm = v->kind == VOCAB_SPM;
    const pre_tokenizer *pre = v->pre;
    ps_status st;
    for (int k = 0; k < N_SPECIAL_KEYS; k++) {
        int32_t def = -1;
        if (spm && k == SK_BOS && n > 1) def = 1;
        if (spm && k == SK_EOS && n > 2) def = 2;
        if (spm && k == SK_UNK) def = 0;
        char key[64];
        snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", SPECIAL_KEYS[k]);
        if ((st = get_id(g, key, n, def, &v->ids[k], err))) return st;
    }
    v->bos = v->ids[SK_BOS];
    v->eos = v->ids[SK_EOS];
    v->unk = v->ids[SK_UNK];
    v->pad = v->ids[SK_PAD];
    if ((st = get_flag(g, "tokenizer.ggml.add_bos_token", spm || (pre && pre->add_bos),
                       &v->add_bos, err)) ||
        (st = get_flag(g, "tokenizer.ggml.add_eos_token", false, &v->add_eos, err)) ||
        (st = get_flag(g, "tokenizer.ggml.add_space_prefix", spm, &v->add_space_prefix, err)))
        return st;
    /* A BOS (EOS) the file says to add that is "none" would be dropped from every prompt
     * without a word. (A vocabulary that names no BOS at all, whose tokenizer kind adds one
     * by default, simply has none: ps_vocab_add_bos is false.) */
    const bool bos_named = ps_gguf_find_key(g, "tokenizer.ggml.bos_token_id") >= 0,
               add_named = ps_gguf_find_key(g, "tokenizer.ggml.add_bos_token") >= 0;
    if (v->add_bos && v->bos < 0 && (bos_named || add_named))
        return ps_fail(err, PS_ERR_FORMAT, -1,
                       "tokenizer.ggml.bos_token_id is none (%s) but "
                       "tokenizer.ggml.add_bos_token is true%s: the model's special tokens are "
                       "wrong",
                       bos_named ? "-1 or 4294967295" : "absent",
                       add_named ? "" : " (the default of this tokenizer)");
    if (v->add_eos && v->eos < 0)
        return ps_fail(err, PS_ERR_FORMAT, -1,
                       "tokenizer.ggml.eos_token_id is none (absent, -1 or 4294967295) but "
                       "tokenizer.ggml.add_eos_token is true: the model's special tokens are "
                       "wrong");
    return PS_OK;
}

/* The byte tables: SentencePiece, the id of each byte's <0xXX> token (else of its one-byte
 * token, else -1); gpt2, each byte's character in the byte-level alphabet. */
static void fill_byte_tables(ps_vocab *v) {
    const bool spm = v->kind == VOCAB_SPM;
    for (int b = 0; b < 256; b++) {
        v->byte_id[b] = -1;
        if (spm) {
            char hex[8];
            snprintf(hex, sizeof hex, "<0x%02X>", b);
            int32_t id = token_find(v, hex, 6);
            if (id < 0) {
                char c = (char)b;
                id = token_find(v, &c, 1);
            }
            v->byte_id[b] = id;
        } else {
            v->benc_len[b] = (uint8_t)utf8_put(v->benc[b], gpt2_byte_to_cp(b));
        }
    }
}

/* A token matched in the text before tokenizing: control, user-defined and unknown tokens
 * with a text. */
static bool is_special_token(const token_info *t) {
    return (t->type == TT_CONTROL || t->type == TT_USER_DEFINED || t->type == TT_UNKNOWN) &&
           t->piece_len;
}

/* Each token's detokenised bytes, then v->special: the special tokens, longest first (ties by
 * id). */
static ps_status fill_bytes_and_specials(ps_vocab *v, ps_error *err) {
    const int32_t n = v->n_tokens;
    for (int32_t i = 0; i < n; i++)
        if (!make_bytes(v, i))
            return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory for token bytes");
    int32_t n_special = 0;
    for (int32_t i = 0; i < n; i++) n_special += is_special_token(&v->tok[i]);
    if (!n_special) return PS_OK;
    v->special = ps_malloc((size_t)n_special * sizeof *v->special);
    if (!v->special) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory for special tokens");
    for (int32_t i = 0; i < n; i++)
        if (is_special_token(&v->tok[i])) v->special[v->n_special++] = i;
    qsort_r(v->special, (size_t)v->n_special, sizeof *v->special, cmp_special, v);
    return PS_OK;
}

/* A gpt2 vocabulary's merges, its byte ids (after the merges: a byte's character may be a
 * merge half without being a token) and its pre-tokenizer's regexes. */
static ps_status finish_bpe(ps_vocab *v, const ps_gguf *g, ps_error *err) {
    ps_status st = load_merges(v, g, err);
    if (st) return st;
    for (int b = 0; b < 256; b++) v->byte_id[b] = str_find(v, v->benc[b], v->benc_len[b]);
    return compile_regexes(v, err);
}

ps_status ps_vocab_load(const ps_gguf *g, ps_vocab **out, ps_error *err) {
    if (!g || !out) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "ps_vocab_load: NULL argument");
    int kind = 0;
    ps_status st = read_kind(g, &kind, err);
    if (st) return st;
    const pre_tokenizer *pre = NULL;
    if (kind == VOCAB_BPE && (st = read_pre(g, &pre, err))) return st;
    token_arrays a = {0};
    if ((st = read_token_arrays(g, &a, err))) return st;

    ps_vocab *v = ps_calloc(1, sizeof *v);
    if (!v) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory for the vocabulary");
    v->kind = kind;
    v->pre = pre;
    v->n_tokens = a.n;
    v->n_ids = a.n;
    v->tok = ps_calloc((size_t)a.n, sizeof *v->tok);
    if (!v->tok) {
        st = ps_fail(err, PS_ERR_NOMEM, -1, "out of memory for %d tokens", a.n);
        goto fail;
    }
    if ((st = fill_tokens(v, g, &a, err)) || (st = read_ids_and_flags(v, g, err))) goto fail;
    v->ignore_merges = pre && pre->ignore_merges;
    v->spm_split = kind == VOCAB_SPM && spm_split_ok(v);
    fill_byte_tables(v);
    if ((st = fill_bytes_and_specials(v, err))) goto fail;
    if (kind == VOCAB_BPE && (st = finish_bpe(v, g, err))) goto fail;
    *out = v;
    ps_error_clear(err); /* optional keys that were absent left their message there */
    return PS_OK;
fail:
    ps_vocab_free(v);
    return st;
}

static int cmp_special(const void *a, const void *b, void *ctx) {
    const ps_vocab *v = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = v->tok[x].piece_len, ly = v->tok[y].piece_len;
    if (lx != ly) return lx > ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* ------------------------------------------------------------------------------------------ */
/* Queries                                                                                    */
/* ------------------------------------------------------------------------------------------ */

int32_t ps_vocab_n_tokens(const ps_vocab *v) { return v ? v->n_tokens : 0; }
int32_t ps_vocab_bos(const ps_vocab *v) { return v ? v->bos : -1; }
int32_t ps_vocab_eos(const ps_vocab *v) { return v ? v->eos : -1; }
bool ps_vocab_add_bos(const ps_vocab *v) { return v && v->add_bos && v->bos >= 0; }

/* ---- comparing two vocabularies (ps_vocab_same) ---- */

/* The first 40 bytes of a token's text, printable ASCII kept, the rest as \xNN. */
static void escape_token(const char *b, size_t len, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < len && i < 40 && o + 5 < cap; i++) {
        unsigned char c = (unsigned char)b[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') out[o++] = (char)c;
        else o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
    }
    out[o] = 0;
}

static const char *type_name(uint8_t t) { return t < PS_ARRAY_LEN(TYPE_NAMES) ? TYPE_NAMES[t] : "?"; }

/* A special id for a message: the number, or "none". */
static const char *id_str(int32_t id, char *buf, size_t cap) {
    if (id < 0) return "none";
    snprintf(buf, cap, "%d", id);
    return buf;
}

/* The first difference, in this order: the size, each token's detokenised bytes, its type,
 * each special id (SPECIAL_KEYS), add_bos_token, add_eos_token. */
ps_status ps_vocab_same(const ps_vocab *a, const ps_vocab *b, ps_error *err) {
    ps_error_clear(err);
    if (!a || !b) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "vocab_same: NULL vocabulary");
    const int32_t n = a->n_tokens;
    if (n != b->n_tokens)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "the vocabularies differ in size: %d tokens against %d", n, b->n_tokens);
    char ea[200], eb[200];
    for (int32_t i = 0; i < n; i++) {
        const token_info *ta = &a->tok[i], *tb = &b->tok[i];
        const char *ba = a->blob + ta->bytes_off, *bb = b->blob + tb->bytes_off;
        if (ta->bytes_len != tb->bytes_len || (ta->bytes_len && memcmp(ba, bb, ta->bytes_len))) {
            escape_token(ba, ta->bytes_len, ea, sizeof ea);
            escape_token(bb, tb->bytes_len, eb, sizeof eb);
            return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                           "the vocabularies differ at token %d: \"%s\" against \"%s\" (%d "
                           "tokens each)", i, ea, eb, n);
        }
        if (ta->type != tb->type) {
            escape_token(ba, ta->bytes_len, ea, sizeof ea);
            return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                           "the vocabularies differ in the type of token %d \"%s\": %s against "
                           "%s", i, ea, type_name(ta->type), type_name(tb->type));
        }
    }
    for (int k = 0; k < N_SPECIAL_KEYS; k++)
        if (a->ids[k] != b->ids[k])
            return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                           "the vocabularies differ in tokenizer.ggml.%s_token_id: %s against %s",
                           SPECIAL_KEYS[k], id_str(a->ids[k], ea, sizeof ea),
                           id_str(b->ids[k], eb, sizeof eb));
    if (a->add_bos != b->add_bos || a->add_eos != b->add_eos)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "the vocabularies differ in tokenizer.ggml.%s: %s against %s",
                       a->add_bos != b->add_bos ? "add_bos_token" : "add_eos_token",
                       (a->add_bos != b->add_bos ? a->add_bos : a->add_eos) ? "true" : "false",
                       (a->add_bos != b->add_bos ? b->add_bos : b->add_eos) ? "true" : "false");
    return PS_OK;
}

bool ps_vocab_space_prefix(const ps_vocab *v) {
    return v && v->kind == VOCAB_SPM && v->add_space_prefix;
}

bool ps_vocab_is_control(const ps_vocab *v, int32_t id) {
    return v && id >= 0 && id < v->n_tokens && v->tok[id].type == TT_CONTROL;
}

ps_status ps_vocab_token_bytes(const ps_vocab *v, int32_t id, const char **bytes, size_t *len) {
    if (!v || !bytes || !len) return PS_ERR_INVALID_ARG;
    if (id < 0 || id >= v->n_tokens) return PS_ERR_TOKEN_RANGE;
    *bytes = v->blob + v->tok[id].bytes_off;
    *len = v->tok[id].bytes_len;
    return PS_OK;
}

ps_status ps_vocab_token_piece(const ps_vocab *v, int32_t id, const char **piece, size_t *len) {
    if (!v || !piece || !len) return PS_ERR_INVALID_ARG;
    if (id < 0 || id >= v->n_tokens) return PS_ERR_TOKEN_RANGE;
    *piece = v->blob + v->tok[id].piece_off;
    *len = v->tok[id].piece_len;
    return PS_OK;
}

ps_status ps_vocab_detokenize(const ps_vocab *v, const int32_t *ids, int32_t n_ids,
                              bool remove_leading_space, char *text, size_t capacity,
                              size_t *len) {
    if (!v || !len || n_ids < 0 || (n_ids > 0 && !ids) || (capacity > 0 && !text))
        return PS_ERR_INVALID_ARG;
    size_t o = 0;
    for (int32_t i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= v->n_tokens) return PS_ERR_TOKEN_RANGE;
    for (int32_t i = 0; i < n_ids; i++) {
        const token_info *t = &v->tok[ids[i]];
        const char *b = v->blob + t->bytes_off;
        size_t bl = t->bytes_len;
        if (i == 0 && remove_leading_space && v->kind == VOCAB_SPM && v->add_space_prefix &&
            bl > 0 && b[0] == ' ') {
            b++;
            bl--;
        }
        if (o < capacity) memcpy(text + o, b, PS_MIN(bl, capacity - o));
        o += bl;
    }
    if (o < capacity) text[o] = 0;
    *len = o;
    return PS_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Tokenizing                                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* A piece of the input: a span of raw text, or a token already decided (id >= 0). */
typedef struct {
    size_t off, len;
    int32_t id;
} span;

typedef struct {
    span *v;
    size_t n, cap;
} span_vec;

/* A symbol of the merge loops: a span of the working text, linked to its neighbours. */
typedef struct {
    size_t off, len; /* len 0 = merged away */
    int32_t prev, next;
    int32_t id; /* BPE: the text's id (token or pseudo), -1 when none */
} symbol;

/* A candidate merge in the priority queue. SPM: highest score first; BPE: lowest rank first;
 * then leftmost. */
typedef struct {
    int32_t left, right;
    float score;   /* SPM */
    int32_t rank;  /* BPE */
    size_t size;   /* SPM: bytes of the merged text */
    int32_t lid, rid; /* BPE: ids the two symbols had */
} bigram;

typedef struct {
    const ps_vocab *v;
    int32_t *ids;
    int32_t capacity;
    int64_t n;
    size_t max_piece; /* a piece merged whole (BPE word, SPM segment) longer: PS_ERR_LIMIT; 0 none */
    /* scratch */
    symbol *sym;
    size_t sym_cap;
    bigram *heap;
    size_t heap_n, heap_cap;
    char *buf;
    size_t buf_cap;
    span_vec pieces, pieces2;
    pcre2_match_data *md;
    ps_error *err;
} tok_state;

static inline void emit(tok_state *s, int32_t id) {
    if (s->n < s->capacity) s->ids[s->n] = id;
    s->n++;
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = ps_realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

static bool span_push(span_vec *sv, size_t off, size_t len, int32_t id) {
    if (!grow((void **)&sv->v, &sv->cap, sv->n + 1, sizeof *sv->v)) return false;
    sv->v[sv->n++] = (span){off, len, id};
    return true;
}

static inline bool bigram_before(const tok_state *s, const bigram *a, const bigram *b) {
    if (s->v->kind == VOCAB_SPM) {
        if (a->score != b->score) return a->score > b->score;
    } else {
        if (a->rank != b->rank) return a->rank < b->rank;
    }
    return a->left < b->left;
}

static bool heap_push(tok_state *s, const bigram *b) {
    if (!grow((void **)&s->heap, &s->heap_cap, s->heap_n + 1, sizeof *s->heap)) return false;
    size_t i = s->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bigram_before(s, b, &s->heap[p])) break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = *b;
    return true;
}

static bigram heap_pop(tok_state *s) {
    bigram top = s->heap[0];
    bigram last = s->heap[--s->heap_n];
    size_t i = 0, n = s->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bigram_before(s, &s->heap[c + 1], &s->heap[c])) c++;
        if (!bigram_before(s, &s->heap[c], &last)) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n) s->heap[i] = last;
    return top;
}

/* A piece the merge loop takes whole costs tens of bytes of state per byte (a symbol and its
 * candidate merges): over the caller's max_piece it is refused before any of it is made. */
static ps_status piece_check(const tok_state *s, size_t n) {
    if (s->max_piece == 0 || n <= s->max_piece) return PS_OK;
    return ps_fail(s->err, PS_ERR_LIMIT, -1,
                   "a run of %zu bytes the tokenizer must merge as one piece (a word, or text "
                   "with no break it can split at) is over the limit of %zu bytes", n,
                   s->max_piece);
}

/* ---- SentencePiece ---- */

static bool spm_try_bigram(tok_state *s, const char *text, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return true;
    const symbol *l = &s->sym[left], *r = &s->sym[right];
    size_t size = l->len + r->len;
    int32_t id = token_find(s->v, text + l->off, size);
    if (id < 0) return true;
    bigram b = {left, right, s->v->tok[id].score, 0, size, 0, 0};
    return heap_push(s, &b);
}

/* Tokenizes text[0, n) (already escaped: spaces are U+2581) and emits the ids. */
static ps_status spm_segment(tok_state *s, const char *text, size_t n) {
    const ps_vocab *v = s->v;
    if (n == 0) return PS_OK;
    ps_status pst = piece_check(s, n);
    if (pst) return pst;
    size_t n_sym = 0;
    for (size_t off = 0; off < n; n_sym++) off += PS_MIN(utf8_len((uint8_t)text[off]), n - off);
    if (n_sym > INT32_MAX - 1) return ps_fail(s->err, PS_ERR_INVALID_ARG, -1, "text too long");
    if (!grow((void **)&s->sym, &s->sym_cap, n_sym, sizeof *s->sym))
        return ps_fail(s->err, PS_ERR_NOMEM, -1, "out of memory tokenizing");
    size_t off = 0;
    for (size_t i = 0; i < n_sym; i++) {
        size_t len = PS_MIN(utf8_len((uint8_t)text[off]), n - off);
        s->sym[i] = (symbol){off, len, (int32_t)i - 1, i + 1 == n_sym ? -1 : (int32_t)i + 1, -1};
        off += len;
    }
    s->heap_n = 0;
    for (size_t i = 1; i < n_sym; i++)
        if (!spm_try_bigram(s, text, (int32_t)i - 1, (int32_t)i))
            return ps_fail(s->err, PS_ERR_NOMEM, -1, "out of memory tokenizing");
    while (s->heap_n) {
        bigram b = heap_pop(s);
        symbol *l = &s->sym[b.left], *r = &s->sym[b.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != b.size) continue;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) s->sym[r->next].prev = b.left;
        if (!spm_try_bigram(s, text, l->prev, b.left) ||
            !spm_try_bigram(s, text, b.left, l->next))
            return ps_fail(s->err, PS_ERR_NOMEM, -1, "out of memory tokenizing");
    }
    for (int32_t i = 0; i != -1; i = s->sym[i].next) {
        const symbol *sy = &s->sym[i];
        int32_t id = token_find(v, text + sy->off, sy->len);
        if (id >= 0) {
            emit(s, id);
            continue;
        }
        for (size_t k = 0; k < sy->len; k++) {
            int32_t b = v->byte_id[(uint8_t)text[sy->off + k]];
            if (b < 0) b = v->unk;
            if (b >= 0) emit(s, b);
        }
    }
    return PS_OK;
}

/* SentencePiece over escaped text. When the vocabulary allows (spm_split), the text is cut
 * before every character U+2581 that follows a character other than U+2581 (at character
 * boundaries as the merge loop counts them): no token can span such a cut, so merging each
 * piece alone gives exactly the ids of merging the whole, with a small priority queue. */
static ps_status spm_tokenize(tok_state *s, const char *text, size_t n) {
    if (!s->v->spm_split) return spm_segment(s, text, n);
    size_t start = 0, off = 0;
    while (off < n) {
        size_t len = PS_MIN(utf8_len((uint8_t)text[off]), n - off);
        if (off > start && len == 3 && is_2581(text + off) && !(off >= 3 && is_2581(text + off - 3))) {
            ps_status st = spm_segment(s, text + start, off - start);
            if (st) return st;
            start = off;
        }
        off += len;
    }
    return spm_segment(s, text + start, n - start);
}

/* ---- byte-level BPE ---- */

static bool bpe_try_bigram(tok_state *s, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return true;
    const symbol *l = &s->sym[left], *r = &s->sym[right];
    const pair_slot *p = pair_find(s->v, l->id, r->id);
    if (!p) return true;
    bigram b = {left, right, 0.0f, p->rank, 0, l->id, r->id};
    return heap_push(s, &b);
}

/* Emits the ids of one pre-tokenized word, raw bytes w[0, n). */
static ps_status bpe_word(tok_state *s, const char *w, size_t n) {
    const ps_vocab *v = s->v;
    if (n == 0) return PS_OK;
    ps_status pst = piece_check(s, n);
    if (pst) return pst;
    if (v->ignore_merges) {
        if (!grow((void **)&s->buf, &s->buf_cap, 2 * n, 1))
            return ps_fail(s->err, PS_ERR_NOMEM, -1, "out of memory tokenizing");
        size_t o = 0;
        for (size_t i = 0; i < n; i++) {
            uint8_t b = (uint8_t)w[i];
            memcpy(s->buf + o, v->benc[b], v->benc_len[b]);
            o += v->benc_len[b];
        }
        int32_t id = token_find(v, s->buf, o);
        if (id >= 0) {
            emit(s, id);
            return PS_OK;
        }
    }
    if (n > INT32_MAX - 1) return ps_fail(s->err, PS_ERR_INVALID_ARG, -1, "text too long");
    if (!grow((void **)&s->sym, &s->sym_cap, n, sizeof *s->sym))
        return ps_fail(s->err, PS_ERR_NOMEM, -1, "out of memory tokenizing");
    for (size_t i = 0; i < n; i++)
        s->sym[i] = (symbol){i, 1, (int32_t)i - 1, i + 1 == n ? -1 : (int32_t)i + 1,
                             v->byte_id[(uint8_t)w[i]]};
    s->heap_n = 0;
    for (size_t i = 1; i < n; i++)
        if (!bpe_try_bigram(s, (int32_t)i - 1, (int32_t)i))
            return ps_fail(s->err, PS_ERR_NOMEM, -1, "out of memory tokenizing");
    while (s->heap_n) {
        bigram b = heap_pop(s);
        symbol *l = &s->sym[b.left], *r = &s->sym[b.right];
        if (l->len == 0 || r->len == 0 || l->id != b.lid || r->id != b.rid) continue;
        const pair_slot *p = pair_find(v, l->id, r->id);
        l->len += r->len;
        l->id = p->result;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) s->sym[r->next].prev = b.left;
        if (!bpe_try_bigram(s, l->prev, b.left) || !bpe_try_bigram(s, b.left, l->next))
            return ps_fail(s->err, PS_ERR_NOMEM, -1, "out of memory tokenizing");
    }
    for (int32_t i = 0; i != -1; i = s->sym[i].next) {
        const symbol *sy = &s->sym[i];
        if (sy->id >= 0 && sy->id < v->n_tokens) {
            emit(s, sy->id);
            continue;
        }
        /* not a token: llama.cpp emits the single bytes of the encoded text that are tokens */
        for (size_t k = 0; k < sy->len; k++) {
            uint8_t b = (uint8_t)w[sy->off + k];
            for (int j = 0; j < v->benc_len[b]; j++) {
                int32_t id = token_find(v, &v->benc[b][j], 1);
                if (id >= 0) emit(s, id);
            }
        }
    }
    return PS_OK;
}

/* Splits every span of `in` with regex `re` into `out` (matches and the gaps between them). */
static ps_status regex_split(tok_state *s, const pcre2_code *re, const char *text,
                             const span_vec *in, span_vec *out) {
    out->n = 0;
    for (size_t k = 0; k < in->n; k++) {
        const char *subj = text + in->v[k].off;
        size_t len = in->v[k].len, start = 0, prev = 0;
        while (start <= len) {
            int rc = pcre2_match(re, (PCRE2_SPTR)subj, len, start, 0, s->md, NULL);
            if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
                rc = pcre2_match(re, (PCRE2_SPTR)subj, len, start, PCRE2_NO_JIT, s->md, NULL);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                if (rc == PCRE2_ERROR_NOMEMORY || rc == PCRE2_ERROR_HEAPLIMIT)
                    return ps_fail(s->err, PS_ERR_NOMEM, -1, "out of memory in the pre-tokenizer");
                PCRE2_UCHAR msg[120];
                pcre2_get_error_message(rc, msg, sizeof msg);
                return ps_fail(s->err, PS_ERR_INTERNAL, (int64_t)(in->v[k].off + start),
                               "pre-tokenizer regex failed: %s", (const char *)msg);
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
            size_t m0 = ov[0], m1 = ov[1];
            if (m0 > prev && !span_push(out, in->v[k].off + prev, m0 - prev, -1))
                return ps_fail(s->err, PS_ERR_NOMEM, -1, "out of memory tokenizing");
            if (m1 > m0 && !span_push(out, in->v[k].off + m0, m1 - m0, -1))
                return ps_fail(s->err, PS_ERR_NOMEM, -1, "out of memory tokenizing");
            prev = m1 > m0 ? m1 : prev;
            if (m1 > m0) {
                start = m1;
            } else { /* an empty match: step over one character */
                start = m1 + (m1 < len ? PS_MIN(utf8_len((uint8_t)subj[m1]), len - m1) : 1);
            }
        }
        if (prev < len && !span_push(out, in->v[k].off + prev, len - prev, -1))
            return ps_fail(s->err, PS_ERR_NOMEM, -1, "out of memory tokenizing");
    }
    return PS_OK;
}

static ps_status bpe_tokenize(tok_state *s, const char *text, size_t off, size_t len) {
    const ps_vocab *v = s->v;
    s->pieces.n = 0;
    if (!span_push(&s->pieces, off, len, -1))
        return ps_fail(s->err, PS_ERR_NOMEM, -1, "out of memory tokenizing");
    for (int r = 0; r < v->n_re; r++) {
        ps_status st = regex_split(s, v->re[r], text, &s->pieces, &s->pieces2);
        if (st) return st;
        span_vec t = s->pieces;
        s->pieces = s->pieces2;
        s->pieces2 = t;
    }
    for (size_t k = 0; k < s->pieces.n; k++) {
        ps_status st = bpe_word(s, text + s->pieces.v[k].off, s->pieces.v[k].len);
        if (st) return st;
    }
    return PS_OK;
}

/* The pre-tokenizer's pieces of a text (no special-token cut): see vocab.h. */
ps_status ps_vocab_pre_split(const ps_vocab *v, const char *text, size_t len, size_t *starts,
                             size_t capacity, size_t *n_pieces, ps_error *err) {
    if (!v || !n_pieces || (len > 0 && !text) || (capacity > 0 && !starts))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "ps_vocab_pre_split: NULL argument");
    if (v->kind != VOCAB_BPE)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "ps_vocab_pre_split: not a byte-level BPE vocab");
    tok_state s = {0};
    s.v = v;
    s.err = err;
    ps_status st = PS_OK;
    *n_pieces = 0;
    if (len == 0) return PS_OK;
    if (!span_push(&s.pieces, 0, len, -1)) {
        st = ps_fail(err, PS_ERR_NOMEM, -1, "out of memory splitting");
        goto done;
    }
    if (v->n_re > 0 && !(s.md = pcre2_match_data_create(1, v->gctx))) {
        st = ps_fail(err, PS_ERR_NOMEM, -1, "out of memory for regex match data");
        goto done;
    }
    for (int r = 0; r < v->n_re; r++) {
        if ((st = regex_split(&s, v->re[r], text, &s.pieces, &s.pieces2))) goto done;
        span_vec t = s.pieces;
        s.pieces = s.pieces2;
        s.pieces2 = t;
    }
    for (size_t k = 0; k < s.pieces.n && k < capacity; k++) starts[k] = s.pieces.v[k].off;
    *n_pieces = s.pieces.n;
done:
    pcre2_match_data_free(s.md);
    ps_free(s.pieces.v);
    ps_free(s.pieces2.v);
    return st;
}

/* ---- special tokens ---- */

/* Cuts the text of special tokens out of the raw spans, longest token first. */
static ps_status partition_special(tok_state *s, const char *text, size_t len, bool parse_special,
                                   span_vec *frags, span_vec *tmp) {
    const ps_vocab *v = s->v;
    frags->n = 0;
    if (len && !span_push(frags, 0, len, -1))
        return ps_fail(s->err, PS_ERR_NOMEM, -1, "out of memory tokenizing");
    if (len == 0 || v->n_special == 0) return PS_OK;
    /* Which byte pairs occur in the text: most special tokens (thousands of "[PAD123]" in some
     * vocabularies) are rejected with one bit test instead of a scan of the text. */
    uint64_t *pairs = ps_calloc(65536 / 64, sizeof *pairs);
    if (!pairs) return ps_fail(s->err, PS_ERR_NOMEM, -1, "out of memory tokenizing");
    for (size_t i = 0; i + 1 < len; i++) {
        unsigned x = (unsigned)(uint8_t)text[i] << 8 | (uint8_t)text[i + 1];
        pairs[x >> 6] |= 1ull << (x & 63);
    }
    for (int32_t k = 0; k < v->n_special; k++) {
        int32_t id = v->special[k];
        const token_info *t = &v->tok[id];
        if (!parse_special && t->type != TT_USER_DEFINED) continue;
        const char *tt = v->blob + t->piece_off;
        size_t tl = t->piece_len;
        if (tl > len) continue;
        if (tl >= 2) {
            unsigned x = (unsigned)(uint8_t)tt[0] << 8 | (uint8_t)tt[1];
            unsigned y = (unsigned)(uint8_t)tt[tl - 2] << 8 | (uint8_t)tt[tl - 1];
            if (!(pairs[x >> 6] >> (x & 63) & 1) || !(pairs[y >> 6] >> (y & 63) & 1)) continue;
        }
        /* quick reject: does the token occur at all? */
        bool any = false;
        for (size_t f = 0; f < frags->n && !any; f++)
            if (frags->v[f].id < 0 && frags->v[f].len >= tl &&
                memmem(text + frags->v[f].off, frags->v[f].len, tt, tl))
                any = true;
        if (!any) continue;
        tmp->n = 0;
        for (size_t f = 0; f < frags->n; f++) {
            span sp = frags->v[f];
            if (sp.id >= 0) {
                if (!span_push(tmp, sp.off, sp.len, sp.id)) goto nomem;
                continue;
            }
            size_t o = sp.off, end = sp.off + sp.len;
            while (o < end) {
                const char *m = end - o >= tl ? memmem(text + o, end - o, tt, tl) : NULL;
                if (!m) {
                    if (!span_push(tmp, o, end - o, -1)) goto nomem;
                    break;
                }
                size_t mo = (size_t)(m - text);
                if (mo > o && !span_push(tmp, o, mo - o, -1)) goto nomem;
                if (!span_push(tmp, mo, tl, id)) goto nomem;
                o = mo + tl;
            }
        }
        span_vec t2 = *frags;
        *frags = *tmp;
        *tmp = t2;
    }
    ps_free(pairs);
    return PS_OK;
nomem:
    ps_free(pairs);
    return ps_fail(s->err, PS_ERR_NOMEM, -1, "out of memory tokenizing");
}

static ps_status tokenize(const ps_vocab *v, const char *text, size_t len, bool add_bos,
                         bool parse_special, size_t max_piece, int32_t *ids, int32_t capacity,
                         int32_t *n_ids, ps_error *err) {
    if (!v || !n_ids || capacity < 0 || (capacity > 0 && !ids) || (len > 0 && !text))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "ps_vocab_tokenize: NULL vocab/text/ids/n_ids or negative capacity");
    if (len > (size_t)INT32_MAX)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "text of %zu bytes is too long (at most 2^31-1)",
                       len);
    tok_state s = {0};
    s.v = v;
    s.ids = ids;
    s.capacity = capacity;
    s.max_piece = max_piece;
    s.err = err;
    span_vec frags = {0}, tmp = {0};
    ps_status st = PS_OK;

    if (add_bos && v->add_bos && v->bos >= 0) emit(&s, v->bos);
    st = partition_special(&s, text, len, parse_special, &frags, &tmp);
    if (st) goto done;
    if (v->kind == VOCAB_BPE && v->n_re > 0) {
        s.md = pcre2_match_data_create(1, v->gctx);
        if (!s.md) {
            st = ps_fail(err, PS_ERR_NOMEM, -1, "out of memory for regex match data");
            goto done;
        }
    }
    bool prev_special = true;
    for (size_t f = 0; f < frags.n; f++) {
        span sp = frags.v[f];
        if (sp.id >= 0) {
            emit(&s, sp.id);
            prev_special = true;
            continue;
        }
        if (v->kind == VOCAB_SPM) {
            /* escape: optional leading space, every ' ' -> U+2581 */
            size_t need = 3 * (sp.len + 1);
            if (!grow((void **)&s.buf, &s.buf_cap, need, 1)) {
                st = ps_fail(err, PS_ERR_NOMEM, -1, "out of memory tokenizing");
                goto done;
            }
            size_t o = 0;
            if (v->add_space_prefix && prev_special) {
                memcpy(s.buf, "\xe2\x96\x81", 3);
                o = 3;
            }
            for (size_t i = 0; i < sp.len; i++) {
                char c = text[sp.off + i];
                if (c == ' ') {
                    memcpy(s.buf + o, "\xe2\x96\x81", 3);
                    o += 3;
                } else {
                    s.buf[o++] = c;
                }
            }
            /* spm_tokenize reads s.buf; it does not grow it */
            st = spm_tokenize(&s, s.buf, o);
        } else {
            st = bpe_tokenize(&s, text, sp.off, sp.len);
        }
        if (st) goto done;
        prev_special = false;
    }
    if (s.n > INT32_MAX) {
        st = ps_fail(err, PS_ERR_INVALID_ARG, -1, "text needs more than 2^31-1 tokens");
        goto done;
    }
    *n_ids = (int32_t)s.n;
done:
    pcre2_match_data_free(s.md);
    ps_free(s.sym);
    ps_free(s.heap);
    ps_free(s.buf);
    ps_free(s.pieces.v);
    ps_free(s.pieces2.v);
    ps_free(frags.v);
    ps_free(tmp.v);
    return st;
}

ps_status ps_vocab_tokenize(const ps_vocab *v, const char *text, size_t len, bool add_bos,
                            bool parse_special, int32_t *ids, int32_t capacity, int32_t *n_ids,
                            ps_error *err) {
    return tokenize(v, text, len, add_bos, parse_special, 0, ids, capacity, n_ids, err);
}

static ps_status tokenize_alloc(const ps_vocab *v, const char *text, size_t len, bool add_bos,
                                bool parse_special, size_t max_piece, int32_t **ids, int32_t *n,
                                ps_error *err) {
    *ids = NULL;
    *n = 0;
    if (len > (size_t)INT32_MAX / 2)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "the text is too long (%zu bytes)", len);
    int32_t cap = (int32_t)len + 8; /* enough unless a byte becomes several tokens */
    for (int attempt = 0; attempt < 2; attempt++) {
        int32_t *buf = ps_malloc((size_t)cap * sizeof *buf);
        if (!buf) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory tokenising %zu bytes", len);
        int32_t need = 0;
        ps_status st = tokenize(v, text, len, add_bos, parse_special, max_piece, buf, cap, &need,
                                err);
        if (st != PS_OK || need <= cap) {
            if (st != PS_OK) ps_free(buf);
            else *ids = buf, *n = need;
            return st;
        }
        ps_free(buf);
        cap = need;
    }
    return ps_fail(err, PS_ERR_INTERNAL, -1, "the tokenizer changed its mind about the length");
}

ps_status ps_vocab_tokenize_alloc(const ps_vocab *v, const char *text, size_t len, bool add_bos,
                                  bool parse_special, int32_t **ids, int32_t *n, ps_error *err) {
    return tokenize_alloc(v, text, len, add_bos, parse_special, 0, ids, n, err);
}

/* The most bytes of text one token can stand for, or 0 when some byte of text can yield no
 * token at all, so that no length of text bounds its token count from below. Each token the
 * tokenizer emits covers at most max(piece, bytes) bytes of the text (SentencePiece: of the
 * escaped text, which is never shorter than the raw one; BPE: raw bytes, each at least one
 * byte of the piece), and every byte is covered by some token when an unknown piece falls back
 * to a token per byte: SentencePiece needs <unk> or all 256 byte tokens; BPE needs a token for
 * every byte and no merge whose result is no token (a pseudo id falls back to single bytes of
 * the GPT-2 characters, which may be no token). */
static size_t token_span_max(const ps_vocab *v) {
    if (v->kind == VOCAB_SPM) {
        bool every = v->unk >= 0 && v->unk < v->n_tokens;
        for (int b = 0; b < 256 && !every; b++)
            if (v->byte_id[b] < 0) return 0;
    } else {
        if (v->n_ids != v->n_tokens) return 0;
        for (int b = 0; b < 256; b++)
            if (v->byte_id[b] < 0 || v->byte_id[b] >= v->n_tokens) return 0;
    }
    size_t m = 1;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        size_t l = PS_MAX(v->tok[i].piece_len, v->tok[i].bytes_len);
        if (l > m) m = l;
    }
    return m;
}

ps_status ps_vocab_tokenize_alloc_max(const ps_vocab *v, const char *text, size_t len,
                                      bool add_bos, bool parse_special, int64_t max_tokens,
                                      size_t max_piece, int32_t **ids, int32_t *n,
                                      ps_error *err) {
    *ids = NULL;
    *n = 0;
    if (max_tokens > 0 && len > (uint64_t)max_tokens) {
        const size_t most = token_span_max(v);
        if (most > 0 && (len - 1) / most >= (uint64_t)max_tokens) /* len > max_tokens * most */
            return ps_fail(err, PS_ERR_CONTEXT, -1,
                           "a text of %zu bytes has more than %lld tokens (a token of this "
                           "vocabulary stands for at most %zu bytes; not tokenized)",
                           len, (long long)max_tokens, most);
    }
    return tokenize_alloc(v, text, len, add_bos, parse_special, max_piece, ids, n, err);
}

/* ------------------------------------------------------------------------------------------ */
/* Offsets of tokens in the text they came from                                              */
/* ------------------------------------------------------------------------------------------ */

/* Walks the text with a cursor: a token whose bytes (for a special token, one the tokenizer
 * cuts out of the text first, such as "<s>" or "<|endoftext|>": its piece) are found at the
 * cursor starts there and moves it on. The SentencePiece space prefix (added at the start of
 * the text and after each special token, as ps_vocab_tokenize does) is a space the text does
 * not hold: the first token after such a point drops one leading space before matching (a
 * token that is the prefix alone is null). Anything else (BOS, a token the text does not spell at that point,
 * such as <unk>) is null and leaves the cursor where it is. */
void ps_vocab_prompt_offsets(const ps_vocab *v, const char *text, size_t len, const int32_t *ids,
                             int32_t n, bool bos_added, int32_t *out) {
    const bool spm_prefix = v->kind == VOCAB_SPM && v->add_space_prefix;
    bool prefix = spm_prefix; /* the next token carries an added space */
    size_t p = 0;
    for (int32_t i = 0; i < n; i++) {
        out[i] = -1;
        if (i == 0 && bos_added) continue;
        if (ids[i] < 0 || ids[i] >= v->n_tokens) continue;
        const token_info *t = &v->tok[ids[i]];
        const char *b = v->blob + t->bytes_off;
        size_t bl = t->bytes_len;
        /* a token the tokenizer cuts out of the text before the rest (control, user-defined,
         * unknown with a text): spelled by its piece, and the text after it gets the prefix */
        const bool special = is_special_token(t);
        if (special || bl == 0) {
            b = v->blob + t->piece_off;
            bl = t->piece_len;
        }
        if (prefix && !special && bl > 0 && b[0] == ' ') {
            prefix = false;
            b++;
            bl--;
            if (bl == 0) continue; /* the prefix alone */
        }
        if (bl == 0 || p > len || p > (size_t)INT32_MAX) continue;
        if (bl <= len - p && !memcmp(text + p, b, bl)) {
            out[i] = (int32_t)p;
            p += bl;
            if (special) prefix = spm_prefix;
            else prefix = false;
        }
    }
}

/* The public form: the arguments checked, then ps_vocab_prompt_offsets. */
ps_status ps_vocab_byte_offsets(const ps_vocab *v, const char *text, size_t len,
                                const int32_t *ids, int32_t n_ids, bool bos_added,
                                int32_t *offsets) {
    if (!v || n_ids < 0 || (len > 0 && !text) || (n_ids > 0 && (!ids || !offsets)))
        return PS_ERR_INVALID_ARG;
    ps_vocab_prompt_offsets(v, text ? text : "", len, ids, n_ids, bos_added, offsets);
    return PS_OK;
}
