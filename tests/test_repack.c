/*
 * test_repack.c — the tile copies a model gets at load: the vdpbf16ps one of a BF16 model
 * (model.c, repack_dp) where AVX-512 BF16 is usable and there is no AMX copy, and the tiles
 * of Q4_K and Q6_K experts (repack_experts, test_expert_copy below).
 *
 * A gen-model BF16 llama with tied embeddings (its output matrix is token_embd), one without,
 * and one whose ffn_down has 1000 inputs (not a multiple of 32: left out of the copy, which
 * would pad it), each loaded by default and with no_repack:
 *   - the logits of a forward pass are bitwise the same with and without the copy, on the
 *     session's default road and with --act f32 (which reads the file's pages, given back
 *     after the copy, again);
 *   - info.tile_bytes is the copy's size where the copy is made (0 with no_repack);
 *   - the copy replaces the file's pages instead of adding to them: after the load, the file's
 *     mapping keeps under a tenth of the copy's size resident (the metadata, the norms, pages
 *     shared by two tensors; without giving the pages back it would be all of them), and a
 *     forward pass on the native road brings none back: a tied token_embd reads its rows from
 *     the output's copy (from the file, each token would bring back a page).
 * Every allocation of the load, the copy's included, failing in turn: a clean PS_ERR_NOMEM with
 * a message and no model (leaks: the sanitizer build and valgrind).
 * Where the CPU lacks AVX-512 BF16 (or has AMX, whose copy test_matmul_amx checks), the copy
 * is absent and only the bitwise check runs.
 */
#include "check.h"
#include "base/impl.h"
#include "base/testhooks.h"
#include "gen/genmodel.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The resident kB of the mappings of file `path` (/proc/self/smaps), -1 when unreadable. */
static long file_rss_kb(const char *path) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    long kb = 0;
    bool in = false;
    const size_t pl = strlen(path);
    while (fgets(line, sizeof line, f)) {
        const size_t n = strlen(line);
        if (n > 0 && line[n - 1] == '\n') line[n - 1] = '\0';
        /* a mapping's header line starts with its address range; its fields have "Name:" */
        const char *sp = strchr(line, ' ');
        const bool header = sp && sp > line && strchr(line, '-') && strchr(line, '-') < sp;
        if (header) {
            in = strlen(line) >= pl && !strcmp(line + strlen(line) - pl, path);
            continue;
        }
        if (in && !strncmp(line, "Rss:", 4)) kb += strtol(line + 4, NULL, 10);
    }
    fclose(f);
    return kb;
}

/* Drops file `path` from the page cache, so that it is read back from the disk as a downloaded
 * model is: a read fills the cache in large folios where the filesystem has them (ext4 on
 * Linux 6.16+), and a fault on one page of a 2 MiB folio maps all of it; the pages a write
 * left sit in small ones. */
