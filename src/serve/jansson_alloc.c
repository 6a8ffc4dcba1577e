/*
 * jansson_alloc.c — jansson's allocations through the library's allocation hook (a front end:
 * only the jansson users, the server's request parser and the JSONL reader, need it).
 *
 * ps_json_alloc_init() switches jansson to ps_malloc / ps_free once per process, unless the
 * host application set its own functions (then those are kept). Both pairs free with free(), so
 * a value allocated before the switch is still freed correctly after it. With it, the
 * fault-injection walks (src/base/testhooks.h) also fail jansson's allocations, and ps_alloc_failed()
 * tells a parse that failed for want of memory from one that failed on bad JSON.
 */
#include "serve/json.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>

static void json_alloc_hook(void) {
    json_malloc_t m = NULL;
    json_free_t f = NULL;
    json_get_alloc_funcs(&m, &f);
    if (m == malloc && f == free) json_set_alloc_funcs(ps_malloc, ps_free);
}

void ps_json_alloc_init(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, json_alloc_hook);
}
