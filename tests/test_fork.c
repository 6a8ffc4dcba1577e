/*
 * test_fork.c — the library after fork(): a process that scored on a pool of 4 threads (and
 * through a prefix cache) forks; each child scores the same prompt on the inherited session,
 * pool and cache and sends its logprobs, top ids and top logprobs back through a pipe; they
 * must equal the parent's bit for bit. Before the pool rebuilt its workers in the child, the
 * child's first parallel loop waited for workers that do not exist there (a hang: each child
 * has an alarm, so a hang is a failure, not a stuck suite). Also: a child forked while another
 * thread of the parent is scoring (the pool's and the cache's locks are taken around fork()),
 * a child that forks again (a grandchild), a pool created, freed and never used in the child,
 * and the parent's pool still working after its children.
 * Skips (never passes) when ../shared is absent.
 */
#include "promptscore.h"
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <sys/wait.h>

#define N_TOK 40
#define K 5

typedef struct {
    float lp[N_TOK];
    int32_t top[N_TOK * K];
    float top_lp[N_TOK * K];
} answer;

static int32_t toks[N_TOK];

static bool score(ps_session *s, ps_prefix_cache *cache, answer *a) {
    ps_score_params p = ps_score_default_params();
    p.k = K;
    p.cache = cache;
    ps_score_result *r = NULL;
    ps_error err;
    if (ps_score_tokens(s, toks, N_TOK, &p, &r, &err) != PS_OK) {
        fprintf(stderr, "score: %s\n", err.message);
        return false;
    }
    memset(a, 0, sizeof *a);
    memcpy(a->lp, r->logprobs, sizeof a->lp);
    memcpy(a->top, r->top_ids, sizeof a->top);
    memcpy(a->top_lp, r->top_logprobs, sizeof a->top_lp);
    ps_score_result_free(r);
    return true;
}

/* A child's last steps: a pool made in the child works too, and freeing one never used there is
 * clean; then the answer goes to fd and the child exits. */
static void child_finish(const answer *a, int fd) {
    ps_pool *fresh = NULL;
    if (ps_pool_create(3, &fresh) != PS_OK) _exit(6);
    ps_pool_free(fresh);
    if (write(fd, a, sizeof *a) != (ssize_t)sizeof *a) _exit(7);
    _exit(0);
}

/* The child's part: score (in a grandchild first when fork_again), write the answer to fd,
 * _exit. */
static void child_main(ps_session *s, ps_prefix_cache *cache, int fd, bool fork_again) {
    alarm(30); /* a hang ends the child with SIGALRM */
    answer a;
    if (fork_again) {
        int pfd[2];
        if (pipe(pfd) != 0) _exit(3);
        pid_t pid = fork();
        if (pid == 0) {
            close(pfd[0]);
            alarm(30);
            if (!score(s, cache, &a)) _exit(2);
            child_finish(&a, pfd[1]);
        }
        close(pfd[1]);
        answer b;
        ssize_t n = read(pfd[0], &b, sizeof b);
        int status = 0;
        waitpid(pid, &status, 0);
        if (n != (ssize_t)sizeof b || !WIFEXITED(status) || WEXITSTATUS(status) != 0) _exit(4);
        if (!score(s, cache, &a) || memcmp(&a, &b, sizeof a) != 0) _exit(5);
    } else if (!score(s, cache, &a)) {
        _exit(2);
    }
    child_finish(&a, fd);
}

/* Forks a child that scores (fork_again: a grandchild scores first); the child's answer into
 * *a. False (with the reason printed) when the child failed or hung. */
static bool child_score(ps_session *s, ps_prefix_cache *cache, bool fork_again, answer *a) {
    int pfd[2];
    if (pipe(pfd) != 0) return false;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        close(pfd[0]);
        child_main(s, cache, pfd[1], fork_again);
    }
    close(pfd[1]);
    ssize_t n = read(pfd[0], a, sizeof *a);
    close(pfd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status))
        fprintf(stderr, "  child killed by signal %d%s\n", WTERMSIG(status),
                WTERMSIG(status) == SIGALRM ? " (it hung)" : "");
    else if (WIFEXITED(status) && WEXITSTATUS(status))
        fprintf(stderr, "  child exited %d\n", WEXITSTATUS(status));
    return n == (ssize_t)sizeof *a && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

