/*
 * cli.c — main(): dispatches `promptscore <command> [options]` to the subcommands of cli.h.
 */
#include "cli/cli.h"
#include "base/impl.h"
#include "promptscore.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *USAGE =
    "promptscore " PS_VERSION_STRING " — exact prompt scoring for GGUF language models\n"
    "\n"
    "usage: promptscore <command> [options]   (promptscore <command> --help for its options)\n"
    "\n"
    "commands:\n"
    "  score        score prompts from JSON Lines: every token's logprob and top-K alternatives\n"
    "  perplexity   perplexity of a text (sliding windows, or llama-perplexity's chunks)\n"
    "  tokenize     text on stdin -> token ids\n"
    "  serve        OpenAI-compatible HTTP server (/v1/completions with echo + logprobs)\n"
    "  bench        scoring throughput and where the time goes\n"
    "  gen-model    write a GGUF model with deterministic random weights (for tests, benchmarks)\n"
    "  merge        the outputs of score --shard I/N back into one, in input order\n"
    "\n"
    "  --version    print the version\n"
    "  -h, --help   print this help\n"
    "\n"
    "Every command takes -h/--help and --version; exit status 0 ok, 1 an error while working,\n"
    "2 bad usage.\n";

void ps_cli_paths(char *buf, size_t size) {
    const ps_isa isa = ps_isa_best();
    const int env = ps_isa_env_amx();
    const bool amx = env != 0 && isa == PS_ISA_AVX512 && ps_cpu_has_amx();
    const char *bf16 = amx ? "amx-bf16 (tdpbf16ps)"
                       : isa == PS_ISA_AVX512 && ps_cpu_has_avx512bf16() ? "avx512-bf16 (vdpbf16ps)"
                                                                         : "bf16-rounded, f32 fma";
    const char *q8 = amx ? "amx-int8 (tdpbssd)"
                     : isa == PS_ISA_AVX512 && ps_cpu_has_avx512vnni() ? "avx512-vnni (vpdpbusd)"
                     : isa == PS_ISA_SCALAR ? "scalar int8" : "avx2 int8 (maddubs)";
    const char *blocks = amx && ps_cpu_has_avx512vnni() ? "amx-int8 (tdpbssd, tdpbusd)"
                         : isa == PS_ISA_AVX512 && ps_cpu_has_avx512vnni() ? "avx512-vnni"
                         : isa == PS_ISA_SCALAR ? "scalar int8" : "avx2 int8";
    snprintf(buf, size, "isa %s; bf16 %s, q8_0 %s, other block types %s; amx: %s",
             ps_isa_name(isa), bf16, q8, blocks, env == 0 ? "off (PS_ISA)" : ps_amx_status());
}

void ps_cli_print_version(void) {
    char paths[384];
    ps_cli_paths(paths, sizeof paths);
    printf("promptscore %s\nmatmul paths: %s\n", ps_version(), paths);
}

bool ps_cli_parse_act(const char *cmd, const char *value, ps_act *out) {
    if (value && !strcmp(value, "native")) *out = PS_ACT_NATIVE;
    else if (value && !strcmp(value, "f32")) *out = PS_ACT_F32;
    else {
        fprintf(stderr, "promptscore %s: --act wants native or f32, got %s%s%s\n", cmd,
                value ? "'" : "", value ? value : "nothing", value ? "'" : "");
        return false;
    }
    return true;
}

bool ps_cli_parse_kv_type(const char *cmd, const char *opt, const char *value, ps_kv_type *out) {
    if (value && !strcmp(value, "f32")) *out = PS_KV_F32;
    else if (value && !strcmp(value, "f16")) *out = PS_KV_F16;
    else if (value && !strcmp(value, "bf16")) *out = PS_KV_BF16;
    else if (value && !strcmp(value, "bf16-dot")) *out = PS_KV_BF16_DOT;
    else if (value && !strcmp(value, "f16-dot")) *out = PS_KV_F16_DOT;
    else {
        fprintf(stderr, "promptscore %s: %s wants f32, f16, bf16, bf16-dot or f16-dot, got %s%s%s\n", cmd,
                opt, value ? "'" : "", value ? value : "nothing", value ? "'" : "");
        return false;
    }
    return true;
}

char *ps_cli_read_all(FILE *f, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    for (;;) {
        if (n == cap) {
            char *p = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
            if (!p) {
                free(buf);
                return NULL;
            }
            buf = p;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs(USAGE, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        fputs(USAGE, stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V") || !strcmp(cmd, "version")) {
        ps_cli_print_version();
        return 0;
    }
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {
        {"score", ps_cli_score},         {"perplexity", ps_cli_perplexity},
        {"tokenize", ps_cli_tokenize},   {"serve", ps_cli_serve},
        {"bench", ps_cli_bench},         {"gen-model", ps_cli_gen_model},
        {"merge", ps_cli_merge},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(cmd, cmds[i].name)) return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "promptscore: unknown command '%s' (try --help)\n", cmd);
    return 2;
}
