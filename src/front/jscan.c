/*
 * jscan.c — the JSON pre-scanner of jscan.h: a byte-at-a-time pushdown recogniser with a fixed
 * state (a bit stack of container kinds, PS_JSCAN_DEPTH_MAX deep), fed in pieces.
 *
 * Two layers. The lexer follows the token being read: a string (escape, \u hex digits), a
 * number (RFC 8259's grammar: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?) or a
 * literal (true, false, null); a number ends at the first byte outside its grammar, which is
 * then read again by the grammar layer. The grammar layer keeps what may come next (a value,
 * a key, ':', ',' or a closing bracket) and the stack. Hooks on every value's start and end
 * count what lies under the top-level "prompt" key (depth 2: the prompt's own list — ids, or
 * prompts; depth 3: the ids of one prompt of a list) and keep the span of the top-level "id".
 * Offsets count from the first byte fed.
 */
#include "front/jscan.h"

#include <stdio.h>

enum { E_VALUE, E_VALUE_OR_CLOSE, E_KEY_OR_CLOSE, E_KEY, E_COLON, E_COMMA_OR_CLOSE, E_END };
enum { L_NONE, L_STRING, L_NUMBER, L_LITERAL };
/* number sub-states; the terminal ones are N_ZERO, N_INT, N_FRAC, N_EXP */
enum { N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };
enum { K_PROMPT = 1, K_ID = 2, K_ESC = 4 };
enum { V_STRING, V_NUMBER, V_LITERAL, V_ARRAY, V_OBJECT };

static const char *const LITERALS[3] = {"true", "false", "null"};

void ps_jscan_init(ps_jscan *s, const ps_jscan_limits *lim) {
    memset(s, 0, sizeof *s);
    if (lim) s->lim = *lim;
    if (s->lim.max_depth <= 0 || s->lim.max_depth > PS_JSCAN_DEPTH_MAX)
        s->lim.max_depth = PS_JSCAN_DEPTH_MAX;
    s->id_start = s->id_end = -1;
    s->expect = E_VALUE;
    ps_error_clear(&s->err);
}

static ps_status fail(ps_jscan *s, ps_jscan_what what, int64_t off, const char *fmt, ...)
    PS_PRINTF(4, 5);
static ps_status fail(ps_jscan *s, ps_jscan_what what, int64_t off, const char *fmt, ...) {
    static const ps_status code[] = {PS_OK, PS_ERR_FORMAT, PS_ERR_LIMIT, PS_ERR_LIMIT,
                                     PS_ERR_CONTEXT, PS_ERR_LIMIT, PS_ERR_LIMIT};
    s->what = what;
    s->err.code = code[what];
    s->err.offset = off;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err.message, sizeof s->err.message, fmt, ap);
    va_end(ap);
    return s->err.code;
}

/* The byte as a message shows it. */
static const char *show(char c, char buf[8]) {
    unsigned char u = (unsigned char)c;
    if (u >= 0x21 && u < 0x7f) snprintf(buf, 8, "'%c'", c);
    else snprintf(buf, 8, "0x%02x", u);
    return buf;
}

static bool top_is_object(const ps_jscan *s) {
    int32_t d = s->depth - 1;
    return d >= 0 && (s->stack[d / 64] >> (d % 64) & 1);
}

static ps_status count_prompt(ps_jscan *s, int64_t off) {
    s->n_prompts++;
    if (s->lim.max_prompts > 0 && s->n_prompts > s->lim.max_prompts)
        return fail(s, PS_JSCAN_PROMPTS, off,
                    "\"prompt\" holds more than %lld prompts (the limit), at byte %lld",
                    (long long)s->lim.max_prompts, (long long)off);
    return PS_OK;
}

static ps_status count_id(ps_jscan *s, int64_t *len, int64_t off) {
    ++*len;
    s->n_ids++;
    if (s->lim.max_ids > 0 && *len > s->lim.max_ids)
        return fail(s, PS_JSCAN_IDS, off,
                    "a prompt's id list has more than %lld ids (the limit), at byte %lld",
                    (long long)s->lim.max_ids, (long long)off);
    if (s->lim.max_total_ids > 0 && s->n_ids > s->lim.max_total_ids)
        return fail(s, PS_JSCAN_TOTAL_IDS, off,
                    "\"prompt\" holds more than %lld token ids in all (the limit), at byte %lld",
                    (long long)s->lim.max_total_ids, (long long)off);
    return PS_OK;
}

