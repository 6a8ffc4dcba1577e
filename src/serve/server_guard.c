/*
 * server_guard.c — who may ask the HTTP server: the API key (compared in constant time, over
 * the header's every byte), the Host header (its exact syntax; DNS rebinding), the JSON media
 * type (no cross-site "simple" requests) and the
 * loopback test behind the warning for a server reachable from elsewhere without a key.
 * Pure functions of strings; server.c calls them before a route runs (server_guard.h).
 */
#include "serve/server_guard.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

bool ps_guard_key_ok(const char *key, size_t key_len, const char *header, size_t header_len) {
    if (!key || !header) return false;
    /* "Bearer" (any case) then one or more spaces; every byte of the value counts, a NUL
     * included (a C string would end at it and hide what follows) */
    if (header_len < 7 || strncasecmp(header, "Bearer ", 7) != 0) return false;
    const char *given = header + 7;
    size_t given_len = header_len - 7;
    while (given_len && *given == ' ') {
        given++;
        given_len--;
    }
    while (given_len && (given[given_len - 1] == ' ' || given[given_len - 1] == '\t')) given_len--;
    /* every byte of the key is compared whatever the others were: the loop's length is the
     * key's, and the result is one accumulated difference */
    volatile unsigned char diff = (unsigned char)(given_len != key_len);
    for (size_t i = 0; i < key_len; i++) {
        unsigned char g = i < given_len ? (unsigned char)given[i] : 0;
        diff |= (unsigned char)(g ^ (unsigned char)key[i]);
    }
    return diff == 0;
}

/* The name part of a Host value: [v6]:port -> "[v6]", name:port -> "name". */
static size_t host_name_len(const char *h, size_t n) {
    if (n && h[0] == '[') {
        const char *e = memchr(h, ']', n);
        return e ? (size_t)(e - h) + 1 : n;
    }
    const char *c = memchr(h, ':', n);
    return c ? (size_t)(c - h) : n;
}

static bool is_alnum(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
}

/* A DNS name: dot-separated labels of letters, digits, '-' and '_' (1..63 bytes each, no '-'
 * at either end), at most 253 bytes, a final dot allowed. */
static bool is_host_name(const char *h, size_t n) {
    if (n && h[n - 1] == '.') n--;
    if (n == 0 || n > 253) return false;
    size_t label = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || h[i] == '.') {
            if (label == 0 || label > 63 || h[i - 1] == '-') return false;
            label = 0;
            continue;
        }
        if (!is_alnum(h[i]) && h[i] != '-' && h[i] != '_') return false;
        if (label == 0 && h[i] == '-') return false;
        label++;
    }
    return true;
}

static bool is_ip_literal(const char *name, size_t n) {
    char buf[64];
    if (n == 0 || n >= sizeof buf) return false;
    memcpy(buf, name, n);
    buf[n] = '\0';
    unsigned char addr[16];
    if (buf[0] == '[') {
        if (n < 3 || buf[n - 1] != ']') return false;
        buf[n - 1] = '\0';
        return inet_pton(AF_INET6, buf + 1, addr) == 1;
    }
    return inet_pton(AF_INET, buf, addr) == 1;
}

bool ps_guard_host_syntax(const char *host, size_t len) {
    if (!host) return true;
    while (len && (*host == ' ' || *host == '\t')) { /* the header's optional white space */
        host++;
        len--;
    }
    while (len && (host[len - 1] == ' ' || host[len - 1] == '\t')) len--;
    size_t n = host_name_len(host, len);
    if (n < len) { /* a port: ':' then 1..5 digits, at most 65535 */
        const char *p = host + n + 1;
        size_t m = len - n - 1;
        if (host[n] != ':' || m == 0 || m > 5) return false;
        long port = 0;
        for (size_t i = 0; i < m; i++) {
            if (p[i] < '0' || p[i] > '9') return false;
            port = port * 10 + (p[i] - '0');
        }
        if (port > 65535) return false;
    }
    if (n == 0) return len == 0; /* an empty Host is well formed (and refused as no name) */
    if (host[0] == '[') return is_ip_literal(host, n);
    return is_host_name(host, n);
}

bool ps_guard_host_ok(const char *host, const char *allowed) {
    if (!host) return true; /* no browser omits Host: its absence is no way in for a page */
    while (*host == ' ' || *host == '\t') host++;
    size_t len = strlen(host);
    while (len && (host[len - 1] == ' ' || host[len - 1] == '\t')) len--;
    if (!ps_guard_host_syntax(host, len)) return false;
    size_t n = host_name_len(host, len);
    while (n && host[n - 1] == '.') n--; /* "localhost." is "localhost" */
    if (n == 0) return false;
    if (is_ip_literal(host, n)) return true;
    if (n == 9 && !strncasecmp(host, "localhost", 9)) return true;
    for (const char *a = allowed; a && *a;) {
        while (*a == ',' || *a == ' ') a++;
        size_t m = strcspn(a, ", ");
        if (m == 1 && a[0] == '*') return true;
        if (m == n && !strncasecmp(a, host, n)) return true;
        a += m;
    }
    return false;
}

bool ps_guard_json_type(const char *ctype) {
    if (!ctype) return false;
    while (*ctype == ' ' || *ctype == '\t') ctype++;
    if (strncasecmp(ctype, "application/json", 16) != 0) return false;
    char c = ctype[16];
    return c == '\0' || c == ';' || c == ' ' || c == '\t';
}

bool ps_guard_host_is_loopback(const char *host) {
    if (!host || !*host) return true; /* the default, 127.0.0.1 */
    if (!strcasecmp(host, "localhost")) return true;
    unsigned char a[16];
    if (inet_pton(AF_INET, host, a) == 1) return a[0] == 127;
    if (inet_pton(AF_INET6, host, a) == 1) {
        static const unsigned char one[16] = {[15] = 1};
        return memcmp(a, one, 16) == 0;
    }
    return false;
}

ps_status ps_guard_read_key_file(const char *path, char **key, ps_error *err) {
    *key = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return ps_fail(err, PS_ERR_IO, -1, "cannot open the API key file %s: %s", path,
                           strerror(errno));
    char buf[4098];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    bool more = n == sizeof buf - 1;
    fclose(f);
    if (more) return ps_fail(err, PS_ERR_FORMAT, -1, "the API key file %s is over 4 KiB", path);
    buf[n] = '\0';
    size_t len = strcspn(buf, "\r\n");
    if (len == 0)
        return ps_fail(err, PS_ERR_FORMAT, 0, "the API key file %s has an empty first line", path);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)buf[i] <= 0x20 || buf[i] == 0x7f)
            return ps_fail(err, PS_ERR_FORMAT, (int64_t)i,
                           "the API key in %s holds a space or control byte at offset %zu", path,
                           i);
    *key = ps_malloc(len + 1);
    if (!*key) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory");
    memcpy(*key, buf, len);
    (*key)[len] = '\0';
    return PS_OK;
}
