/*
 * test_json.c — the response writer (src/json.c): ps_buf growth and out-of-memory behaviour,
 * JSON string escaping with invalid UTF-8 replaced by U+FFFD, float32 formatting that parses
 * back bit for bit (and is the shortest of %.6g..%.9g), -inf -> -9999.0, NaN -> null; and the
 * OpenAI logprobs object on real vocabularies from ../shared (text keys, duplicate keys keep
 * the first, the scored token appended, text_offset in code points, top_ids, null entry 0).
 */
#include "check.h"
#include "json.h"

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
static uint64_t rng(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

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
    CHECKF(bad == 0, "%d values did not round-trip", bad);
    CHECKF(not_shortest == 0, "%d values not in the shortest form", not_shortest);
    CHECKF(bad_json == 0, "%d values did not round-trip through jansson", bad_json);
}

int main(void) {
    test_buf();
    test_str();
    test_f32();
    return ps_test_done("json");
}
