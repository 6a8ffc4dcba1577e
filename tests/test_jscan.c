/*
 * test_jscan.c — the JSON pre-scanner (jscan.c): it accepts and refuses the same texts as
 * jansson on a table of valid and broken JSON (grammar only: strings, escapes, numbers,
 * literals, nesting, trailing bytes), gives the same answer fed whole and one byte at a time,
 * names the byte offset of what it refuses, keeps the span of the top-level "id" (also when the
 * text breaks after it), and applies each limit (bytes, depth, ids of a flat list and of each
 * list of a list of prompts, prompt count, total ids, an escaped "prompt" key) at and one over
 * the limit. It never allocates: scans run with every allocation made to fail. A 30 M-id text
 * is refused at the first id over the limit, having read only that far.
 */
#include "check.h"
#include "front/jscan.h"
#include "base/testhooks.h"

#include <jansson.h>
#include <stdlib.h>

static ps_status scan(const char *t, const ps_jscan_limits *lim, ps_jscan *s, ps_error *e) {
    return ps_jscan_text(t, strlen(t), lim, s, e);
}

/* fed one byte at a time */
static ps_status scan_bytes(const char *t, const ps_jscan_limits *lim, ps_jscan *s, ps_error *e) {
    ps_jscan_init(s, lim);
    size_t n = strlen(t);
    for (size_t i = 0; i < n; i++) {
        ps_status st = ps_jscan_feed(s, t + i, 1, e);
        if (st != PS_OK) return st;
    }
    return ps_jscan_end(s, e);
}

static void test_grammar(void) {
    static const char *const texts[] = {
        "{}", "[]", "0", "-0", "1.5e-3", "-12.25E+7", "\"a\"", "true", "false", "null",
        "{\"a\":1,\"b\":[1,2,{\"c\":null}],\"d\":\"x\\\"y\\\\z\\u00e9\\n\"}", " [ 1 , 2 ] ",
        "[[[[]]]]", "{\"prompt\":[[1,2],[3]]}", "{\"prompt\":\"hi\",\"id\":{\"k\":[1]}}",
        /* broken */
        "", " ", "{", "}", "[1,]", "[,1]", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{a:1}", "01",
        "1.", ".5", "-", "1e", "1e+", "+1", "tru", "nul", "truex", "[1 2]", "{} {}", "\"abc",
        "\"a\\x\"", "\"\\u12g4\"", "\"a\tb\"", "[1]]", "{\"a\":1]", "[\"a\":1]", "\"\\u00\"",
        "{\"a\" 1}", "[true false]", "1 2", "[-]", "[--1]", "{\"a\":1 \"b\":2}", "NaN",
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(texts); i++) {
        const char *t = texts[i];
        json_error_t je;
        json_t *j = json_loadb(t, strlen(t), JSON_DECODE_ANY, &je);
        bool want = j != NULL;
        json_decref(j);
        ps_jscan s, s1;
        ps_error e, e1;
        ps_error_clear(&e);
        ps_status st = scan(t, NULL, &s, &e);
        ps_status st1 = scan_bytes(t, NULL, &s1, &e1);
        CHECKF((st == PS_OK) == want, "'%s': scan %d, jansson %s", t, st, want ? "ok" : je.text);
        CHECKF(st == st1 && (st == PS_OK || e.offset == e1.offset), "'%s': whole %d@%lld, bytes %d@%lld",
               t, st, (long long)e.offset, st1, (long long)e1.offset);
        if (st != PS_OK)
            CHECKF(st == PS_ERR_FORMAT && s.what == PS_JSCAN_SYNTAX && e.offset >= 0 &&
                   e.offset <= (int64_t)strlen(t) && strstr(e.message, "invalid JSON"),
                   "'%s': %d %lld %s", t, st, (long long)e.offset, e.message);
    }
    /* offsets name the byte */
    ps_jscan s;
    ps_error e;
    CHECK(scan("[1,2,x]", NULL, &s, &e) == PS_ERR_FORMAT && e.offset == 5);
    CHECK(scan("{\"a\":1,}", NULL, &s, &e) == PS_ERR_FORMAT && e.offset == 7);
    CHECK(scan("\"ab\x01\"", NULL, &s, &e) == PS_ERR_FORMAT && e.offset == 3);
    CHECK(scan("[1", NULL, &s, &e) == PS_ERR_FORMAT && e.offset == 2 && strstr(e.message, "an array"));
}

