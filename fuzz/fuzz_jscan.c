/*
 * fuzz_jscan.c — libFuzzer target for the JSON pre-scanner (jscan.h). On arbitrary bytes:
 *   - fed whole and fed in pieces (cut where the input's first bytes say), the status, the
 *     check that refused, the offset, the counts and the "id" span are the same;
 *   - an offset is inside the text; a refusal stays a refusal on later feeds;
 *   - what jansson parses is never a scanner syntax error (bytes without a raw NUL, nesting
 *     within the scanner's depth), and what the scanner calls a syntax error jansson refuses;
 *   - an accepted text's "id" span parses alone with jansson, and the counts respect the
 *     limits (taken from the input's first byte, so small limits are reached).
 * Corpus: fuzz/corpus/fuzz_jscan/.
 */
#include "front/jscan.h"

#include <jansson.h>
#include <stdlib.h>

static bool same(const ps_jscan *a, const ps_jscan *b) {
    return a->what == b->what && a->err.offset == b->err.offset && a->n_prompts == b->n_prompts &&
           a->n_ids == b->n_ids && a->id_start == b->id_start && a->id_end == b->id_end &&
           a->depth_max == b->depth_max;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    const char *t = (const char *)data;
    ps_jscan_limits lim = {0};
    if (size > 0 && (data[0] & 0x80)) { /* small limits, from the first byte */
        lim.max_ids = 1 + (data[0] & 7);
        lim.max_prompts = 1 + ((data[0] >> 3) & 3);
        lim.max_depth = 2 + ((data[0] >> 5) & 3);
        lim.max_bytes = (int64_t)size / 2 + 1;
        lim.max_total_ids = 2 + (data[0] & 15);
    }
    ps_jscan whole, parts;
    ps_error e1, e2;
    ps_status st1 = ps_jscan_text(t, size, &lim, &whole, &e1);
    /* pieces: lengths 1..8 from successive bytes */
    ps_jscan_init(&parts, &lim);
    ps_status st2 = PS_OK;
    size_t i = 0, k = 0;
    while (i < size && st2 == PS_OK) {
        size_t n = 1 + (size_t)(data[k++ % size] & 7);
        if (n > size - i) n = size - i;
        st2 = ps_jscan_feed(&parts, t + i, n, &e2);
        i += n;
    }
    if (st2 == PS_OK) st2 = ps_jscan_end(&parts, &e2);
    if (st1 != st2 || !same(&whole, &parts)) abort();
    if (st1 != PS_OK) {
        if (e1.code != st1 || e1.offset < 0 || e1.offset > (int64_t)size || !e1.message[0]) abort();
        if (ps_jscan_feed(&whole, "1", 1, NULL) != st1) abort();
    }
    if (st1 == PS_OK) {
        if (lim.max_ids && whole.n_ids > lim.max_ids * PS_MAX(whole.n_prompts, 1)) abort();
        if (lim.max_prompts && whole.n_prompts > lim.max_prompts) abort();
        if (lim.max_total_ids && whole.n_ids > lim.max_total_ids) abort();
        if (whole.depth_max > (lim.max_depth ? lim.max_depth : PS_JSCAN_DEPTH_MAX)) abort();
    }
    /* against jansson (it also checks UTF-8 and surrogates, so only these directions hold) */
    json_error_t je;
    json_t *j = json_loadb(t, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    ps_jscan free_scan;
    ps_status st0 = ps_jscan_text(t, size, NULL, &free_scan, NULL);
    /* (jansson lets a raw NUL pass after a number; the scanner does not) */
    if (j && !memchr(t, '\0', size) && free_scan.what == PS_JSCAN_SYNTAX) abort();
    if (st0 == PS_OK && free_scan.id_start >= 0 && j) {
        json_t *id = json_loadb(t + free_scan.id_start, (size_t)(free_scan.id_end - free_scan.id_start),
                                JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (!id) abort();
        json_decref(id);
    }
    json_decref(j);
    return 0;
}
