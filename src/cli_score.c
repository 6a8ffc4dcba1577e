/* src/cli_score.c — placeholder until this command is written. */
#include "cli.h"
#include <stdio.h>
int ps_cli_score(int argc, char **argv) { (void)argc; fprintf(stderr, "promptscore %s: not built yet\n", argv[0]); return 2; }
int ps_cli_perplexity(int argc, char **argv) { (void)argc; fprintf(stderr, "promptscore %s: not built yet\n", argv[0]); return 2; }
