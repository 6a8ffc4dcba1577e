/*
 * server_conns.c — the read deadline of the HTTP server's connections (server_conns.h): a
 * doubly linked registry of open connections, filled by libmicrohttpd's connection
 * notifications, and one watchdog thread that wakes four times a second (or at once when
 * asked to cut) and shuts down the socket of every connection reading for longer than the
 * deadline. Each entry holds a dup() of the socket, closed when libmicrohttpd reports the
 * connection closed, so the shutdown always reaches the right socket. An entry marked to
 * linger moves at that report to a second list instead, its socket shut down for writing and
 * drained by the watchdog (every 20 ms while there are any) until the client closes it or the
 * limits of server_conns.h pass; then its duplicate, the socket's last descriptor, is closed.
 */
#include "serve/server_conns.h"
#include "base/util.h"

#include <errno.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct track {
    int fd;              /* our duplicate of the socket; -1 when dup failed */
    bool busy;           /* its request has arrived and is being worked on */
    bool cut;            /* already shut down */
    bool linger;         /* answered before its body arrived: drained after the close */
    double since;        /* monotonic seconds: when it started reading (lingering: when
                          * libmicrohttpd closed it) */
    int64_t drained;     /* lingering: bytes read and dropped */
    struct track *prev, *next;
} track;

struct ps_conns {
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_t thread;
    bool started, stop;
    double read_timeout_s;
    track *head;
    track *lingering; /* closed by libmicrohttpd, still drained (singly linked by next) */
    int32_t open, n_lingering;
    uint64_t timed_out;
};

static void cut(track *t) {
    if (t->cut || t->fd < 0) return;
    t->cut = true;
    shutdown(t->fd, SHUT_RDWR);
}

enum { PS_LINGER_MAX = 256 };
#define PS_LINGER_S 5.0
#define PS_LINGER_BYTES ((int64_t)64 << 20)

/* Reads and drops what has arrived on a lingering socket. False when it is done: the client
 * closed it, an error, or past the limits. */
static bool drain(track *t, double now) {
    char buf[16384];
    for (;;) {
        if (t->drained > PS_LINGER_BYTES || now - t->since > PS_LINGER_S) return false;
        ssize_t r = recv(t->fd, buf, sizeof buf, MSG_DONTWAIT);
        if (r > 0) t->drained += r;
        else if (r < 0 && errno == EINTR) continue;
        else return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
}

/* Drains the lingering sockets outside the lock (the list is taken whole, the ones not done
 * put back), closing each that is done. */
static void drain_lingering(ps_conns *c) {
    track *list = c->lingering, *keep = NULL;
    c->lingering = NULL;
    pthread_mutex_unlock(&c->mu);
    const double now = ps_now_s();
    int32_t done = 0;
    for (track *t = list, *n; t; t = n) {
        n = t->next;
        if (drain(t, now)) {
            t->next = keep;
            keep = t;
        } else {
            close(t->fd);
            ps_free(t);
            done++;
        }
    }
    pthread_mutex_lock(&c->mu);
    for (track *t = keep, *n; t; t = n) {
        n = t->next;
        t->next = c->lingering;
        c->lingering = t;
    }
    c->n_lingering -= done;
}

static void *watchdog(void *arg) {
    ps_conns *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        const struct timespec until = ps_deadline_in_ms(c->lingering ? 20 : 250);
        pthread_cond_timedwait(&c->wake, &c->mu, &until);
        double now = ps_now_s();
        for (track *t = c->head; t; t = t->next)
            if (!t->busy && !t->cut && now - t->since > c->read_timeout_s) {
                cut(t);
                c->timed_out++;
            }
        if (c->lingering) drain_lingering(c);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

ps_status ps_conns_create(double read_timeout_s, ps_conns **out) {
    *out = NULL;
    if (!(read_timeout_s > 0)) return PS_ERR_INVALID_ARG;
    ps_conns *c = ps_calloc(1, sizeof *c);
    if (!c) return PS_ERR_NOMEM;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->wake, NULL);
    c->read_timeout_s = read_timeout_s;
    if (pthread_create(&c->thread, NULL, watchdog, c) != 0) {
        ps_conns_free(c);
        return PS_ERR_NOMEM;
    }
    c->started = true;
    *out = c;
    return PS_OK;
}

void ps_conns_free(ps_conns *c) {
    if (!c) return;
    if (c->started) {
        pthread_mutex_lock(&c->mu);
        c->stop = true;
        pthread_cond_signal(&c->wake);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->thread, NULL);
    }
    for (track *t = c->head, *n; t; t = n) { /* none once the daemon has stopped */
        n = t->next;
        if (t->fd >= 0) close(t->fd);
        ps_free(t);
    }
    for (track *t = c->lingering, *n; t; t = n) {
        n = t->next;
        close(t->fd);
        ps_free(t);
    }
    pthread_cond_destroy(&c->wake);
    pthread_mutex_destroy(&c->mu);
    ps_free(c);
}