/* A value of kind v begins at off; s->depth is the depth it sits at (before a push). */
static ps_status value_start(ps_jscan *s, int v, int64_t off) {
    if (s->depth == 1 && top_is_object(s)) {
        s->value_start = off;
        if (s->value_key & K_PROMPT) {
            if (v == V_STRING) return count_prompt(s, off);
            if (v == V_ARRAY) {
                s->prompt_depth = 2;
                s->list_len = 0;
                s->list_start = off;
            }
        }
        return PS_OK;
    }
    if (s->prompt_depth == 2 && s->depth == 2) { /* an element of the prompt's list */
        if (v == V_NUMBER) return count_id(s, &s->list_len, off);
        if (v == V_STRING || v == V_ARRAY || v == V_OBJECT) {
            ps_status st = count_prompt(s, off);
            if (st != PS_OK || v != V_ARRAY) return st;
            s->prompt_depth = 3; /* an id list of its own */
            s->inner_len = 0;
        }
        return PS_OK;
    }
    if (s->prompt_depth == 3 && s->depth == 3 && v == V_NUMBER) return count_id(s, &s->inner_len, off);
    return PS_OK;
}

/* The value that began at depth s->depth (after its pop) ended just before off. */
static void value_end(ps_jscan *s, int64_t off) {
    if (s->depth == 1 && top_is_object(s) && s->value_key == K_ID) {
        s->id_start = s->value_start;
        s->id_end = off;
    }
    s->expect = s->depth == 0 ? E_END : E_COMMA_OR_CLOSE;
}

static ps_status push(ps_jscan *s, bool object, int64_t off) {
    ps_status st = value_start(s, object ? V_OBJECT : V_ARRAY, off);
    if (st != PS_OK) return st;
    if (s->depth >= s->lim.max_depth)
        return fail(s, PS_JSCAN_DEPTH, off,
                    "JSON nested deeper than %d levels (the limit), at byte %lld",
                    (int)s->lim.max_depth, (long long)off);
    int32_t d = s->depth++;
    if (object) s->stack[d / 64] |= (uint64_t)1 << (d % 64);
    else s->stack[d / 64] &= ~((uint64_t)1 << (d % 64));
    if (s->depth > s->depth_max) s->depth_max = s->depth;
    s->expect = object ? E_KEY_OR_CLOSE : E_VALUE_OR_CLOSE;
    return PS_OK;
}

static ps_status pop(ps_jscan *s, int64_t off) {
    if (s->prompt_depth == s->depth && s->prompt_depth > 0) {
        /* a flat id list is one prompt; an inner list was counted when it opened */
        if (s->prompt_depth == 2 && s->list_len > 0) {
            ps_status st = count_prompt(s, s->list_start);
            if (st != PS_OK) return st;
        }
        s->prompt_depth--;
        if (s->prompt_depth == 1) s->prompt_depth = 0;
    }
    s->depth--;
    value_end(s, off + 1);
    return PS_OK;
}

static ps_status syntax(ps_jscan *s, int64_t off, char c, const char *wanted) {
    char b[8];
    return fail(s, PS_JSCAN_SYNTAX, off, "invalid JSON at byte %lld: expected %s, got %s",
                (long long)off, wanted, show(c, b));
}

