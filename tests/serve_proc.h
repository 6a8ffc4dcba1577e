/*
 * serve_proc.h — the `promptscore serve` child process of the server tests (test_server,
 * test_serve_safety), written once: started with --port 0 (a free loopback port) and one
 * thread plus the test's options, its stderr in a log file, the port read from its
 * "listening on" line; stopped by SIGTERM or waited for — every wait bounded in time (scaled
 * by PS_TEST_TIME_SCALE under the sanitizers). Also a /proc/PID/status field (VmRSS, VmHWM).
 * Header-only: static functions for the test that includes it.
 */
#ifndef PS_TEST_SERVE_PROC_H
#define PS_TEST_SERVE_PROC_H

#include "check.h"
#include "base/util.h"

#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    pid_t pid;
    int port;
    char log[1024];
} server;

/* How to start one: the binary and model, where the log goes (<dir>/<tag>-<pid>-<n>.log) and,
 * for a test of the hold hook (base/testhooks.h; a test build of bin), PS_TEST_HOLD_FDS for the child and the two
 * descriptors it keeps (every pipe end is opened close-on-exec; the child clears it on these). */
typedef struct {
    const char *bin, *model;
    const char *log_dir, *log_tag;
    const char *hold_env; /* NULL or "": none */
    int hold_keep[2];
} serve_opts;

/* Starts `bin serve -m model --port 0 -t 1 extra...` and waits up to 20 s (scaled) for its
 * "listening on" line; false (s->pid 0) when it exited or never listened (killed then). */
static bool serve_start(server *s, const serve_opts *o, const char *const *extra) {
    memset(s, 0, sizeof *s);
    static int n_started;
    snprintf(s->log, sizeof s->log, "%.900s/%.60s-%d-%d.log", o->log_dir, o->log_tag, (int)getpid(),
             n_started++);
    const char *argv[48];
    int argc = 0;
    argv[argc++] = o->bin;
    argv[argc++] = "serve";
    argv[argc++] = "-m";
    argv[argc++] = o->model;
    argv[argc++] = "--port";
    argv[argc++] = "0";
    argv[argc++] = "-t";
    argv[argc++] = "1";
    for (int i = 0; extra && extra[i] && argc < 46; i++) argv[argc++] = extra[i];
    argv[argc] = NULL;
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
#if defined(__SANITIZE_ADDRESS__)
        setenv("ASAN_OPTIONS", "quarantine_size_mb=0:detect_leaks=1", 1);
#endif
        if (o->hold_env && o->hold_env[0]) {
            setenv("PS_TEST_HOLD_FDS", o->hold_env, 1);
            for (int i = 0; i < 2; i++) fcntl(o->hold_keep[i], F_SETFD, 0);
        }
        FILE *f = freopen(s->log, "w", stderr);
        (void)f;
        ps_test_execv(o->bin, argv);
        _exit(127);
    }
    s->pid = pid;
    double t0 = ps_now_s();
    while (ps_now_s() - t0 < 20 * PS_TEST_TIME_SCALE) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            fprintf(stderr, "server exited early (status %d); log %s\n", st, s->log);
            s->pid = 0;
            return false;
        }
        FILE *f = fopen(s->log, "r");
        if (f) {
            char line[1024];
            while (fgets(line, sizeof line, f)) {
                char *p = strstr(line, "listening on http://");
                if (p && (p = strrchr(p, ':'))) s->port = atoi(p + 1);
            }
            fclose(f);
        }
        if (s->port > 0) return true;
        usleep(20000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    s->pid = 0;
    return false;
}

/* Waits up to secs for the server to exit; its exit status, or -1 (killed then, or it did not
 * exit normally). */
static int serve_wait(server *s, double secs) {
    double t0 = ps_now_s();
    int st = 0;
    while (ps_now_s() - t0 < secs) {
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        }
        usleep(5000);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
    return -1;
}

/* SIGTERM, then serve_wait for 60 s (scaled); -1 when it was not running. */
static int serve_stop(server *s) {
    if (!s->pid) return -1;
    kill(s->pid, SIGTERM);
    return serve_wait(s, 60 * PS_TEST_TIME_SCALE);
}

/* The kB value of a /proc/PID/status line ("VmRSS:", "VmHWM:"), or -1. */
static long proc_status_kb(pid_t pid, const char *key) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key))) kb = atol(line + strlen(key));
    fclose(f);
    return kb;
}

#endif
