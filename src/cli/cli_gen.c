/*
 * cli_gen.c — `promptscore gen-model`: writes a GGUF model with deterministic random weights
 * (genmodel.h does the work; this file parses options). A preset sets the shape first; the
 * other options then override single fields, whatever their order on the command line.
 */
#include "cli/cli.h"
#include "gen/genmodel.h"
#include "gen/qmix.h"
#include "kernels/types.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *GEN_ABOUT =
    "Writes a model with deterministic random weights (same options and seed, same bytes).\n"
    "A preset sets the shape first; the other options override single fields.\n";

static bool opt_f32(const char *cmd, const char *opt, const char *v, void *dst) {
    char *end;
    errno = 0;
    float x = strtof(v, &end);
    if (errno || end == v || *end) {
        fprintf(stderr, "promptscore %s: %s wants a number, got '%s'\n", cmd, opt, v);
        return false;
    }
    *(float *)dst = x;
    return true;
}

static bool opt_u64(const char *cmd, const char *opt, const char *v, void *dst) {
    if (!ps_cli_parse_u64(v, dst)) {
        fprintf(stderr, "promptscore %s: %s wants an integer >= 0, got '%s'\n", cmd, opt, v);
        return false;
    }
    return true;
}

/* --type: a weight type of the table or a llama.cpp mix (q2_k, q6_k, iq4_nl and iq4_xs name
 * both: then the mix, as llama-quantize means them; --pure keeps the type itself) */
static bool opt_type(const char *cmd, const char *opt, const char *v, void *dst) {
    ps_genmodel_params *p = dst;
    const ps_qmix *mx = ps_qmix_find(v);
    p->mix[0] = 0;
    if (mx) {
        snprintf(p->mix, sizeof p->mix, "%s", mx->name);
        return true;
    }
    for (int32_t k = 0; k < ps_wtype_count(); k++)
        if (!strcmp(v, ps_wtype_at(k)->name)) {
            p->type = ps_wtype_at(k)->id;
            return true;
        }
    fprintf(stderr, "promptscore %s: %s wants a weight type (%s) or a mix (%s), got '%s'\n", cmd,
            opt, ps_wtype_names(), ps_qmix_names(), v);
    return false;
}

/* --arch / --name: copied into genmodel's fixed-size arrays (too long is a usage error). */
typedef struct {
    char *dst;
    size_t cap;
} str_field;

static bool opt_copy(const char *cmd, const char *opt, const char *v, void *dst) {
    str_field *f = dst;
    if ((size_t)snprintf(f->dst, f->cap, "%s", v) >= f->cap) {
        fprintf(stderr, "promptscore %s: %s is too long (at most %zu bytes)\n", cmd, opt, f->cap - 1);
        return false;
    }
    return true;
}

static bool opt_none(const char *cmd, const char *opt, const char *v, void *dst) { return true; }

/* Long on purpose: most of its lines are the option table (one row per option of gen-model);
 * the rest parses it and calls ps_genmodel_write. */
