/*
 * cli_gen.c — `promptscore gen-model`: writes a GGUF model with deterministic random weights
 * (genmodel.h does the work; this file parses options). A preset sets the shape first; the
 * other options then override single fields, whatever their order on the command line.
 */
#include "cli.h"
#include "genmodel.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *GEN_USAGE =
    "usage: promptscore gen-model -o OUT.gguf [options]\n"
    "\n"
    "Writes a model with deterministic random weights (same options and seed, same bytes).\n"
    "\n"
    "  -o, --output FILE    the GGUF to write (required)\n"
    "  --preset NAME        tiny (default: llama, 64 wide, 2 layers, 4/2 heads of 16, FFN 128,\n"
    "                       vocab 512), qwen3-0.6b (28 layers, 1024 wide, 16/8 heads of 128,\n"
    "                       FFN 3072, vocab 151936, tied), qwen35-tiny (qwen35: 4 layers = 3\n"
    "                       Gated DeltaNet + 1 gated attention, 64 wide, one MTP block),\n"
    "                       qwen35-4l (qwen35 at Qwen3.6-35B-A3B's widths, 4 layers, vocab 248320),\n"
    "                       qwen3moe-tiny (tiny's attention, 8 experts of FFN 32, 2 used),\n"
    "                       mixtral-tiny (llama, 4 experts of FFN 64, 2 used) or\n"
    "                       qwen3-30b-a3b-2l (Qwen3-30B-A3B's widths, 2 layers: 2048 wide, 32/4\n"
    "                       heads of 128, 128 experts of FFN 768, 8 used, vocab 151936)\n"
    "  --arch A             llama | qwen2 | qwen3 | qwen3moe | qwen35\n"
    "  --n-embd N  --n-layer N  --n-head N  --n-head-kv N  --head-dim N  --n-ff N  --n-ctx N\n"
    "  --n-rot N  --ssm-state N  --ssm-k-heads N  --ssm-v-heads N   qwen35: rotated dims, the\n"
    "                       DeltaNet head size and its key / value head counts\n"
    "  --n-expert N  --n-expert-used N  --n-ff-exp N   experts (qwen3moe; llama: Mixtral layout,\n"
    "                       experts of FFN n-ff)\n"
    "  --rope-base F        rope frequency base (default 10000)\n"
    "  --rms-eps F          RMSNorm epsilon (default 1e-5)\n"
    "  --type T             f32 | f16 | bf16 | q8_0 for the matrices (norms stay f32)\n"
    "  --tied               no output.weight (the output reuses token_embd.weight)\n"
    "  --untied             write output.weight (undoes a preset's --tied)\n"
    "  --rope-freqs         add Llama-3-style rope_freqs.weight\n"
    "  --vocab FILE.gguf    copy the tokenizer.* keys of this GGUF (n_vocab = its token count)\n"
    "  --n-vocab N          synthetic SentencePiece vocab of N >= 259 tokens\n"
    "  --name S             general.name\n"
    "  --seed N             PRNG seed (default 1)\n";

static bool parse_i32(const char *s, int32_t *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < INT32_MIN || v > INT32_MAX) return false;
    *out = (int32_t)v;
    return true;
}

static bool parse_f32(const char *s, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end) return false;
    *out = v;
    return true;
}

int ps_cli_gen_model(int argc, char **argv) {
    ps_genmodel_params p = ps_genmodel_default_params();
    const char *out = NULL;
    /* pass 1: --help and the preset, so that the other options override it */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(GEN_USAGE, stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--preset") && i + 1 < argc) {
            ps_error e;
            if (ps_genmodel_preset(argv[i + 1], &p, &e) != PS_OK) {
                fprintf(stderr, "promptscore gen-model: %s\n", e.message);
                return 2;
            }
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true, takes = true;
        int32_t *ip = NULL;
        if (!strcmp(a, "--tied")) p.tied = true, takes = false;
        else if (!strcmp(a, "--untied")) p.tied = false, takes = false;
        else if (!strcmp(a, "--rope-freqs")) p.rope_freqs = true, takes = false;
        else if (!v) {
            fprintf(stderr, "promptscore gen-model: %s needs a value (or is unknown; see --help)\n",
                    a);
            return 2;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) out = v;
        else if (!strcmp(a, "--preset")) { /* done in pass 1 */ }
        else if (!strcmp(a, "--arch")) ok = snprintf(p.arch, sizeof p.arch, "%s", v) < (int)sizeof p.arch;
        else if (!strcmp(a, "--name")) ok = snprintf(p.name, sizeof p.name, "%s", v) < (int)sizeof p.name;
        else if (!strcmp(a, "--vocab")) p.vocab_path = v;
        else if (!strcmp(a, "--n-vocab")) ip = &p.n_vocab;
        else if (!strcmp(a, "--n-embd")) ip = &p.n_embd;
        else if (!strcmp(a, "--n-layer")) ip = &p.n_layer;
        else if (!strcmp(a, "--n-head")) ip = &p.n_head;
        else if (!strcmp(a, "--n-head-kv")) ip = &p.n_head_kv;
        else if (!strcmp(a, "--head-dim")) ip = &p.head_dim;
        else if (!strcmp(a, "--n-ff")) ip = &p.n_ff;
        else if (!strcmp(a, "--n-ctx")) ip = &p.n_ctx;
        else if (!strcmp(a, "--n-rot")) ip = &p.n_rot;
        else if (!strcmp(a, "--ssm-state")) ip = &p.ssm_d_state;
        else if (!strcmp(a, "--ssm-k-heads")) ip = &p.ssm_n_k;
        else if (!strcmp(a, "--ssm-v-heads")) ip = &p.ssm_n_v;
        else if (!strcmp(a, "--n-expert")) ip = &p.n_expert;
        else if (!strcmp(a, "--n-expert-used")) ip = &p.n_expert_used;
        else if (!strcmp(a, "--n-ff-exp")) ip = &p.n_ff_exp;
        else if (!strcmp(a, "--rope-base")) ok = parse_f32(v, &p.rope_base);
        else if (!strcmp(a, "--rms-eps")) ok = parse_f32(v, &p.rms_eps);
        else if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            p.seed = strtoull(v, &end, 10);
            ok = !errno && end != v && !*end;
        } else if (!strcmp(a, "--type")) {
            if (!strcmp(v, "f32")) p.type = PS_GGML_F32;
            else if (!strcmp(v, "f16")) p.type = PS_GGML_F16;
            else if (!strcmp(v, "bf16")) p.type = PS_GGML_BF16;
            else if (!strcmp(v, "q8_0")) p.type = PS_GGML_Q8_0;
            else ok = false;
        } else {
            fprintf(stderr, "promptscore gen-model: unknown option %s (see --help)\n", a);
            return 2;
        }
        if (ip) ok = parse_i32(v, ip);
        if (!ok) {
            fprintf(stderr, "promptscore gen-model: bad value '%s' for %s\n", v, a);
            return 2;
        }
        if (takes) i++;
    }
    if (!out) {
        fprintf(stderr, "promptscore gen-model: -o OUT.gguf is required\n%s", GEN_USAGE);
        return 2;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ps_error e;
    ps_status st = ps_genmodel_write(&p, out, &e);
    if (st != PS_OK) {
        fprintf(stderr, "promptscore gen-model: %s\n", e.message);
        return st == PS_ERR_INVALID_ARG ? 2 : 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    FILE *f = fopen(out, "rb");
    long size = -1;
    if (f && fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (f) fclose(f);
    fprintf(stderr, "wrote %s: %s, %ld bytes in %.1f s\n", out, p.arch, size,
            (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    return 0;
}