static void uncache(const char *path) {
    const int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    (void)fdatasync(fd);
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

enum { N = 40 };

static bool forward(ps_model *m, ps_act act, float *out, ps_error *e) {
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = (int32_t)(1 + (i * 977) % 31000);
    ps_session_params sp = ps_session_default_params();
    sp.n_ctx = N;
    sp.act = act;
    ps_session *s = NULL;
    const bool ok = ps_session_create(m, &sp, &s, e) == PS_OK &&
                    ps_session_forward(s, ids, N, out, e) == PS_OK;
    ps_session_free(s);
    return ok;
}

/* A gen-model BF16 llama of 8 / 4 heads and a 32,000-token vocabulary. */
static ps_genmodel_params bf16_llama(int32_t n_layer, int32_t n_embd, int32_t n_ff, bool tied,
                                     uint64_t seed) {
    ps_genmodel_params gp = ps_genmodel_default_params();
    snprintf(gp.arch, sizeof gp.arch, "llama");
    gp.type = PS_GGML_BF16;
    gp.n_layer = n_layer;
    gp.n_embd = n_embd;
    gp.n_ff = n_ff;
    gp.n_head = 8;
    gp.n_head_kv = 4;
    gp.n_vocab = 32000;
    gp.tied = tied;
    gp.seed = seed;
    return gp;
}

/* Writes gp to path (a temporary file, then dropped from the page cache) and loads it twice:
 * *plain with no_repack, *m by default, their infos into *pinfo / *info. False, with the
 * failure checked and the file removed, when a step fails (a loaded model is the caller's). */
static bool write_and_load(const ps_genmodel_params *gp, const char *tag, const char *path,
                           ps_model **plain, ps_model **m, ps_model_info *pinfo,
                           ps_model_info *info) {
    ps_error e;
    if (ps_genmodel_write(gp, path, &e) != PS_OK) {
        CHECKF(0, "%s model: %s", tag, e.message);
        unlink(path);
        return false;
    }
    uncache(path);
    ps_model_params mp = ps_model_default_params();
    mp.no_repack = true;
    CHECKF(ps_model_load(path, &mp, plain, &e) == PS_OK, "%s no_repack load: %s", tag, e.message);
    mp.no_repack = false;
    CHECKF(ps_model_load(path, &mp, m, &e) == PS_OK, "%s load: %s", tag, e.message);
    if (!*plain || !*m) return false;
    ps_model_get_info(*m, info);
    ps_model_get_info(*plain, pinfo);
    CHECKF(pinfo->tile_bytes == 0, "%s: no_repack made a copy of %lld bytes", tag,
           (long long)pinfo->tile_bytes);
    return true;
}

/* Every allocation of path's load failing in turn: a clean PS_ERR_NOMEM with a message and no
 * model each time. */
static void check_load_allocs(const char *path, const char *tag) {
    ps_error e;
    ps_alloc_fail_after(1 << 30);
    ps_model *t = NULL;
    ps_status st = ps_model_load(path, NULL, &t, &e);
    const int64_t count = ps_alloc_count();
    ps_alloc_fail_after(-1);
    ps_model_free(t);
    int64_t clean = 0;
    for (int64_t i = 0; st == PS_OK && i < count; i++) {
        t = NULL;
        ps_alloc_fail_after(i);
        const ps_status fs = ps_model_load(path, NULL, &t, &e);
        ps_alloc_fail_after(-1);
        clean += fs == PS_ERR_NOMEM && t == NULL && e.message[0] != '\0';
        ps_model_free(t);
    }
    CHECKF(st == PS_OK && clean == count, "%s: %lld of %lld failed allocations of the "
           "load were clean", tag, (long long)clean, (long long)count);
}

static void test_copy(bool tied, int32_t n_ff) {
    char tag[32];
    snprintf(tag, sizeof tag, "%s, ffn %d", tied ? "tied" : "untied", (int)n_ff);
    char path[] = "/tmp/ps-test-repack-XXXXXX";
    if (!ps_test_temp_file(path)) return;
    const ps_genmodel_params gp = bf16_llama(2, 512, n_ff, tied, tied ? 3 : 4);
    ps_error e;
    const bool expect = ps_cpu_has_avx512bf16() && ps_isa_best() == PS_ISA_AVX512 &&
                        !(ps_cpu_has_amx() && ps_isa_env_amx() != 0);
    ps_model *plain = NULL, *m = NULL;
    ps_model_info info, pinfo;
    if (!write_and_load(&gp, tag, path, &plain, &m, &pinfo, &info)) goto out;
    CHECKF(expect ? info.tile_bytes > 0 : info.tile_bytes == 0 || ps_cpu_has_amx(),
           "%s: tile copy of %lld bytes where %s expected", tag, (long long)info.tile_bytes,
           expect ? "one is" : "none is");
    /* the plain model's mapping is untouched so far (its weights are read lazily): what is
     * resident of the file now is the copied model's */
    const long f0 = file_rss_kb(path);
    if (expect) {
        printf("%s: after the load the file keeps %ld KiB resident for a %.1f MiB copy\n", tag,
               f0, (double)info.tile_bytes / 1048576.0);
        CHECKF(f0 >= 0 && (double)f0 * 1024.0 < 0.1 * (double)info.tile_bytes,
               "%s: %ld KiB of the file resident after the copy (%.1f MiB): its pages were "
               "not given back", tag, f0, (double)info.tile_bytes / 1048576.0);
    }
    const size_t nl = (size_t)N * (size_t)gp.n_vocab;
    float *a = malloc(nl * sizeof *a), *b = malloc(nl * sizeof *b);
    bool ok = forward(m, PS_ACT_NATIVE, a, &e);
    const long f1 = file_rss_kb(path);
    if (ok && expect)
        printf("%s: a forward pass brought %ld KiB of the file back\n", tag, f1 - f0);
    if (ok && expect && tied)
        CHECKF(f1 - f0 <= 8, "%s: a forward pass on the copy brought %ld KiB of the file back "
               "(token_embd read from the file)", tag, f1 - f0);
    ok = ok && forward(plain, PS_ACT_NATIVE, b, &e);
    CHECKF(ok, "%s forward: %s", tag, e.message);
    if (ok) CHECKF(!memcmp(a, b, nl * sizeof *a), "%s: the tile copy changed the logits", tag);
    if (tied) check_load_allocs(path, tag);
    ok = ok && forward(m, PS_ACT_F32, a, &e) && forward(plain, PS_ACT_F32, b, &e);
    CHECKF(ok, "%s f32 forward: %s", tag, e.message);
    if (ok)
        CHECKF(!memcmp(a, b, nl * sizeof *a), "%s: --act f32 logits differ with the copy", tag);
    free(a);
    free(b);
out:
    ps_model_free(m);
    ps_model_free(plain);
    unlink(path);
}

/* A model big enough for the page cache to read it in 2 MiB folios (8 layers, 220 MB): after
 * the copy, a forward pass brings no folio of the file back. The norms sit between the copied
 * matrices; read in place, each would map the 2 MiB folio around it (16 MiB here, about 160 MB
 * for the Qwen3-0.6B shape), so the load copies them out of the mapping (copy_vectors). */
static void test_folios(void) {
    if (!ps_cpu_has_avx512bf16() || ps_isa_best() != PS_ISA_AVX512 ||
        (ps_cpu_has_amx() && ps_isa_env_amx() != 0)) {
        PS_TEST_CPU_LACKS("the vdpbf16ps copy (AVX-512 BF16, and no AMX, whose copy keeps "
                          "the file's pages)");
        return;
    }
    char path[] = "/tmp/ps-test-repack-XXXXXX";
    if (!ps_test_temp_file(path)) return;
    const ps_genmodel_params gp = bf16_llama(8, 1024, 3072, true, 5);
    ps_error e;
    ps_model *m = NULL;
    CHECKF(ps_genmodel_write(&gp, path, &e) == PS_OK, "folio model: %s", e.message);
    uncache(path);
    CHECKF(ps_model_load(path, NULL, &m, &e) == PS_OK, "folio model load: %s", e.message);
    float *a = malloc((size_t)N * (size_t)gp.n_vocab * sizeof *a);
    if (m && a) {
        const long f0 = file_rss_kb(path);
        const bool ok = forward(m, PS_ACT_NATIVE, a, &e);
        const long f1 = file_rss_kb(path);
        CHECKF(ok, "folio model forward: %s", e.message);
        printf("folios: a forward pass brought %ld KiB of the file back (%ld KiB resident)\n",
               f1 - f0, f1);
        CHECKF(ok && f1 - f0 <= 64, "a forward pass brought %ld KiB of the file back: the "
               "folios around the weights' vectors", f1 - f0);
    }
    free(a);
    ps_model_free(m);
    unlink(path);
}

/* The tile copy of the Q4_K and of the Q6_K experts (model.c, repack_experts) where AVX-512
 * VNNI is the integer kernel (no AMX): a gen-model qwen3moe at Q4_K (split and merged gate / up
 * tensors) and at Q6_K (split), 32 experts of 4 used, loaded by default and with no_repack:
 *   - bitwise the same logits with and without the copy, on the default road and with
 *     --act f32 (which reads the file's pages again);
 *   - info.tile_bytes is the copy's size (the three expert tensors of each layer, 2368 bytes
 *     (Q4_K) or 3392 (Q6_K) per 16 rows x 256 inputs) where it is made, 0 with no_repack;
 *   - the copy replaces the file's pages: after the load the file keeps under a third of the
 *     copy's size resident (the attention and output matrices, read in place, are the rest);
 *   - every allocation of the load failing in turn: a clean PS_ERR_NOMEM, no model. */
static void test_expert_copy(uint32_t type, bool merged) {
    const bool q6 = type == PS_GGML_Q6_K;
    const char *tag = q6       ? "q6_k experts"
                      : merged ? "q4_k experts, merged gate_up"
                               : "q4_k experts";
    char path[] = "/tmp/ps-test-repack-XXXXXX";
    if (!ps_test_temp_file(path)) return;
    ps_genmodel_params gp = ps_genmodel_default_params();
    ps_error e;
    CHECK(ps_genmodel_preset("qwen3moe-tiny", &gp, &e) == PS_OK);
    gp.type = type;
    gp.n_embd = 256;
    gp.n_head = 4;
    gp.n_head_kv = 2;
    gp.head_dim = 64;
    gp.n_ff_exp = 512;
    gp.n_expert = 32;
    gp.n_expert_used = 4;
    gp.n_vocab = 32000;
    gp.merged_gate_up = merged;
    gp.seed = q6 ? 8 : merged ? 7 : 6;
    const bool expect = ps_cpu_has_avx512vnni() && ps_isa_best() == PS_ISA_AVX512 &&
                        !(ps_cpu_has_amx() && ps_isa_env_amx() != 0);
    ps_model *plain = NULL, *m = NULL;
    ps_model_info info, pinfo;
    if (!write_and_load(&gp, tag, path, &plain, &m, &pinfo, &info)) goto out;
    const int64_t want = (int64_t)gp.n_layer * gp.n_expert * (q6 ? 3392 : 2368) *
                         (2 * (gp.n_ff_exp / 16) * (gp.n_embd / 256) +
                          (gp.n_embd / 16) * (gp.n_ff_exp / 256));
    CHECKF(info.tile_bytes == (expect ? want : 0), "%s: tile copy of %lld bytes, %lld expected",
           tag, (long long)info.tile_bytes, (long long)(expect ? want : 0));
    const long f0 = file_rss_kb(path);
    if (expect) {
        printf("%s: after the load the file keeps %ld KiB resident for a %.1f MiB copy\n", tag,
               f0, (double)info.tile_bytes / 1048576.0);
        CHECKF(f0 >= 0 && (double)f0 * 1024.0 < (double)info.tile_bytes / 3.0,
               "%s: %ld KiB of the file resident after the copy (%.1f MiB): its pages were "
               "not given back", tag, f0, (double)info.tile_bytes / 1048576.0);
    }
    const size_t nl = (size_t)N * (size_t)gp.n_vocab;
    float *a = malloc(nl * sizeof *a), *b = malloc(nl * sizeof *b);
    for (int act = 0; act < 2; act++) {
        const ps_act pa = act ? PS_ACT_F32 : PS_ACT_NATIVE;
        const bool ok = forward(m, pa, a, &e) && forward(plain, pa, b, &e);
        CHECKF(ok, "%s forward: %s", tag, e.message);
        if (ok)
            CHECKF(!memcmp(a, b, nl * sizeof *a), "%s: the tile copy changed the logits%s", tag,
                   act ? " (--act f32)" : "");
    }
    free(a);
    free(b);
    if (!merged) check_load_allocs(path, tag);
out:
    ps_model_free(m);
    ps_model_free(plain);
    unlink(path);
}

int main(void) {
    test_copy(true, 1376);  /* off the 64-row tasks */
    test_copy(false, 1376);
    test_copy(false, 1000); /* ffn_down's 1000 inputs: left out of the copy, packed per call */
    test_folios();
    test_expert_copy(PS_GGML_Q4_K, false);
    test_expert_copy(PS_GGML_Q4_K, true);
    test_expert_copy(PS_GGML_Q6_K, false);
    return ps_test_done("repack");
}
