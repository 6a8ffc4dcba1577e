/*
 * cli.h — the subcommands of the `promptscore` binary. Each lives in its own src/cli_*.c file
 * and takes the arguments after the subcommand name (argv[0] is the subcommand). Each returns
 * the process exit status: 0 ok, 1 a failure while working, 2 bad usage.
 */
#ifndef PS_CLI_H
#define PS_CLI_H

int ps_cli_score(int argc, char **argv);      /* cli_score.c */
int ps_cli_perplexity(int argc, char **argv); /* cli_score.c */
int ps_cli_tokenize(int argc, char **argv);   /* cli_tokenize.c */
int ps_cli_serve(int argc, char **argv);      /* cli_serve.c */
int ps_cli_bench(int argc, char **argv);      /* cli_bench.c */
int ps_cli_gen_model(int argc, char **argv);  /* cli_gen.c */
int ps_cli_merge(int argc, char **argv);      /* cli_merge.c */

#include <stdio.h>

#include "promptscore.h"

/* The value of the --act option of score, perplexity, serve and bench: "native" or "f32" ->
 * *out. Anything else (or no value) prints "promptscore CMD: --act wants native or f32, got
 * ..." to stderr and returns false, *out unchanged. (cli.c) */
bool ps_cli_parse_act(const char *cmd, const char *value, ps_act *out);
#define PS_CLI_ACT_HELP                                                                        \
    "  --act native|f32     activations of the matrix products: native (default, as llama.cpp:\n" \
    "                       bf16 for BF16 weights, Q8_0 blocks for Q8_0 weights) or f32 (float32\n" \
    "                       for every weight type: closest to float64, slower; part of the score)\n"

/* One line naming the matrix kernels a session created now (PS_ISA as set, the CPU as it is)
 * uses for BF16 and Q8_0 weights with native activations, and whether AMX is on, and if not
 * why, e.g. "bf16 amx-bf16 (tdpbf16ps), q8_0 amx-int8 (tdpbssd); amx: amx-bf16, amx-int8".
 * Printed by --version and bench. (cli.c) */
void ps_cli_paths(char *buf, size_t size);
#define PS_CLI_REPACK_HELP                                                                     \
    "  --no-repack          no AMX tile copy of BF16 weights at load (the AMX kernel builds the\n" \
    "                       tiles per call: same scores, less memory, slower)\n"

/* Reads all of f into a malloc'd buffer (free with free()); *len bytes, any content. NULL on a
 * read error or when memory runs out. (cli.c) */
char *ps_cli_read_all(FILE *f, size_t *len);

#endif
