/*
 * server_guard.h — who may ask the HTTP server (server_guard.c): the checks a request passes
 * before any route runs, each a pure function of the configuration and the request's headers,
 * so they can be tested alone:
 *
 *   - the API key: `Authorization: Bearer KEY` compared in constant time (its timing does not
 *     depend on how much of a wrong key was right);
 *   - the Host header: exactly a name or an IP literal with an optional numeric port, and
 *     an IP literal, `localhost`, or a name of --allowed-hosts (a DNS rebinding attack always
 *     arrives with a DNS name of its own, never an IP literal);
 *   - the media type of a JSON body (application/json, so no web page can make a browser post
 *     a "simple" text/plain or form request);
 *   - CORS: off unless one origin is configured; then the preflight's and the response's
 *     headers for that origin only.
 */
#ifndef PS_SERVER_GUARD_H
#define PS_SERVER_GUARD_H

#include "base/impl.h"

/* True when `header` (the Authorization value, header_len bytes, NULL when absent) is
 * "Bearer <key>" with exactly `key` (key_len bytes): every byte of the value counts, so a NUL
 * and what follows it make the key wrong. The comparison's time depends on key_len only. */
bool ps_guard_key_ok(const char *key, size_t key_len, const char *header, size_t header_len);

/* True when `host` (a Host value of len bytes; NULL: absent) is exactly a DNS name, an IPv4
 * literal or a bracketed IPv6 literal, then optionally ':' and a port of 1 to 5 digits up to
 * 65535; nothing else (no "[::1].evil.example", "[::1]evil", "127.0.0.1:evil.example", empty
 * port). An empty value is well formed (ps_guard_host_ok refuses it). */
bool ps_guard_host_syntax(const char *host, size_t len);

/* True when `host` (the Host header value, NULL when absent) names this server: an IPv4 or
 * bracketed IPv6 literal, "localhost", or one of the comma-separated names of `allowed`
 * (NULL: none; "*" allows every name), each compared without case and without the port; and
 * well formed (ps_guard_host_syntax).
 * An empty Host is refused; an absent one passes (no browser sends a request without Host, so
 * a page cannot use its absence). */
bool ps_guard_host_ok(const char *host, const char *allowed);

/* True when `ctype` (the Content-Type value, NULL when absent) is application/json, with or
 * without parameters (charset=utf-8). */
bool ps_guard_json_type(const char *ctype);

/* True when `host` (an address to bind, as --host takes it) is loopback only: 127.0.0.0/8,
 * ::1 or "localhost". */
bool ps_guard_host_is_loopback(const char *host);

/* Reads an API key file: its first line, without the line end; refuses an empty key, a key
 * with control characters or spaces, and a file over 4 KiB. *key is ps_malloc'ed. */
ps_status ps_guard_read_key_file(const char *path, char **key, ps_error *err);

#endif
