/*
 * metrics.h — the server's Prometheus metrics (metrics.c): requests counted by route and
 * status, latency histograms by route, and the /metrics text of those with the engine's
 * counters and the server's gauges (docs/api.md, "Other routes").
 */
#ifndef PS_METRICS_H
#define PS_METRICS_H

#include "base/buf.h"
#include "front/engine.h"

#include <pthread.h>

enum { PS_METRICS_MAX_ROUTES = 16, PS_METRICS_N_STATUS = 15, PS_METRICS_N_BUCKETS = 13 };

typedef struct {
    pthread_mutex_t mu;
    int n_routes;
    const char *route[PS_METRICS_MAX_ROUTES]; /* the label of each route (static strings) */
    uint64_t requests[PS_METRICS_MAX_ROUTES][PS_METRICS_N_STATUS];
    uint64_t lat_buckets[PS_METRICS_MAX_ROUTES][PS_METRICS_N_BUCKETS];
    uint64_t lat_count[PS_METRICS_MAX_ROUTES];
    double lat_sum[PS_METRICS_MAX_ROUTES];
} ps_metrics;

/* n_routes <= PS_METRICS_MAX_ROUTES labels, kept by pointer. */
void ps_metrics_init(ps_metrics *m, int n_routes, const char *const *labels);
void ps_metrics_destroy(ps_metrics *m);
/* One answered request: its route, HTTP status (one the server answers, else "other") and
 * seconds from its arrival. Thread-safe. */
void ps_metrics_record(ps_metrics *m, int route, int status, double secs);

/* What /metrics shows besides the requests: the engine's and the server's. */
typedef struct {
    ps_engine_stats engine;
    int64_t mem_used, mem_budget;
    int32_t connections_open;
    uint64_t connections_timed_out;
} ps_metrics_gauges;

/* The Prometheus text (format 0.0.4) of m and g. */
void ps_metrics_write(ps_metrics *m, const ps_metrics_gauges *g, ps_buf *b);

#endif /* PS_METRICS_H */