/* One byte in the grammar layer (no token in progress). */
static ps_status grammar(ps_jscan *s, char c, int64_t off) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') return PS_OK;
    switch (s->expect) {
    case E_END:
        return syntax(s, off, c, "nothing after the value");
    case E_COLON:
        if (c != ':') return syntax(s, off, c, "':' after an object key");
        s->expect = E_VALUE;
        return PS_OK;
    case E_COMMA_OR_CLOSE:
        if (c == ',') {
            s->expect = top_is_object(s) ? E_KEY : E_VALUE;
            return PS_OK;
        }
        if (c == (top_is_object(s) ? '}' : ']')) return pop(s, off);
        return syntax(s, off, c, top_is_object(s) ? "',' or '}'" : "',' or ']'");
    case E_KEY_OR_CLOSE:
        if (c == '}') return pop(s, off);
        /* fall through */
    case E_KEY:
        if (c != '"') return syntax(s, off, c, "an object key (a string)");
        s->lex = L_STRING;
        s->sub = 0;
        s->in_string_key = true;
        s->key_len = 0;
        s->key_match = s->depth == 1 ? K_PROMPT | K_ID : 0;
        return PS_OK;
    case E_VALUE_OR_CLOSE:
        if (c == ']') return pop(s, off);
        /* fall through */
    case E_VALUE:
    default:
        break;
    }
    /* a value */
    if (c == '{' || c == '[') return push(s, c == '{', off);
    if (c == '"') {
        s->lex = L_STRING;
        s->sub = 0;
        s->in_string_key = false;
        return value_start(s, V_STRING, off);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        s->lex = L_NUMBER;
        s->sub = c == '-' ? N_MINUS : c == '0' ? N_ZERO : N_INT;
        return value_start(s, V_NUMBER, off);
    }
    for (int i = 0; i < 3; i++)
        if (c == LITERALS[i][0]) {
            s->lex = L_LITERAL;
            s->sub = (uint8_t)(i * 8 + 1);
            return value_start(s, V_LITERAL, off);
        }
    return syntax(s, off, c, "a value");
}

static void key_byte(ps_jscan *s, char c) {
    if (!s->key_match) return;
    if (c == '\\') {
        s->key_match = K_PROMPT | K_ESC; /* may decode to "prompt"; never the raw "id" */
        return;
    }
    if (s->key_match & K_ESC) return;
    if (s->key_len >= 6 || c != "prompt"[s->key_len]) s->key_match &= (uint8_t)~K_PROMPT;
    if (s->key_len >= 2 || c != "id"[s->key_len]) s->key_match &= (uint8_t)~K_ID;
    s->key_len++;
}

/* The closing quote of a string at off. */
static ps_status string_end(ps_jscan *s, int64_t off) {
    s->lex = L_NONE;
    if (s->in_string_key) {
        uint8_t m = s->key_match;
        if (!(m & K_ESC)) {
            if (s->key_len != 6) m &= (uint8_t)~K_PROMPT;
            if (s->key_len != 2) m &= (uint8_t)~K_ID;
        }
        if (s->depth == 1) s->value_key = m & (K_PROMPT | K_ID);
        s->in_string_key = false;
        s->expect = E_COLON;
        return PS_OK;
    }
    value_end(s, off + 1);
    return PS_OK;
}

