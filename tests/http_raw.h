/*
 * http_raw.h — a raw HTTP/1.1 client for the server tests (test_serve_safety.c,
 * test_serve_limits.c): a TCP connection from a chosen source address, every byte sent as
 * given (NULs, duplicate or malformed headers: what a real client library would refuse to
 * send), and one answer read within a deadline: the header block, then Content-Length bytes
 * or to the end, so the next request can go out as soon as this one's last byte is in.
 */
#ifndef PS_TEST_HTTP_RAW_H
#define PS_TEST_HTTP_RAW_H

#include "base/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A TCP connection to 127.0.0.1:port from the source address src (NULL: any). */
static int dial(int port, const char *src) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (src) {
        struct sockaddr_in a = {.sin_family = AF_INET};
        inet_pton(AF_INET, src, &a.sin_addr);
        if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
            close(fd);
            return -1;
        }
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static bool send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

typedef struct {
    int status;           /* 0: no answer */
    char head[4096];      /* the header block */
    char *body;           /* NUL-terminated */
    size_t len;
} answer;

static void answer_free(answer *a) {
    free(a->body);
    memset(a, 0, sizeof *a);
}

/* Reads one answer from fd within secs (headers, then Content-Length bytes or to the end). */
static bool read_answer(int fd, double secs, answer *a) {
    memset(a, 0, sizeof *a);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    double t0 = ps_now_s();
    long want = -1;
    size_t hdr = 0;
    for (;;) {
        if (hdr && want >= 0 && n - hdr >= (size_t)want) break;
        double left = secs - (ps_now_s() - t0);
        if (left <= 0) break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) break;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
        }
        ssize_t r = recv(fd, buf + n, cap - n, 0);
        if (r <= 0) break;
        n += (size_t)r;
        buf[n] = 0;
        if (!hdr) {
            char *e = strstr(buf, "\r\n\r\n");
            if (e) {
                hdr = (size_t)(e - buf) + 4;
                char *cl = strcasestr(buf, "\r\nContent-Length:");
                if (cl && cl < e) want = atol(cl + 17);
            }
        }
    }
    buf[n] = 0;
    if (hdr) {
        snprintf(a->head, sizeof a->head, "%.*s", (int)hdr, buf);
        sscanf(buf, "HTTP/1.%*d %d", &a->status);
        a->len = n - hdr;
        a->body = malloc(a->len + 1);
        memcpy(a->body, buf + hdr, a->len);
        a->body[a->len] = 0;
    } else {
        a->body = calloc(1, 1);
    }
    free(buf);
    return a->status != 0;
}

#endif
