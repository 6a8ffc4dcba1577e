/*
 * metrics.c — counters and latency histograms by route and status, under their own mutex,
 * and the /metrics text (metrics.h). The buckets are cumulative, as Prometheus wants: a
 * request of s seconds counts in every bucket whose bound is >= s. Routes or statuses that
 * saw no request write no line.
 */
#include "serve/metrics.h"

#include <stdio.h>

/* every status the server answers (499: the client hung up, its work was cancelled) */
static const int STATUSES[PS_METRICS_N_STATUS] = {200, 204, 400, 401, 403, 404, 405, 413,
                                                  414, 415, 431, 499, 500, 503, 0 /* other */};
static const double BUCKETS[PS_METRICS_N_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                     1,     2.5,  5,     10,   30,  60};

void ps_metrics_init(ps_metrics *m, int n_routes, const char *const *labels) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    m->n_routes = PS_MIN(n_routes, PS_METRICS_MAX_ROUTES);
    for (int i = 0; i < m->n_routes; i++) m->route[i] = labels[i];
}

void ps_metrics_destroy(ps_metrics *m) { pthread_mutex_destroy(&m->mu); }

void ps_metrics_record(ps_metrics *m, int route, int status, double secs) {
    if (route < 0 || route >= m->n_routes) return;
    int si = PS_METRICS_N_STATUS - 1;
    for (int i = 0; i < PS_METRICS_N_STATUS - 1; i++)
        if (STATUSES[i] == status) si = i;
    pthread_mutex_lock(&m->mu);
    m->requests[route][si]++;
    for (int b = 0; b < PS_METRICS_N_BUCKETS; b++)
        if (secs <= BUCKETS[b]) m->lat_buckets[route][b]++;
    m->lat_count[route]++;
    m->lat_sum[route] += secs;
    pthread_mutex_unlock(&m->mu);
}

void ps_metrics_write(ps_metrics *m, const ps_metrics_gauges *g, ps_buf *b) {
    pthread_mutex_lock(&m->mu);
    ps_buf_puts(b, "# HELP promptscore_requests_total HTTP requests by route and status.\n"
                   "# TYPE promptscore_requests_total counter\n");
    for (int r = 0; r < m->n_routes; r++)
        for (int k = 0; k < PS_METRICS_N_STATUS; k++)
            if (m->requests[r][k]) {
                char st[16];
                snprintf(st, sizeof st, STATUSES[k] ? "%d" : "other", STATUSES[k]);
                ps_buf_printf(b, "promptscore_requests_total{route=\"%s\",status=\"%s\"} %llu\n",
                              m->route[r], st, (unsigned long long)m->requests[r][k]);
            }
    ps_buf_printf(b,
                  "# HELP promptscore_prompt_tokens_scored_total Prompt tokens scored.\n"
                  "# TYPE promptscore_prompt_tokens_scored_total counter\n"
                  "promptscore_prompt_tokens_scored_total %llu\n"
                  "# HELP promptscore_generated_tokens_total Tokens generated after prompts.\n"
                  "# TYPE promptscore_generated_tokens_total counter\n"
                  "promptscore_generated_tokens_total %llu\n"
                  "# HELP promptscore_requests_cancelled_total Requests whose client hung up.\n"
                  "# TYPE promptscore_requests_cancelled_total counter\n"
                  "promptscore_requests_cancelled_total %llu\n"
                  "# HELP promptscore_queue_depth Completion requests admitted and not finished.\n"
                  "# TYPE promptscore_queue_depth gauge\n"
                  "promptscore_queue_depth %d\n"
                  "# HELP promptscore_queue_limit Admitted requests beyond which the server answers 503.\n"
                  "# TYPE promptscore_queue_limit gauge\n"
                  "promptscore_queue_limit %d\n"
                  "# HELP promptscore_prompts_waiting Prompts queued and not yet started.\n"
                  "# TYPE promptscore_prompts_waiting gauge\n"
                  "promptscore_prompts_waiting %d\n"
                  "# HELP promptscore_prompts_deferred_total Times a worker ran a later request "
                  "first because another worker was computing this one's next prefix-cache block.\n"
                  "# TYPE promptscore_prompts_deferred_total counter\n"
                  "promptscore_prompts_deferred_total %llu\n"
                  "# HELP promptscore_memory_budget_used_bytes Bytes of --mem-budget held by "
                  "requests in flight.\n"
                  "# TYPE promptscore_memory_budget_used_bytes gauge\n"
                  "promptscore_memory_budget_used_bytes %lld\n"
                  "# HELP promptscore_memory_budget_bytes The memory budget (--mem-budget).\n"
                  "# TYPE promptscore_memory_budget_bytes gauge\n"
                  "promptscore_memory_budget_bytes %lld\n"
                  "# HELP promptscore_connections_open TCP connections open now.\n"
                  "# TYPE promptscore_connections_open gauge\n"
                  "promptscore_connections_open %d\n"
                  "# HELP promptscore_connections_timed_out_total Connections cut because their "
                  "request did not arrive within --read-timeout.\n"
                  "# TYPE promptscore_connections_timed_out_total counter\n"
                  "promptscore_connections_timed_out_total %llu\n"
                  "# HELP promptscore_request_duration_seconds Request latency by route.\n"
                  "# TYPE promptscore_request_duration_seconds histogram\n",
                  (unsigned long long)g->engine.tokens_scored,
                  (unsigned long long)g->engine.tokens_generated,
                  (unsigned long long)g->engine.cancelled, (int)g->engine.admitted,
                  (int)g->engine.queue, (int)g->engine.prompts_waiting,
                  (unsigned long long)g->engine.deferred, (long long)g->mem_used,
                  (long long)g->mem_budget, (int)g->connections_open,
                  (unsigned long long)g->connections_timed_out);
    for (int r = 0; r < m->n_routes; r++) {
        if (!m->lat_count[r]) continue;
        for (int k = 0; k < PS_METRICS_N_BUCKETS; k++)
            ps_buf_printf(b, "promptscore_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n",
                          m->route[r], BUCKETS[k], (unsigned long long)m->lat_buckets[r][k]);
        ps_buf_printf(b,
                      "promptscore_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n"
                      "promptscore_request_duration_seconds_sum{route=\"%s\"} %.6f\n"
                      "promptscore_request_duration_seconds_count{route=\"%s\"} %llu\n",
                      m->route[r], (unsigned long long)m->lat_count[r], m->route[r],
                      m->lat_sum[r], m->route[r], (unsigned long long)m->lat_count[r]);
    }
    pthread_mutex_unlock(&m->mu);
}