static bool is_hex(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

ps_status ps_jscan_feed(ps_jscan *s, const char *data, size_t n, ps_error *err) {
    if (s->what != PS_JSCAN_OK) goto out;
    size_t lim_n = n;
    bool over = false;
    if (s->lim.max_bytes > 0 && (uint64_t)s->n_bytes + n > (uint64_t)s->lim.max_bytes) {
        lim_n = (size_t)(s->lim.max_bytes - s->n_bytes);
        over = true;
    }
    for (size_t i = 0; i < lim_n; i++) {
        char c = data[i];
        int64_t off = s->n_bytes + (int64_t)i;
        switch (s->lex) {
        case L_STRING:
            if (s->sub == 0) {
                /* the common case: plain bytes up to the next quote, backslash or control */
                while (i < lim_n && data[i] != '"' && data[i] != '\\' &&
                       (unsigned char)data[i] >= 0x20) {
                    if (s->in_string_key) key_byte(s, data[i]);
                    i++;
                }
                if (i == lim_n) goto done;
                c = data[i];
                off = s->n_bytes + (int64_t)i;
                if (c == '"') {
                    string_end(s, off);
                } else if (c == '\\') {
                    if (s->in_string_key) key_byte(s, c);
                    s->sub = 1;
                } else {
                    char b[8];
                    fail(s, PS_JSCAN_SYNTAX, off,
                         "invalid JSON at byte %lld: a raw control character %s in a string",
                         (long long)off, show(c, b));
                    goto out;
                }
            } else if (s->sub == 1) {
                if (c == 'u') {
                    s->sub = 14; /* four hex digits follow */
                } else if (c && strchr("\"\\/bfnrt", c)) {
                    s->sub = 0;
                } else {
                    syntax(s, off, c, "an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
                    goto out;
                }
            } else {
                if (!is_hex(c)) {
                    syntax(s, off, c, "a hex digit of \\uXXXX");
                    goto out;
                }
                s->sub = s->sub == 11 ? 0 : (uint8_t)(s->sub - 1);
            }
            break;
        case L_NUMBER: {
            bool digit = c >= '0' && c <= '9';
            uint8_t next = 255; /* 255: the byte is not part of the number */
            switch (s->sub) {
            case N_MINUS: next = c == '0' ? N_ZERO : digit ? N_INT : 254; break;
            case N_ZERO: next = c == '.' ? N_DOT : (c == 'e' || c == 'E') ? N_E : digit ? 254 : 255; break;
            case N_INT: next = digit ? N_INT : c == '.' ? N_DOT : (c == 'e' || c == 'E') ? N_E : 255; break;
            case N_DOT: next = digit ? N_FRAC : 254; break;
            case N_FRAC: next = digit ? N_FRAC : (c == 'e' || c == 'E') ? N_E : 255; break;
            case N_E: next = (c == '+' || c == '-') ? N_ESIGN : digit ? N_EXP : 254; break;
            case N_ESIGN: next = digit ? N_EXP : 254; break;
            case N_EXP: next = digit ? N_EXP : 255; break;
            }
            if (next == 254) {
                syntax(s, off, c, "a digit (a JSON number)");
                goto out;
            }
            if (next != 255) {
                s->sub = next;
                break;
            }
            s->lex = L_NONE; /* the number ended before this byte */
            value_end(s, off);
            if (grammar(s, c, off) != PS_OK) goto out;
            break;
        }
        case L_LITERAL: {
            const char *lit = LITERALS[s->sub / 8];
            int pos = s->sub % 8;
            if (c != lit[pos]) {
                char want[16];
                snprintf(want, sizeof want, "'%c' of %s", lit[pos], lit);
                syntax(s, off, c, want);
                goto out;
            }
            if (lit[pos + 1] == '\0') {
                s->lex = L_NONE;
                value_end(s, off + 1);
            } else {
                s->sub++;
            }
            break;
        }
        default:
            if (grammar(s, c, off) != PS_OK) goto out;
        }
    }
done:
    s->n_bytes += (int64_t)lim_n;
    if (over)
        fail(s, PS_JSCAN_BYTES, s->lim.max_bytes, "the text is longer than %lld bytes (the limit)",
             (long long)s->lim.max_bytes);
out:
    if (s->what == PS_JSCAN_OK) return PS_OK;
    s->n_bytes = s->err.offset; /* read up to the byte refused */
    if (err) *err = s->err;
    return s->err.code;
}

ps_status ps_jscan_end(ps_jscan *s, ps_error *err) {
    if (s->what == PS_JSCAN_OK) {
        if (s->lex == L_NUMBER && (s->sub == N_ZERO || s->sub == N_INT || s->sub == N_FRAC ||
                                   s->sub == N_EXP)) {
            s->lex = L_NONE;
            value_end(s, s->n_bytes);
        }
        if (s->lex != L_NONE || s->expect != E_END)
            fail(s, PS_JSCAN_SYNTAX, s->n_bytes,
                 "invalid JSON: the text ends at byte %lld inside %s", (long long)s->n_bytes,
                 s->lex == L_STRING ? "a string" : s->lex != L_NONE ? "a value"
                 : s->depth > 0 ? (top_is_object(s) ? "an object" : "an array") : "nothing (no value)");
    }
    if (s->what == PS_JSCAN_OK) return PS_OK;
    if (err) *err = s->err;
    return s->err.code;
}

ps_status ps_jscan_text(const char *text, size_t n, const ps_jscan_limits *lim, ps_jscan *s,
                        ps_error *err) {
    ps_jscan_init(s, lim);
    ps_status st = ps_jscan_feed(s, text, n, err);
    return st != PS_OK ? st : ps_jscan_end(s, err);
}