static void test_id_span(void) {
    ps_jscan s;
    ps_error e;
    const char *t = "{\"id\": {\"a\": [1, \"}\"]} , \"prompt\": [1,2]}";
    CHECK(scan(t, NULL, &s, &e) == PS_OK);
    CHECK(s.id_start == 7 && s.id_end == 22 && !memcmp(t + s.id_start, "{\"a\": [1, \"}\"]}", 15));
    /* the last one wins (as jansson's duplicate keys do); nested "id" keys do not count */
    t = "{\"id\":1,\"x\":{\"id\":2},\"id\":345}";
    CHECK(scan(t, NULL, &s, &e) == PS_OK && s.id_end - s.id_start == 3 && !memcmp(t + s.id_start, "345", 3));
    /* a text broken after the id still has it */
    t = "{\"id\": \"q-7\", \"prompt\": [1, 2,, 3]}";
    CHECK(scan(t, NULL, &s, &e) == PS_ERR_FORMAT && s.id_start == 7 && s.id_end == 12);
    /* an id value cut by the error has no span */
    t = "{\"id\": [1, 2 3]}";
    CHECK(scan(t, NULL, &s, &e) == PS_ERR_FORMAT && s.id_start == -1);
    /* a number id ends at the byte after it */
    t = "{\"id\":-1.5e3}";
    CHECK(scan(t, NULL, &s, &e) == PS_OK && s.id_start == 6 && s.id_end == 12);
    /* "idx" and "i" are other keys */
    CHECK(scan("{\"idx\":1,\"i\":2}", NULL, &s, &e) == PS_OK && s.id_start == -1);
}

