/*
 * test_json.c — the response writer (json.c): ps_buf growth and out-of-memory behaviour,
 * JSON string escaping with invalid UTF-8 replaced by U+FFFD, float32 formatting that parses
 * back bit for bit (and is the shortest of %.6g..%.9g), -inf -> -9999.0, NaN -> null; and the
 * OpenAI logprobs object on real vocabularies from ../shared (text keys, duplicate keys keep
 * the first, the scored token appended, text_offset in code points, top_ids, null entry 0).
 */
#include "check.h"
#include "base/testhooks.h"
#include "front/json.h"
#include "base/util.h"

#include <jansson.h>
#include <math.h>

static bool str_is(const ps_buf *b, const char *want) {
    return b->data && b->len == strlen(want) && memcmp(b->data, want, b->len) == 0;
}

static void test_buf(void) {
    ps_buf b;
    ps_buf_init(&b);
    CHECK(b.data == NULL && b.len == 0 && !b.oom);
    ps_buf_puts(&b, "abc");
    ps_buf_append(&b, "de", 2);
    CHECK(str_is(&b, "abcde"));
    ps_buf_printf(&b, "-%d-%s", 42, "x");
    CHECK(str_is(&b, "abcde-42-x"));
    /* a printf longer than the internal 256-byte stack buffer */
    char big[1000];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = 0;
    ps_buf_printf(&b, "%s!", big);
    CHECK(b.len == 10 + 999 + 1 && b.data[b.len - 1] == '!' && b.data[b.len] == 0);
    ps_buf_reset(&b);
    CHECK(b.len == 0 && b.data && b.data[0] == 0);
    for (int i = 0; i < 100000; i++) ps_buf_append(&b, "0123456789", 10);
    CHECK(b.len == 1000000 && !b.oom && b.data[999999] == '9');
    ps_buf_free(&b);
    CHECK(b.data == NULL);

    /* allocation failure: oom set, appends ignored, no crash, no leak */
    ps_buf_init(&b);
    ps_alloc_fail_after(0);
    ps_buf_puts(&b, "hello");
    ps_buf_printf(&b, "%d", 5);
    ps_alloc_fail_after(-1);
    CHECK(b.oom && b.len == 0);
    ps_buf_puts(&b, "again");
    CHECK(b.oom && b.len == 0); /* stays failed */
    ps_buf_free(&b);
    ps_buf_init(&b);
    ps_buf_puts(&b, "ok");
    ps_alloc_fail_after(0);
    for (int i = 0; i < 100; i++) ps_buf_puts(&b, "grow grow grow grow grow ");
    ps_alloc_fail_after(-1);
    CHECK(b.oom && strncmp(b.data, "ok", 2) == 0);
    ps_buf_free(&b);
}