void ps_conns_notify(void *cls, struct MHD_Connection *mc, void **socket_context,
                     enum MHD_ConnectionNotificationCode code) {
    ps_conns *c = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        track *t = ps_calloc(1, sizeof *t);
        if (!t) return; /* untracked: only libmicrohttpd's idle timeout applies to it */
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        t->fd = ci ? dup(ci->connect_fd) : -1;
        t->since = ps_now_s();
        pthread_mutex_lock(&c->mu);
        t->next = c->head;
        if (c->head) c->head->prev = t;
        c->head = t;
        c->open++;
        pthread_mutex_unlock(&c->mu);
        *socket_context = t;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        track *t = *socket_context;
        if (!t) return;
        pthread_mutex_lock(&c->mu);
        if (t->prev) t->prev->next = t->next;
        else c->head = t->next;
        if (t->next) t->next->prev = t->prev;
        c->open--;
        *socket_context = NULL;
        if (t->linger && !t->cut && t->fd >= 0 && c->n_lingering < PS_LINGER_MAX) {
            shutdown(t->fd, SHUT_WR); /* after the answer already written: a FIN */
            t->since = ps_now_s();
            t->next = c->lingering;
            c->lingering = t;
            c->n_lingering++;
            pthread_cond_signal(&c->wake); /* drained at once */
            pthread_mutex_unlock(&c->mu);
            return;
        }
        pthread_mutex_unlock(&c->mu);
        if (t->fd >= 0) close(t->fd);
        ps_free(t);
    }
}

/* mc's entry (NULL: untracked, its allocation failed). */
static track *track_of(struct MHD_Connection *mc) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

void ps_conns_set_busy(ps_conns *c, struct MHD_Connection *mc, bool busy) {
    track *t = track_of(mc);
    if (!t) return;
    pthread_mutex_lock(&c->mu);
    t->busy = busy;
    if (!busy) t->since = ps_now_s();
    pthread_mutex_unlock(&c->mu);
}

void ps_conns_linger(ps_conns *c, struct MHD_Connection *mc) {
    track *t = track_of(mc);
    if (!t) return;
    pthread_mutex_lock(&c->mu);
    t->linger = true;
    pthread_mutex_unlock(&c->mu);
}

void ps_conns_cut(ps_conns *c, bool all) {
    pthread_mutex_lock(&c->mu);
    for (track *t = c->head; t; t = t->next)
        if (all || !t->busy) cut(t);
    pthread_mutex_unlock(&c->mu);
}

int32_t ps_conns_open(ps_conns *c) {
    pthread_mutex_lock(&c->mu);
    int32_t n = c->open;
    pthread_mutex_unlock(&c->mu);
    return n;
}

uint64_t ps_conns_timed_out(ps_conns *c) {
    pthread_mutex_lock(&c->mu);
    uint64_t n = c->timed_out;
    pthread_mutex_unlock(&c->mu);
    return n;
}
