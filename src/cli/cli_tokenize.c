/*
 * cli_tokenize.c — `promptscore tokenize -m MODEL.gguf [--no-bos] [--no-parse-special] [--json]`:
 * reads all of stdin as bytes (nothing stripped, NULs and invalid UTF-8 included), tokenizes it
 * with the model's tokenizer (special-token text recognised unless --no-parse-special: the
 * policy of score and the server, docs/api.md) and prints the ids on one line, space-separated, or as a JSON
 * array with --json. The model is loaded vocab-only, so vocabulary-only GGUF files work and
 * weights are never touched. With --pieces, each id is followed by its bytes as a JSON string
 * (one token per line), to see how the text was cut.
 */
#include "cli/cli.h"
#include "promptscore.h"
#include "model/vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *ABOUT =
    "Reads text from stdin exactly as given (no newline is stripped) and prints its token ids\n"
    "on one line, space-separated. Vocabulary-only GGUF files work.\n";

/* Prints bytes as a JSON string (invalid UTF-8 bytes as \u00XX escapes of the byte value,
 * so that nothing is lost). */
static void print_json_bytes(const char *s, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c < 0x20 || c >= 0x80) {
            /* keep well-formed multi-byte UTF-8 as is */
            size_t len = c >= 0xF0 && c < 0xF5 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
            bool ok = c >= 0x80 && len && i + len <= n;
            for (size_t k = 1; ok && k < len; k++) ok = ((unsigned char)s[i + k] & 0xC0) == 0x80;
            if (ok) {
                fwrite(s + i, 1, len, stdout);
                i += len - 1;
            } else {
                printf("\\u%04x", c);
            }
        } else {
            putchar(c);
        }
    }
    putchar('"');
}

int ps_cli_tokenize(int argc, char **argv) {
    ps_cli_model_opts o = {0};
    bool no_bos = false, special = false, no_special = false, json = false, pieces = false;
    const ps_cli_opt model_opts[] = {PS_CLI_OPTS_MODEL(&o), {0}};
    const ps_cli_opt tok_opts[] = {
        {"--no-bos", NULL, "do not add BOS (by default BOS is added when the model asks for it)",
         PS_CLI_FLAG, &no_bos},
        {"--parse-special", NULL, "text of control tokens (\"<s>\", \"<|endoftext|>\") becomes\n"
         "those tokens (the default, as in score and the server)", PS_CLI_FLAG, &special},
        {"--no-parse-special", NULL, "control-token text stays plain text", PS_CLI_FLAG,
         &no_special},
        {"--json", NULL, "print a JSON array of ids", PS_CLI_FLAG, &json},
        {"--pieces", NULL, "print one token per line: id, then its bytes as a JSON string",
         PS_CLI_FLAG, &pieces},
        {0}};
    const ps_cli_opt *const tables[] = {model_opts, tok_opts, NULL};
    const ps_cli_cmd c = {"tokenize", "-m MODEL.gguf [--no-bos] [--no-parse-special] [--json | --pieces]",
                          ABOUT, tables};
    int prc = ps_cli_parse(&c, argc, argv);
    if (prc >= 0) return prc;
    bool bos = !no_bos;
    if (special && no_special) {
        fprintf(stderr, "promptscore tokenize: --parse-special and --no-parse-special exclude each other\n");
        return 2;
    }
    special = !no_special;
    if (json && pieces) {
        fprintf(stderr, "promptscore tokenize: --json and --pieces exclude each other\n");
        return 2;
    }
    ps_cli_loaded l;
    int lrc = ps_cli_load("tokenize", &o, true, &l);
    if (lrc) return lrc;
    ps_model *model = l.model;
    ps_error err;
    ps_status st;
    const ps_vocab *vocab = ps_model_vocab(model);

    size_t len = 0;
    char *text = ps_cli_read_all(stdin, &len);
    if (!text) {
        fprintf(stderr, "promptscore tokenize: cannot read stdin (out of memory or read error)\n");
        ps_cli_unload(&l);
        return 1;
    }
    int rc = 0;
    int32_t n_ids = 0, *ids = NULL;
    st = ps_vocab_tokenize_alloc(vocab, text, len, bos, special, &ids, &n_ids, &err);
    if (st != PS_OK) {
        fprintf(stderr, "promptscore tokenize: %s\n", err.message);
        rc = 1;
    } else if (pieces) {
        for (int32_t i = 0; i < n_ids; i++) {
            const char *b;
            size_t bl;
            ps_vocab_token_bytes(vocab, ids[i], &b, &bl);
            printf("%d\t", ids[i]);
            print_json_bytes(b, bl);
            putchar('\n');
        }
    } else {
        if (json) putchar('[');
        for (int32_t i = 0; i < n_ids; i++) printf(i ? (json ? ",%d" : " %d") : "%d", ids[i]);
        if (json) putchar(']');
        putchar('\n');
    }
    if (fflush(stdout) != 0) {
        fprintf(stderr, "promptscore tokenize: cannot write stdout\n");
        rc = 1;
    }
    ps_free(ids);
    free(text);
    ps_cli_unload(&l);
    return rc;
}