static void check_str(const char *in, size_t n, const char *want) {
    ps_buf b;
    ps_buf_init(&b);
    ps_json_str(&b, in, n);
    CHECKF(str_is(&b, want), "json_str got %s want %s", b.data ? b.data : "(null)", want);
    /* and jansson accepts it as a valid JSON string */
    json_error_t e;
    json_t *j = json_loadb(b.data, b.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    CHECKF(j && json_is_string(j), "jansson rejects %s: %s", b.data, e.text);
    json_decref(j);
    ps_buf_free(&b);
}

static void test_str(void) {
    check_str("", 0, "\"\"");
    check_str("plain text", 10, "\"plain text\"");
    check_str("q\"b\\s/", 6, "\"q\\\"b\\\\s/\"");
    check_str("\n\r\t\b\f", 5, "\"\\n\\r\\t\\b\\f\"");
    check_str("\x01\x1f\x7f", 3, "\"\\u0001\\u001f\x7f\"");
    check_str("a\0b", 3, "\"a\\u0000b\"");
    /* valid multi-byte UTF-8 is kept: é, 日, 😀 */
    check_str("\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80", 9, "\"\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80\"");
    /* a lone byte token, a truncated sequence, one run of several bad bytes -> one U+FFFD */
    check_str("\xe6", 1, "\"\xef\xbf\xbd\"");
    check_str("a\xe6\x97", 3, "\"a\xef\xbf\xbd\"");
    check_str("x\x80\x80\xffy", 5, "\"x\xef\xbf\xbdy\"");
    /* overlong '/', a surrogate half, above U+10FFFF */
    check_str("\xc0\xaf", 2, "\"\xef\xbf\xbd\"");
    check_str("\xed\xa0\x80z", 4, "\"\xef\xbf\xbdz\"");
    check_str("\xf4\x90\x80\x80", 4, "\"\xef\xbf\xbd\"");
    /* a bad run between two good characters, then a quote */
    check_str("\xc3\xa9\xc3\"", 4, "\"\xc3\xa9\xef\xbf\xbd\\\"\"");
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void) { return ps_splitmix64(&rng_state); }

static void check_f32(float v, const char *want) {
    ps_buf b;
    ps_buf_init(&b);
    ps_json_f32(&b, v);
    CHECKF(str_is(&b, want), "f32 %a got %s want %s", (double)v, b.data, want);
    ps_buf_free(&b);
}

static void test_f32(void) {
    check_f32(-INFINITY, "-9999.0");
    check_f32(NAN, "null");
    check_f32(INFINITY, "null");
    check_f32(0.0f, "0");
    check_f32(-0.5f, "-0.5");
    check_f32(0.1f, "0.1");
    check_f32(-3.2188f, "-3.2188");
    check_f32(-7.0411f, "-7.0411");
    check_f32(1e-5f, "1e-05");
    check_f32(-2432.91186523f, "-2432.9119"); /* nearest float is -2432.91186523... */
    check_f32(16777216.0f, "16777216");
    check_f32(3.4028235e38f, "3.4028235e+38");

    /* every printed value parses back (strtof and jansson's double -> float) to the same bits,
     * and no shorter precision in 6..8 would have done so */
    int bad = 0, not_shortest = 0, bad_json = 0;
    for (int i = 0; i < 200000; i++) {
        uint32_t bits = (uint32_t)rng();
        if (i % 2) bits = (bits & 0x807fffffu) | (uint32_t)((120 + rng() % 16) << 23); /* ~logprobs */
        float v;
        memcpy(&v, &bits, 4);
        if (!isfinite(v)) continue;
        ps_buf b;
        ps_buf_init(&b);
        ps_json_f32(&b, v);
        float back = strtof(b.data, NULL);
        if (memcmp(&back, &v, 4) != 0) bad++;
        int prec = 0;
        char tmp[40];
        for (int p = 6; p <= 9; p++) {
            snprintf(tmp, sizeof tmp, "%.*g", p, (double)v);
            float t = strtof(tmp, NULL);
            if (memcmp(&t, &v, 4) == 0) {
                prec = p;
                break;
            }
        }
        snprintf(tmp, sizeof tmp, "%.*g", prec ? prec : 9, (double)v);
        if (strcmp(tmp, b.data) != 0) not_shortest++;
        if (i % 16 == 0) {
            json_t *j = json_loadb(b.data, b.len, JSON_DECODE_ANY, NULL);
            float jf = j ? (float)json_number_value(j) : NAN;
            if (!j || memcmp(&jf, &v, 4) != 0) bad_json++;
            json_decref(j);
        }
        ps_buf_free(&b);
    }
    /* values where the fast path decides edges: next to powers of ten and of two, every
     * decade from 1e-20 to 1e8, integers, and random mantissas over exponents 2^-70..2^30 */
    float edge[4000];
    int ne = 0;
    for (int d = -20; d <= 8; d++) {
        float p10 = (float)pow(10.0, d);
        float lo = p10, hi = p10;
        for (int j = 0; j < 4; j++) {
            edge[ne++] = lo;
            edge[ne++] = hi;
            lo = nextafterf(lo, 0.0f);
            hi = nextafterf(hi, INFINITY);
        }
    }
    for (int b2 = -70; b2 <= 30; b2++) {
        float p2 = ldexpf(1.0f, b2);
        edge[ne++] = p2;
        edge[ne++] = nextafterf(p2, 0.0f);
        edge[ne++] = nextafterf(p2, INFINITY);
    }
    for (int i = 1; i < 300; i++) edge[ne++] = (float)i * 0.5f;
    for (int i = 0; i < ne; i++) {
        for (int sign = 0; sign < 2; sign++) {
            float v = sign ? -edge[i] : edge[i];
            char want[40], tmp[40];
            for (int p = 6; p <= 9; p++) {
                snprintf(want, sizeof want, "%.*g", p, (double)v);
                if (strtof(want, NULL) == v) break;
            }
            ps_buf b;
            ps_buf_init(&b);
            ps_json_f32(&b, v);
            snprintf(tmp, sizeof tmp, "%s", b.data);
            if (strcmp(tmp, want) != 0) {
                if (not_shortest++ < 5) fprintf(stderr, "edge %a: got %s want %s\n", (double)v, tmp, want);
            }
            ps_buf_free(&b);
        }
    }
    for (int i = 0; i < 200000; i++) {
        uint32_t bits = ((uint32_t)rng() & 0x807fffffu) | (uint32_t)((57 + rng() % 100) << 23);
        float v;
        memcpy(&v, &bits, 4);
        char want[40];
        for (int p = 6; p <= 9; p++) {
            snprintf(want, sizeof want, "%.*g", p, (double)v);
            if (strtof(want, NULL) == v) break;
        }
        ps_buf b;
        ps_buf_init(&b);
        ps_json_f32(&b, v);
        if (strcmp(b.data, want) != 0 && not_shortest++ < 5)
            fprintf(stderr, "wide %a: got %s want %s\n", (double)v, b.data, want);
        ps_buf_free(&b);
    }
    CHECKF(bad == 0, "%d values did not round-trip", bad);
    CHECKF(not_shortest == 0, "%d values not in the shortest form", not_shortest);
    CHECKF(bad_json == 0, "%d values did not round-trip through jansson", bad_json);
}


/* A hand-made score result over the stories260K vocabulary (n_vocab 512: 1 <s>, 13 <0x0A>,
 * 35 <0x20> = " ", 233/234 <0xE6>/<0xE7> -> U+FFFD alone, 410 "▁" = " ", 403 "▁Once",
 * 436 '"', 485 "é", 500 '\'). */
static void test_logprobs(void) {
    const char *shared = ps_test_shared();
    if (!shared) {
        SKIP("logprobs object: no ../shared");
        return;
    }
    char path[4300];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared);
    ps_model_params mp = ps_model_default_params();
    mp.vocab_only = true;
    ps_model *m = NULL;
    ps_error e;
    if (ps_model_load(path, &mp, &m, &e) != PS_OK) {
        CHECKF(0, "load %s: %s", path, e.message);
        return;
    }
    const ps_vocab *v = ps_model_vocab(m);
    const char *piece;
    size_t pl;
    CHECK(ps_vocab_token_piece(v, 233, &piece, &pl) == PS_OK && pl == 6 && !memcmp(piece, "<0xE6>", 6));
    CHECK(ps_vocab_token_piece(v, 485, &piece, &pl) == PS_OK && pl == 2 && !memcmp(piece, "\xc3\xa9", 2));

    int32_t tokens[5] = {1, 485, 233, 410, 403};
    float lps[5] = {NAN, -1.5f, -4.0f, -INFINITY, -0.25f};
    int32_t top_ids[15] = {-1, -1, -1, 485, 234, 233, 410, 35, 234, 436, 500, 13, 403, -1, -1};
    float top_lps[15] = {NAN, NAN, NAN, -1.5f, -2.0f, -2.5f, -0.5f, -0.75f, -1.0f,
                         -0.1f, -0.2f, -0.3f, -0.25f, -INFINITY, -INFINITY};
    ps_score_result r = {.n_prompt = 5, .n_gen = 0, .n_total = 5, .k = 3, .tokens = tokens,
                         .logprobs = lps, .top_ids = top_ids, .top_logprobs = top_lps};
    ps_buf b, text;
    ps_buf_init(&b);
    ps_buf_init(&text);
    ps_json_logprobs(&b, v, &r, 0, 7, NULL, &text);
    const char *want =
        "{\"tokens\":[\"<s>\",\"\xc3\xa9\",\"\xef\xbf\xbd\",\" \",\" Once\"],"
        "\"token_logprobs\":[null,-1.5,-4,-9999.0,-0.25],"
        "\"top_logprobs\":[null,{\"\xc3\xa9\":-1.5,\"\xef\xbf\xbd\":-2},"
        "{\" \":-0.5,\"\xef\xbf\xbd\":-1},"
        "{\"\\\"\":-0.1,\"\\\\\":-0.2,\"\\n\":-0.3,\" \":-9999.0},{\" Once\":-0.25}],"
        "\"text_offset\":[7,10,11,12,13],"
        "\"prompt_offset\":[null,null,null,null,null],"
        "\"token_ids\":[1,485,233,410,403],"
        "\"top_ids\":[null,[[485,-1.5],[234,-2],[233,-2.5]],[[410,-0.5],[35,-0.75],[234,-1],"
        "[233,-4]],[[436,-0.1],[500,-0.2],[13,-0.3],[410,-9999.0]],[[403,-0.25]]]}";
    CHECKF(str_is(&b, want), "logprobs object:\n got %s\nwant %s", b.data, want);
    CHECK(str_is(&text, "<s>\xc3\xa9\xef\xbf\xbd  Once"));
    json_t *j = json_loadb(b.data, b.len, 0, NULL);
    CHECK(j && json_array_size(json_object_get(j, "tokens")) == 5);
    json_decref(j);

    /* prompt offsets: -1 is null; entries past n_prompt (generated) are null whatever given */
    {
        int32_t po[5] = {-1, 0, 2, 3, 4};
        ps_score_result rg = r;
        rg.n_prompt = 4;
        rg.n_gen = 1;
        ps_buf_reset(&b);
        ps_json_logprobs(&b, v, &rg, 0, 0, po, NULL);
        CHECKF(b.data && strstr(b.data, "\"prompt_offset\":[null,0,2,3,null]"), "prompt_offset: %s",
               b.data);
    }

    /* from entry 2 on (what the server writes without echo), offsets from 0 */
    ps_buf_reset(&b);
    ps_json_logprobs(&b, v, &r, 2, 0, NULL, NULL);
    CHECKF(b.data && strstr(b.data, "\"token_logprobs\":[-4,-9999.0,-0.25]") &&
               strstr(b.data, "\"text_offset\":[0,1,2]") &&
               strstr(b.data, "\"token_ids\":[233,410,403]"),
           "first=2: %s", b.data);

    /* k = 0: the scored token alone */
    ps_score_result r0 = r;
    r0.k = 0;
    ps_buf_reset(&b);
    ps_json_logprobs(&b, v, &r0, 0, 0, NULL, NULL);
    CHECKF(b.data && strstr(b.data, "\"top_logprobs\":[null,{\"\xc3\xa9\":-1.5},{\"\xef\xbf\xbd\":-4},"
                                    "{\" \":-9999.0},{\" Once\":-0.25}]") &&
               strstr(b.data, "\"top_ids\":[null,[[485,-1.5]],[[233,-4]],[[410,-9999.0]],[[403,-0.25]]]"),
           "k=0: %s", b.data);

    /* many alternatives (the hashed duplicate check): 40 byte tokens 0x80..0xA7 all read
     * U+FFFD, then letters; one U+FFFD key, every letter once */
    enum { K = 60 };
    int32_t t2[2] = {1, 412};
    float l2[2] = {NAN, -3.0f};
    int32_t ti2[2 * K];
    float tl2[2 * K];
    for (int i = 0; i < K; i++) {
        ti2[i] = -1;
        tl2[i] = NAN;
        ti2[K + i] = i < 40 ? 3 + 0x80 + i : 411 + (i - 40);
        tl2[K + i] = -0.01f * (float)(i + 1);
    }
    ps_score_result rk = {.n_prompt = 2, .n_total = 2, .k = K, .tokens = t2, .logprobs = l2,
                          .top_ids = ti2, .top_logprobs = tl2};
    ps_buf_reset(&b);
    ps_json_logprobs(&b, v, &rk, 0, 0, NULL, NULL);
    int n_repl = 0;
    for (const char *q = b.data; q && (q = strstr(q, "\"\xef\xbf\xbd\":")); q++) n_repl++;
    CHECKF(n_repl == 1, "U+FFFD keys: %d", n_repl);
    j = json_loadb(b.data, b.len, 0, NULL);
    json_t *tl = j ? json_array_get(json_object_get(j, "top_logprobs"), 1) : NULL;
    /* 1 U+FFFD + 20 distinct one-letter tokens (411..430) ; token 412 "a" is among them */
    CHECKF(tl && json_object_size(tl) == 21, "keys %zu", tl ? json_object_size(tl) : 0);
    CHECK(tl && fabs(json_real_value(json_object_get(tl, "\xef\xbf\xbd")) - (-0.01)) < 1e-6);
    json_t *ids = j ? json_array_get(json_object_get(j, "top_ids"), 1) : NULL;
    CHECK(ids && json_array_size(ids) == K);
    json_decref(j);

    /* allocation failures anywhere: oom is reported, never a partial "success" */
    int bad = 0, n_ok = 0;
    for (int64_t n = 0; n < 200; n++) {
        ps_buf fb;
        ps_buf_init(&fb);
        ps_alloc_fail_after(n);
        ps_json_logprobs(&fb, v, &r, 0, 0, NULL, NULL);
        ps_alloc_fail_after(-1);
        if (!fb.oom) {
            n_ok++;
            if (!str_is(&fb, want) && !strstr(fb.data ? fb.data : "", "\"text_offset\":[0,3,4,5,6]")) bad++;
        }
        ps_buf_free(&fb);
    }
    CHECKF(bad == 0 && n_ok > 0, "fault injection: %d bad outputs, %d complete", bad, n_ok);

    ps_buf_free(&b);
    ps_buf_free(&text);
    ps_model_free(m);
}

int main(void) {
    test_buf();
    test_str();
    test_f32();
    test_logprobs();
    return ps_test_done("json");
}
