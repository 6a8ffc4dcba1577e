/*
 * server_conns.h — the connection policy of the HTTP server (server_conns.c): a registry of
 * the open TCP connections and a watchdog thread that holds each to a read deadline.
 *
 * libmicrohttpd's own timeout is an idle timeout: it restarts on every byte, so a client that
 * sends one byte a second holds its connection (and its thread) for ever. Here a connection is
 * "reading" from the moment it opens, and again from the moment an answer has gone out on a
 * kept-alive connection, until its request (headers and body) has fully arrived; a connection
 * that stays reading longer than the deadline is cut (shutdown of its socket, which makes
 * libmicrohttpd close it). A connection whose request is being worked on is "busy" and never
 * cut by the deadline. At shutdown every reading connection is cut at once (its request was not
 * admitted; there is nothing to drain), then, after the drain deadline, every connection.
 *
 * The registry keeps its own duplicate of each socket's descriptor, so a cut can never hit a
 * descriptor number that libmicrohttpd has closed and the kernel handed to someone else.
 */
#ifndef PS_SERVER_CONNS_H
#define PS_SERVER_CONNS_H

#include "base/impl.h"

#include <microhttpd.h>

typedef struct ps_conns ps_conns;

/* Starts the watchdog; read_timeout_s > 0. */
ps_status ps_conns_create(double read_timeout_s, ps_conns **out);
/* Stops the watchdog, frees the registry (call after MHD_stop_daemon). */
void ps_conns_free(ps_conns *c);

/* For MHD_OPTION_NOTIFY_CONNECTION (cls = the ps_conns). */
void ps_conns_notify(void *cls, struct MHD_Connection *mc, void **socket_context,
                     enum MHD_ConnectionNotificationCode code);

/* The request on mc has fully arrived (busy = true: no deadline), or its answer has been
 * sent and the connection waits for the next one (busy = false: the deadline starts now). */
void ps_conns_set_busy(ps_conns *c, struct MHD_Connection *mc, bool busy);

/* Cuts every connection that is reading (all = false) or every connection (all = true). */
void ps_conns_cut(ps_conns *c, bool all);

/* Open connections now, and connections cut by the read deadline so far. */
int32_t ps_conns_open(ps_conns *c);
uint64_t ps_conns_timed_out(ps_conns *c);

#endif
