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
 *
 * Lingering close: a request refused on its headers (a body over --max-body, 503 busy, 401)
 * is answered before its body is read, and libmicrohttpd then closes the connection. Closing
 * a socket with unread bytes makes the kernel send a reset, which can reach a client that is
 * still sending before it has read the answer (curl then reports a send error, not the 413).
 * So the socket of such a connection outlives libmicrohttpd's close in the registry's
 * duplicate: it is shut down for writing (the answer ends with a FIN), and the watchdog reads
 * and drops what still arrives until the client closes, or for at most PS_LINGER_S seconds
 * and PS_LINGER_BYTES bytes (nginx's lingering close), PS_LINGER_MAX sockets at a time.
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

/* The answer on mc goes out before its request's body has arrived: when libmicrohttpd closes
 * the connection, its socket lingers (above). */
void ps_conns_linger(ps_conns *c, struct MHD_Connection *mc);

/* Cuts every connection that is reading (all = false) or every connection (all = true). */
void ps_conns_cut(ps_conns *c, bool all);

/* Open connections now, and connections cut by the read deadline so far. */
int32_t ps_conns_open(ps_conns *c);
uint64_t ps_conns_timed_out(ps_conns *c);

#endif