int ps_cli_gen_model(int argc, char **argv) {
    ps_genmodel_params p = ps_genmodel_default_params();
    const char *out = NULL;
    /* pass 1: the preset, so that the other options override it whatever their order */
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--preset")) {
            ps_error e;
            if (ps_genmodel_preset(argv[i + 1], &p, &e) != PS_OK) {
                fprintf(stderr, "promptscore gen-model: %s\n", e.message);
                return 2;
            }
        }
    bool tied = false, untied = false, rope_freqs = false, pure = false;
    str_field arch = {p.arch, sizeof p.arch}, name = {p.name, sizeof p.name};
    const int64_t I = INT32_MAX;
    const ps_cli_opt opts[] = {
        {"-o, --output", "FILE", "the GGUF to write (required)", PS_CLI_STR, &out},
        {"--preset", "NAME", "tiny (default: llama, 64 wide, 2 layers, 4/2 heads of 16, FFN 128,\n"
         "vocab 512), qwen3-0.6b (28 layers, 1024 wide, 16/8 heads of\n"
         "128, FFN 3072, vocab 151936, tied), qwen35-tiny (qwen35: 4 layers\n"
         "= 3 Gated DeltaNet + 1 gated attention, 64 wide, one MTP block),\n"
         "qwen35-4l (qwen35 at Qwen3.6-35B-A3B's widths, 4 layers, vocab\n"
         "248320), qwen35moe-tiny / qwen35moe-4l (the same with experts and a\n"
         "shared expert: 8 of FFN 32, 2 used / 256 of FFN 512, 8 used, shared\n"
         "512), qwen3.6-35b-a3b (qwen35moe-4l at full depth: 40 layers, about\n"
         "20 GB at q4_k_m), qwen3moe-tiny (tiny's attention, 8 experts of FFN 32, 2\n"
         "used), mixtral-tiny (llama, 4 experts of FFN 64, 2 used) or\n"
         "qwen3-30b-a3b-2l (Qwen3-30B-A3B's widths, 2 layers: 2048 wide,\n"
         "32/4 heads of 128, 128 experts of FFN 768, 8 used, vocab 151936),\n"
         "gpt-oss-tiny (gpt-oss: 4 layers, 64 wide, 8 experts of FFN 32, 4\n"
         "used), gpt-oss-20b-2l (gpt-oss-20b's widths, 2 layers: 2880 wide,\n"
         "64/8 heads of 64, 32 experts of FFN 2880, 4 used, vocab 201088),\n"
         "phi3-tiny (phi3: fused qkv and gate+up, rope on 12 of 16 dims,\n"
         "LongRoPE from 256 to 1024), phi3-mini-2l (Phi-3-mini-128k's widths,\n"
         "2 layers: 3072 wide, 32 heads of 96, FFN 8192, vocab 32064),\n"
         "olmo2-tiny (olmo2: output norms, whole-row q/k norms, 64 wide) or\n"
         "olmo2-1b-2l (OLMo-2-1B's widths, 2 layers: 2048 wide, 16 heads of\n"
         "128, FFN 8192, vocab 100352), gemma2-tiny / gemma2-2b-4l (gemma2,\n"
         "sliding / global layers; Gemma-2-2B's widths with 4 layers),\n"
         "gemma3-tiny / gemma3-1b-6l (gemma3, 5 sliding : 1 global;\n"
         "Gemma-3-1B's widths with 6 layers)",
         PS_CLI_FN, NULL, 0, 0, opt_none},
        {"--arch", "A", "llama | qwen2 | qwen3 | qwen3moe | qwen35 | qwen35moe | gpt-oss | phi3 |\n"
         "olmo2 | gemma | gemma2 | gemma3", PS_CLI_FN, &arch, 0, 0,
         opt_copy},
        {"--n-embd", "N", "width", PS_CLI_I32, &p.n_embd, 1, I},
        {"--n-layer", "N", "layers", PS_CLI_I32, &p.n_layer, 1, I},
        {"--n-head", "N", "query heads", PS_CLI_I32, &p.n_head, 1, I},
        {"--n-head-kv", "N", "key/value heads", PS_CLI_I32, &p.n_head_kv, 1, I},
        {"--head-dim", "N", "head size", PS_CLI_I32, &p.head_dim, 1, I},
        {"--n-ff", "N", "FFN width", PS_CLI_I32, &p.n_ff, 1, I},
        {"-c, --ctx-size, --ctx, --n-ctx", "N", "context length written to the file", PS_CLI_I32,
         &p.n_ctx, 1, I},
        {"--n-rot", "N", "rotated dimensions (rope.dimension_count; default head size,\n"
         "qwen35: a quarter of it)", PS_CLI_I32, &p.n_rot, 0, I},
        {"--n-ctx-orig", "N", "LongRoPE: the original context (with factor tables)",
         PS_CLI_I32, &p.n_ctx_orig, 0, I},
        {"--output-bias", NULL, "add output.bias", PS_CLI_FLAG, &p.output_bias},
        {"--ssm-state", "N", "qwen35: the DeltaNet head size", PS_CLI_I32, &p.ssm_d_state, 0, I},
        {"--ssm-k-heads", "N", "qwen35: DeltaNet key heads", PS_CLI_I32, &p.ssm_n_k, 0, I},
        {"--ssm-v-heads", "N", "qwen35: DeltaNet value heads", PS_CLI_I32, &p.ssm_n_v, 0, I},
        {"--sliding-window", "N", "gemma2 / gemma3: the sliding layers' window (0: gemma3 with\n"
         "every layer global)", PS_CLI_I32, &p.n_swa, 0, I},
        {"--n-expert", "N", "experts per layer (qwen3moe; llama: Mixtral layout, experts of\n"
         "FFN n-ff)", PS_CLI_I32, &p.n_expert, 0, I},
        {"--n-expert-used", "N", "experts per token", PS_CLI_I32, &p.n_expert_used, 0, I},
        {"--n-ff-exp", "N", "an expert's FFN width (qwen3moe)", PS_CLI_I32, &p.n_ff_exp, 0, I},
        {"--merged-gate-up", NULL, "experts' gate and up in one ffn_gate_up_exps tensor", PS_CLI_FLAG,
         &p.merged_gate_up},
        {"--rope-base", "F", "rope frequency base (default 10000)", PS_CLI_FN, &p.rope_base, 0, 0,
         opt_f32},
        {"--rms-eps", "F", "RMSNorm epsilon (default 1e-5)", PS_CLI_FN, &p.rms_eps, 0, 0, opt_f32},
        {"--type", "T", "the matrices' type (norms stay f32): f32 | f16 | bf16 | q4_0 | q4_1 |\n"
         "q5_0 | q5_1 | q8_0 | q3_k | q4_k | q5_k | mxfp4, or a llama.cpp mix\n"
         "laying out per-tensor types as its quantiser does: q2_k | q3_k_s |\n"
         "q3_k_m | q3_k_l | q4_k_s | q4_k_m | q5_k_s | q5_k_m | q6_k | iq4_nl |\n"
         "iq4_xs | mxfp4_moe (experts MXFP4). Quantised by plain round to nearest",
         PS_CLI_FN, &p, 0, 0, opt_type},
        {"--pure", NULL, "every matrix in the mix's base type (--type q4_k_m --pure: all q4_k)",
         PS_CLI_FLAG, &pure},
        {"--tied", NULL, "no output.weight (the output reuses token_embd.weight)", PS_CLI_FLAG,
         &tied},
        {"--untied", NULL, "write output.weight (undoes a preset's --tied)", PS_CLI_FLAG, &untied},
        {"--rope-freqs", NULL, "add Llama-3-style rope_freqs.weight", PS_CLI_FLAG, &rope_freqs},
        {"--vocab", "FILE.gguf", "copy the tokenizer.* keys of this GGUF (n_vocab = its tokens)",
         PS_CLI_STR, &p.vocab_path},
        {"--n-vocab", "N", "synthetic SentencePiece vocab of N >= 259 tokens", PS_CLI_I32,
         &p.n_vocab, 1, I},
        {"--name", "S", "general.name", PS_CLI_FN, &name, 0, 0, opt_copy},
        {"--seed", "N", "PRNG seed (default 1)", PS_CLI_FN, &p.seed, 0, 0, opt_u64},
        {0}};
    const ps_cli_opt *const tables[] = {opts, NULL};
    const ps_cli_cmd c = {"gen-model", "-o OUT.gguf [options]", GEN_ABOUT, tables};
    int prc = ps_cli_parse(&c, argc, argv);
    if (prc >= 0) return prc;
    if (tied && untied) {
        fprintf(stderr, "promptscore gen-model: --tied and --untied exclude each other\n");
        return 2;
    }
    if (tied) p.tied = true;
    if (untied) p.tied = false;
    if (rope_freqs) p.rope_freqs = true;
    if (pure && p.mix[0]) { /* every matrix in the mix's base type */
        p.type = ps_qmix_find(p.mix)->base;
        p.mix[0] = 0;
    }
    if (!out) {
        fprintf(stderr, "promptscore gen-model: -o OUT.gguf is required (promptscore gen-model "
                        "--help)\n");
        return 2;
    }
    const double t0 = ps_now_s();
    ps_error e;
    ps_status st = ps_genmodel_write(&p, out, &e);
    if (st != PS_OK) {
        fprintf(stderr, "promptscore gen-model: %s\n", e.message);
        return st == PS_ERR_INVALID_ARG ? 2 : 1;
    }
    const double secs = ps_now_s() - t0;
    FILE *f = fopen(out, "rb");
    long size = -1;
    if (f && fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (f) fclose(f);
    fprintf(stderr, "wrote %s: %s, %ld bytes in %.1f s\n", out, p.arch, size,
            secs);
    return 0;
}
