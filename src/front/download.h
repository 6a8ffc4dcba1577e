/*
 * download.h — fetching a GGUF from a Hugging Face style endpoint for `--hf REPO[:FILE]`
 * (download.c, libcurl). Files land in a cache directory and are reused; an interrupted
 * download resumes from its `.part` file with an HTTP Range request; a finished file is
 * checked against the size the server announced before it is renamed into place.
 *
 *   URL of a file:   <endpoint>/<repo>/resolve/main/<file>
 *   repo listing:    <endpoint>/api/models/<repo>   (JSON; "siblings": [{"rfilename": ...}])
 *   endpoint:        params->endpoint, else $HF_ENDPOINT, else https://huggingface.co
 *   cache:           params->cache_dir, else $PS_CACHE, else $XDG_CACHE_HOME/promptscore,
 *                    else $HOME/.cache/promptscore;  file = <cache>/<repo>/<file>
 *   auth:            $HF_TOKEN, when set, is sent as "Authorization: Bearer ...".
 *
 * The library prints nothing: progress and notes go to the caller's callbacks.
 */
#ifndef PS_DOWNLOAD_H
#define PS_DOWNLOAD_H

#include "base/impl.h"

typedef struct {
    const char *endpoint;   /* NULL: $HF_ENDPOINT or https://huggingface.co */
    const char *cache_dir;  /* NULL: $PS_CACHE, $XDG_CACHE_HOME/promptscore, ~/.cache/... */
    /* Called now and then while bytes arrive: done and total bytes of the file (total -1 when
     * unknown; done includes bytes resumed from the .part). May be NULL. */
    void (*progress)(void *ctx, int64_t done, int64_t total);
    /* A human note ("resuming at 1.2 MB", "picked model-Q8_0.gguf"). May be NULL. */
    void (*note)(void *ctx, const char *msg);
    void *ctx;
    long timeout_s;         /* connect timeout in seconds; 0 = 30 */
} ps_download_params;

/* endpoint/cache_dir NULL, no callbacks, timeout 30 s. */
ps_download_params ps_download_default_params(void);

/* Downloads url into dest (resumable through dest + ".part"): HEAD for the size, GET with
 * "Range: bytes=N-" when a partial file exists (a 200 answer restarts from zero), size check,
 * rename. Returns PS_OK, PS_ERR_NETWORK (HTTP status or curl error, or a size mismatch — the
 * message says which, with the URL and the numbers), PS_ERR_IO, PS_ERR_NOMEM. */
ps_status ps_download_file(const char *url, const char *dest, const ps_download_params *params,
                           ps_error *err);

/* Picks the GGUF to use from a repo listing (the JSON of <endpoint>/api/models/<repo>):
 * among the "rfilename"s ending in .gguf, the first whose name contains Q8_0, else BF16, else
 * F16 (case-insensitive), else the first .gguf. *file is ps_malloc'd.
 * Returns PS_OK, PS_ERR_FORMAT (not JSON / no siblings), PS_ERR_NOT_FOUND (no .gguf),
 * PS_ERR_NOMEM. */
ps_status ps_hf_pick_gguf(const char *json, size_t len, char **file, ps_error *err);

/* The same with a tag (NULL: as above): the first .gguf whose name contains tag
 * (case-insensitive; "Q4_K_M"), PS_ERR_NOT_FOUND when none does. */
ps_status ps_hf_pick_gguf_tag(const char *json, size_t len, const char *tag, char **file,
                              ps_error *err);

/* The cache directory that params/environment name (ps_malloc'd), or NULL with err set. */
char *ps_download_cache_dir(const ps_download_params *params, ps_error *err);

/* Resolves `REPO[:FILE]` ("owner/name:path/in/repo.gguf") to a local file, downloading it when
 * the cache does not already hold it (a cached file is used as is, without network). Without
 * FILE the repo is listed and ps_hf_pick_gguf chooses (reported through note); `REPO:TAG`,
 * where TAG does not end in .gguf ("owner/name:Q4_K_M", as llama.cpp's -hf), lists the repo
 * and takes the first .gguf whose name holds TAG.
 * *path is ps_malloc'd. Returns PS_OK, PS_ERR_INVALID_ARG (a malformed spec: empty parts, "..",
 * absolute paths), and the errors of ps_download_file / ps_hf_pick_gguf. */
ps_status ps_hf_resolve(const char *spec, const ps_download_params *params, char **path,
                        ps_error *err);

#endif /* PS_DOWNLOAD_H */