static void test_limits(void) {
    ps_jscan s;
    ps_error e;
    ps_jscan_limits lim = {.max_ids = 3};
    CHECK(scan("{\"prompt\":[1,2,3]}", &lim, &s, &e) == PS_OK && s.n_ids == 3 && s.n_prompts == 1);
    CHECK(scan("{\"prompt\":[1,2,3,4]}", &lim, &s, &e) == PS_ERR_CONTEXT && s.what == PS_JSCAN_IDS &&
          e.offset == 17);
    /* each list of a list of prompts is held to it; other keys are not */
    CHECK(scan("{\"prompt\":[[1,2,3],[4,5,6]],\"x\":[1,2,3,4,5]}", &lim, &s, &e) == PS_OK &&
          s.n_ids == 6 && s.n_prompts == 2);
    CHECK(scan("{\"prompt\":[[1,2,3],[4,5,6,7]]}", &lim, &s, &e) == PS_ERR_CONTEXT && e.offset == 26);
    CHECK(scan("{\"a\":{\"prompt\":[1,2,3,4]}}", &lim, &s, &e) == PS_OK);
    /* an escaped key that may be "prompt" is held to it too */
    CHECK(scan("{\"pr\\u006fmpt\":[1,2,3,4]}", &lim, &s, &e) == PS_ERR_CONTEXT);
    CHECK(scan("{\"promptx\":[1,2,3,4],\"prom\":[1,2,3,4]}", &lim, &s, &e) == PS_OK);

    ps_jscan_limits lp = {.max_prompts = 2};
    CHECK(scan("{\"prompt\":[\"a\",\"b\"]}", &lp, &s, &e) == PS_OK && s.n_prompts == 2);
    CHECK(scan("{\"prompt\":[\"a\",\"b\",\"c\"]}", &lp, &s, &e) == PS_ERR_LIMIT &&
          s.what == PS_JSCAN_PROMPTS && e.offset == 19);
    CHECK(scan("{\"prompt\":[[1],[2],[3]]}", &lp, &s, &e) == PS_ERR_LIMIT && e.offset == 19);
    CHECK(scan("{\"prompt\":[1,2,3,4,5,6]}", &lp, &s, &e) == PS_OK && s.n_prompts == 1);

    ps_jscan_limits lt = {.max_total_ids = 4};
    CHECK(scan("{\"prompt\":[[1,2],[3,4]]}", &lt, &s, &e) == PS_OK);
    CHECK(scan("{\"prompt\":[[1,2],[3,4],[5]]}", &lt, &s, &e) == PS_ERR_LIMIT && s.what == PS_JSCAN_TOTAL_IDS);

    ps_jscan_limits ld = {.max_depth = 3};
    CHECK(scan("[[[1]]]", &ld, &s, &e) == PS_OK && s.depth_max == 3);
    CHECK(scan("[[[[1]]]]", &ld, &s, &e) == PS_ERR_LIMIT && s.what == PS_JSCAN_DEPTH && e.offset == 3);
    /* past the deepest the scanner tracks */
    char deep[PS_JSCAN_DEPTH_MAX + 2];
    memset(deep, '[', sizeof deep - 1);
    deep[sizeof deep - 1] = 0;
    CHECK(scan(deep, NULL, &s, &e) == PS_ERR_LIMIT && e.offset == PS_JSCAN_DEPTH_MAX);

    ps_jscan_limits lb = {.max_bytes = 10};
    CHECK(scan("[1,2,3,45]", &lb, &s, &e) == PS_OK);
    CHECK(scan("[1,2,3,456]", &lb, &s, &e) == PS_ERR_LIMIT && s.what == PS_JSCAN_BYTES && e.offset == 10);
    CHECK(scan_bytes("[1,2,3,456]", &lb, &s, &e) == PS_ERR_LIMIT && e.offset == 10);
    /* once refused, it stays refused */
    CHECK(ps_jscan_feed(&s, "]", 1, &e) == PS_ERR_LIMIT && ps_jscan_end(&s, &e) == PS_ERR_LIMIT);
}

/* A 30 M-id list refused at id 4097, after reading only up to it, and with no allocation. */
static void test_huge(void) {
    const size_t n_ids = 30u * 1000 * 1000;
    size_t cap = 16 + n_ids * 2;
    char *t = malloc(cap);
    if (!t) {
        SKIP("no memory for the 60 MB text");
        return;
    }
    memcpy(t, "{\"prompt\":[", 11);
    size_t n = 11;
    for (size_t i = 0; i < n_ids; i++) {
        t[n++] = '7';
        t[n++] = ',';
    }
    t[n - 1] = ']';
    t[n++] = '}';
    ps_jscan_limits lim = {.max_ids = 4096, .max_bytes = 1 << 30};
    ps_jscan s;
    ps_error e;
    ps_alloc_fail_after(0); /* any allocation would fail (and the scan would not notice) */
    ps_status st = ps_jscan_text(t, n, &lim, &s, &e);
    ps_alloc_fail_after(-1);
    CHECKF(st == PS_ERR_CONTEXT && e.offset == 11 + 4096 * 2 && s.n_bytes == e.offset,
           "%d at %lld, %lld bytes", st, (long long)e.offset, (long long)s.n_bytes);
    /* fed in 64 KiB pieces (as a reader would), it stops at the piece holding the limit */
    ps_jscan_init(&s, &lim);
    size_t fed = 0;
    while (fed < n && ps_jscan_feed(&s, t + fed, PS_MIN(n - fed, (size_t)65536), &e) == PS_OK)
        fed += PS_MIN(n - fed, (size_t)65536);
    CHECKF(fed == 0 && s.what == PS_JSCAN_IDS, "stopped after %zu bytes", fed);
    free(t);
}

int main(void) {
    test_grammar();
    test_id_span();
    test_limits();
    test_huge();
    return ps_test_done("test_jscan");
}