typedef struct {
    ps_session *s;
    ps_prefix_cache *cache;
    _Atomic int stop;
    int rounds;
    bool ok;
    const answer *want;
} busy_arg;

/* Scores in a loop on its own session until told to stop (the parent forks meanwhile). */
static void *busy_main(void *arg) {
    busy_arg *b = arg;
    b->ok = true;
    while (!atomic_load(&b->stop)) {
        answer a;
        b->ok = b->ok && score(b->s, b->cache, &a) && !memcmp(&a, b->want, sizeof a);
        b->rounds++;
    }
    return NULL;
}

int main(void) {
    const char *shared = ps_test_shared();
    if (!shared) {
        SKIP("fork tests need ../shared");
        return ps_test_done("fork");
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared);
    ps_model *m = NULL;
    ps_error err;
    CHECKF(ps_model_load(path, NULL, &m, &err) == PS_OK, "load: %s", err.message);
    if (!m) return ps_test_done("fork");
    for (int i = 0; i < N_TOK; i++) toks[i] = i == 0 ? 1 : 3 + (i * 37) % 500;

    ps_pool *pool = NULL, *pool2 = NULL;
    CHECK(ps_pool_create(4, &pool) == PS_OK);
    CHECK(ps_pool_create(2, &pool2) == PS_OK);
    ps_prefix_cache *cache = NULL;
    CHECK(ps_prefix_cache_create(m, NULL, &cache, &err) == PS_OK);
    ps_session_params sp = ps_session_default_params();
    sp.pool = pool;
    ps_session *s = NULL, *s2 = NULL;
    CHECK(ps_session_create(m, &sp, &s, &err) == PS_OK);
    sp.pool = pool2;
    CHECK(ps_session_create(m, &sp, &s2, &err) == PS_OK);
    if (!pool || !pool2 || !cache || !s || !s2) return ps_test_done("fork");

    answer want, got;
    CHECK(score(s, NULL, &want)); /* the pool has run: its workers exist in the parent only */

    /* a child scores on the inherited session and pool, without and with the cache */
    CHECKF(child_score(s, NULL, false, &got) && !memcmp(&got, &want, sizeof got),
           "child after fork: the same answer, bit for bit");
    CHECK(score(s, cache, &got) && !memcmp(&got, &want, sizeof got)); /* fills the cache */
    CHECKF(child_score(s, cache, false, &got) && !memcmp(&got, &want, sizeof got),
           "child after fork, through the prefix cache");
    /* a grandchild: the child forks again before it scores */
    CHECKF(child_score(s, cache, true, &got) && !memcmp(&got, &want, sizeof got),
           "grandchild after two forks");

    /* forks while another thread scores on its own pool and the shared cache */
    busy_arg b = {.s = s2, .cache = cache, .want = &want};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, busy_main, &b) == 0);
    int good = 0;
    for (int i = 0; i < 8; i++)
        good += child_score(s, cache, false, &got) && !memcmp(&got, &want, sizeof got);
    atomic_store(&b.stop, 1);
    pthread_join(th, NULL);
    CHECKF(good == 8, "forks during another thread's scores: %d of 8 children right", good);
    CHECKF(b.ok && b.rounds > 0, "the other thread's scores (%d) stayed right", b.rounds);

    /* the parent's pools still work after all of it */
    CHECK(score(s, cache, &got) && !memcmp(&got, &want, sizeof got));
    CHECK(score(s2, NULL, &got) && !memcmp(&got, &want, sizeof got));

    ps_session_free(s);
    ps_session_free(s2);
    ps_prefix_cache_free(cache);
    ps_pool_free(pool);
    ps_pool_free(pool2);
    ps_model_free(m);
    return ps_test_done("fork");
}
