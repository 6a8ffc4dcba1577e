/*
 * download.c — `--hf REPO[:FILE]`: resumable GGUF downloads over libcurl into a cache folder.
 *
 * How: HEAD the file URL (following redirects, as the Hub answers with one to its CDN) to learn
 * the size; append to `<dest>.part`, asking for "Range: bytes=<have>-" when part of it is already
 * there (a server that answers 200 instead of 206 sends the whole file, so the .part restarts
 * from zero); when the transfer ends, the .part must have exactly the announced size before it is
 * renamed to <dest>. A failed or cut transfer leaves the .part for the next attempt. Without a
 * FILE, the repo listing (<endpoint>/api/models/<repo>, JSON) is fetched and a .gguf chosen:
 * Q8_0, then BF16, then F16, then the first; with REPO:TAG (no .gguf suffix, llama.cpp's
 * -hf repo:quant) the first .gguf whose name holds TAG. Nothing here prints; callbacks report progress.
 */
#include "front/download.h"
#include "front/json.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_ENDPOINT "https://huggingface.co"

ps_download_params ps_download_default_params(void) {
    ps_download_params p;
    memset(&p, 0, sizeof p);
    p.timeout_s = 30;
    return p;
}

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init_rc = CURLE_OK;
static void curl_init_once(void) { g_curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static void note(const ps_download_params *p, const char *fmt, ...) PS_PRINTF(2, 3);
static void note(const ps_download_params *p, const char *fmt, ...) {
    if (!p->note) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->note(p->ctx, msg);
}

/* A new easy handle with the options every request shares; headers get the auth line. */
static CURL *easy_new(const ps_download_params *p, const char *url, struct curl_slist **headers,
                      char *errbuf) {
    CURL *c = curl_easy_init();
    if (!c) return NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, p->timeout_s > 0 ? p->timeout_s : 30L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "promptscore/" PS_VERSION_STRING);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    /* a stalled transfer (under 1 byte/s for 60 s) is an error, the .part is kept */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    errbuf[0] = '\0';
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    *headers = NULL;
    const char *tok = getenv("HF_TOKEN");
    if (tok && *tok) {
        char line[1024];
        snprintf(line, sizeof line, "Authorization: Bearer %s", tok);
        *headers = curl_slist_append(NULL, line);
        if (*headers) curl_easy_setopt(c, CURLOPT_HTTPHEADER, *headers);
    }
    return c;
}

static ps_status curl_fail(ps_error *err, CURLcode rc, const char *errbuf, const char *url) {
    return ps_fail(err, PS_ERR_NETWORK, -1, "download of %s failed: %s", url,
                   errbuf && errbuf[0] ? errbuf : curl_easy_strerror(rc));
}

/* ---- in-memory GET (the repo listing) ---------------------------------------------------- */

static size_t mem_write(char *data, size_t size, size_t n, void *ctx) {
    ps_buf *b = ctx;
    ps_buf_append(b, data, size * n);
    return b->oom ? 0 : size * n;
}

static ps_status http_get_mem(const char *url, const ps_download_params *p, ps_buf *out,
                              ps_error *err) {
    char errbuf[CURL_ERROR_SIZE];
    struct curl_slist *hdr;
    CURL *c = easy_new(p, url, &hdr, errbuf);
    if (!c) return ps_fail(err, PS_ERR_NOMEM, -1, "curl_easy_init failed");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, mem_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdr);
    if (out->oom) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory reading %s", url);
    if (rc != CURLE_OK) return curl_fail(err, rc, errbuf, url);
    if (code >= 400)
        return ps_fail(err, PS_ERR_NETWORK, -1, "HTTP %ld from %s%s", code, url,
                       code == 401 || code == 403 ? " (gated or private: set HF_TOKEN)" : "");
    return PS_OK;
}

/* ---- file download ----------------------------------------------------------------------- */

typedef struct {
    FILE *f;
    CURL *curl;
    int64_t have;        /* bytes in the .part before this transfer */
    int64_t total;       /* expected file size, -1 when unknown */
    bool checked;        /* the response status was looked at */
    bool restarted;      /* a 200 answer to a Range request: started over */
    bool write_failed;
    const ps_download_params *p;
} dl_state;

static size_t file_write(char *data, size_t size, size_t n, void *ctx) {
    dl_state *s = ctx;
    if (!s->checked) {
        s->checked = true;
        long code = 0;
        curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &code);
        if (code >= 400) return 0; /* error bodies are not the file; status reported later */
        if (code == 200 && s->have > 0) { /* the server ignored Range: start over */
            if (fflush(s->f) != 0 || ftruncate(fileno(s->f), 0) != 0) {
                s->write_failed = true;
                return 0;
            }
            fseek(s->f, 0, SEEK_SET);
            s->have = 0;
            s->restarted = true;
        }
    }
    if (fwrite(data, size, n, s->f) != n) {
        s->write_failed = true;
        return 0;
    }
    return size * n;
}

static int file_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                         curl_off_t ulnow) {
    (void)ultotal;
    (void)ulnow;
    dl_state *s = ctx;
    if (s->p->progress) {
        int64_t total = s->total >= 0 ? s->total : (dltotal > 0 ? s->have + dltotal : -1);
        s->p->progress(s->p->ctx, s->have + dlnow, total);
    }
    return 0;
}

/* Creates every missing directory above `path` (the last component is a file). */
static ps_status make_parent_dirs(const char *path, ps_error *err) {
    char *tmp = ps_strdup(path);
    if (!tmp) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory");
    for (char *s = tmp + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) {
            ps_status st = ps_fail(err, PS_ERR_IO, -1, "cannot create directory %s: %s", tmp,
                                   strerror(errno));
            ps_free(tmp);
            return st;
        }
        *s = '/';
    }
    ps_free(tmp);
    return PS_OK;
}

/* HEAD: the file size (-1 when the server does not say). */
static ps_status head_size(const char *url, const ps_download_params *p, int64_t *size,
                           ps_error *err) {
    char errbuf[CURL_ERROR_SIZE];
    struct curl_slist *hdr;
    CURL *c = easy_new(p, url, &hdr, errbuf);
    if (!c) return ps_fail(err, PS_ERR_NOMEM, -1, "curl_easy_init failed");
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_off_t len = -1;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_getinfo(c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdr);
    if (rc != CURLE_OK) return curl_fail(err, rc, errbuf, url);
    if (code == 405 || code == 501) { /* no HEAD here: learn the size from the GET */
        *size = -1;
        return PS_OK;
    }
    if (code >= 400)
        return ps_fail(err, PS_ERR_NETWORK, -1, "HTTP %ld from %s%s", code, url,
                       code == 404   ? " (no such repo or file)"
                       : code == 401 || code == 403 ? " (gated or private: set HF_TOKEN)"
                                                    : "");
    *size = len >= 0 ? (int64_t)len : -1;
    return PS_OK;
}

ps_status ps_download_file(const char *url, const char *dest, const ps_download_params *params,
                           ps_error *err) {
    if (!url || !dest) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "url and dest are required");
    ps_download_params defaults = ps_download_default_params();
    const ps_download_params *p = params ? params : &defaults;
    pthread_once(&g_curl_once, curl_init_once);
    if (g_curl_init_rc != CURLE_OK)
        return ps_fail(err, PS_ERR_NETWORK, -1, "curl_global_init failed: %s",
                       curl_easy_strerror(g_curl_init_rc));

    ps_status st = make_parent_dirs(dest, err);
    if (st != PS_OK) return st;
    size_t dl = strlen(dest);
    char *part = ps_malloc(dl + 6);
    if (!part) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory");
    memcpy(part, dest, dl);
    memcpy(part + dl, ".part", 6);

    int64_t total = -1;
    st = head_size(url, p, &total, err);
    if (st != PS_OK) goto out;

    struct stat sb;
    int64_t have = stat(part, &sb) == 0 ? (int64_t)sb.st_size : 0;
    if (total >= 0 && have > total) { /* not the same file any more: start over */
        note(p, "discarding %s: %lld bytes, larger than the %lld announced", part,
             (long long)have, (long long)total);
        if (truncate(part, 0) != 0) {
            st = ps_fail(err, PS_ERR_IO, -1, "cannot truncate %s: %s", part, strerror(errno));
            goto out;
        }
        have = 0;
    }
    if (have > 0 && have != total)
        note(p, "resuming %s at byte %lld", part, (long long)have);

    if (total < 0 || have < total) {
        FILE *f = fopen(part, "ab");
        if (!f) {
            st = ps_fail(err, PS_ERR_IO, -1, "cannot open %s: %s", part, strerror(errno));
            goto out;
        }
        char errbuf[CURL_ERROR_SIZE];
        struct curl_slist *hdr;
        CURL *c = easy_new(p, url, &hdr, errbuf);
        if (!c) {
            fclose(f);
            st = ps_fail(err, PS_ERR_NOMEM, -1, "curl_easy_init failed");
            goto out;
        }
        dl_state s = {.f = f, .curl = c, .have = have, .total = total, .p = p};
        char range[32];
        if (have > 0) {
            snprintf(range, sizeof range, "%lld-", (long long)have);
            curl_easy_setopt(c, CURLOPT_RANGE, range);
        }
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, file_write);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, file_progress);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, &s);
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        CURLcode rc = curl_easy_perform(c);
        long code = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_cleanup(c);
        curl_slist_free_all(hdr);
        bool close_failed = fclose(f) != 0;
        if (s.write_failed || close_failed) {
            st = ps_fail(err, PS_ERR_IO, -1, "cannot write %s: %s", part, strerror(errno));
            goto out;
        }
        if (code == 416 && total < 0 && have > 0) {
            /* nothing past what we have and no size to check against: take it as complete */
        } else if (code >= 400) {
            st = ps_fail(err, PS_ERR_NETWORK, -1, "HTTP %ld from %s", code, url);
            goto out;
        } else if (rc != CURLE_OK) {
            st = curl_fail(err, rc, errbuf, url);
            goto out;
        }
        if (s.restarted) note(p, "the server ignored the Range request; downloaded from zero");
    }

    if (stat(part, &sb) != 0) {
        st = ps_fail(err, PS_ERR_IO, -1, "cannot stat %s: %s", part, strerror(errno));
        goto out;
    }
    if (total >= 0 && (int64_t)sb.st_size != total) {
        st = ps_fail(err, PS_ERR_NETWORK, -1,
                     "size mismatch for %s: received %lld bytes, the server announced %lld",
                     url, (long long)sb.st_size, (long long)total);
        if ((int64_t)sb.st_size > total) unlink(part);
        goto out;
    }
    if (rename(part, dest) != 0) {
        st = ps_fail(err, PS_ERR_IO, -1, "cannot rename %s to %s: %s", part, dest,
                     strerror(errno));
        goto out;
    }
    st = PS_OK;
out:
    ps_free(part);
    return st;
}

/* ---- picking a file from a listing ------------------------------------------------------- */

static bool ends_with_ci(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

static bool contains_ci(const char *s, const char *needle) {
    size_t m = strlen(needle);
    for (; *s; s++)
        if (strncasecmp(s, needle, m) == 0) return true;
    return false;
}

ps_status ps_hf_pick_gguf(const char *json, size_t len, char **file, ps_error *err) {
    return ps_hf_pick_gguf_tag(json, len, NULL, file, err);
}

ps_status ps_hf_pick_gguf_tag(const char *json, size_t len, const char *tag, char **file,
                              ps_error *err) {
    *file = NULL;
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    if (!root)
        return ps_fail(err, PS_ERR_FORMAT, je.position,
                       "the repo listing is not JSON: %s (line %d)", je.text, je.line);
    json_t *sib = json_object_get(root, "siblings");
    if (!json_is_array(sib)) {
        json_decref(root);
        return ps_fail(err, PS_ERR_FORMAT, -1, "the repo listing has no \"siblings\" array");
    }
    static const char *const default_prefs[] = {"Q8_0", "BF16", "F16"};
    const char *const *prefs = tag ? &tag : default_prefs;
    const size_t n_prefs = tag ? 1 : PS_ARRAY_LEN(default_prefs);
    const char *best = NULL;
    size_t best_rank = n_prefs + 1;
    size_t i;
    json_t *it;
    json_array_foreach(sib, i, it) {
        const char *name = json_string_value(json_object_get(it, "rfilename"));
        if (!name || !ends_with_ci(name, ".gguf")) continue;
        size_t rank = tag ? n_prefs + 1 : n_prefs; /* with a tag, only names holding it */
        for (size_t r = 0; r < n_prefs; r++)
            if (contains_ci(name, prefs[r])) {
                rank = r;
                break;
            }
        if (rank < best_rank) {
            best = name;
            best_rank = rank;
        }
    }
    ps_status st = PS_OK;
    if (!best && tag) {
        st = ps_fail(err, PS_ERR_NOT_FOUND, -1,
                     "the repo has no .gguf file with '%s' in its name (%zu files listed)", tag,
                     json_array_size(sib));
    } else if (!best) {
        st = ps_fail(err, PS_ERR_NOT_FOUND, -1,
                     "the repo has no .gguf file (%zu files listed); name one as REPO:FILE",
                     json_array_size(sib));
    } else {
        *file = ps_strdup(best);
        if (!*file) st = ps_fail(err, PS_ERR_NOMEM, -1, "out of memory");
    }
    json_decref(root);
    return st;
}

/* ---- REPO[:FILE] -> local path ----------------------------------------------------------- */

char *ps_download_cache_dir(const ps_download_params *params, ps_error *err) {
    const char *d = params ? params->cache_dir : NULL;
    if (d && *d) return ps_strdup(d);
    const char *e = getenv("PS_CACHE");
    if (e && *e) return ps_strdup(e);
    ps_buf b;
    ps_buf_init(&b);
    if ((e = getenv("XDG_CACHE_HOME")) && *e) {
        ps_buf_printf(&b, "%s/promptscore", e);
    } else if ((e = getenv("HOME")) && *e) {
        ps_buf_printf(&b, "%s/.cache/promptscore", e);
    } else {
        ps_fail(err, PS_ERR_INVALID_ARG, -1,
                "no cache directory: set PS_CACHE, XDG_CACHE_HOME or HOME");
        return NULL;
    }
    if (b.oom) {
        ps_buf_free(&b);
        ps_fail(err, PS_ERR_NOMEM, -1, "out of memory");
        return NULL;
    }
    return b.data;
}

/* A repo name or file path we are willing to put in a URL and under the cache: relative, no
 * empty, "." or ".." components, printable ASCII without spaces or URL specials. */
static bool safe_rel_path(const char *s, size_t n) {
    if (n == 0 || s[0] == '/' || s[n - 1] == '/') return false;
    size_t comp = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '/') {
            const char *c = s + i - comp;
            if (comp == 0 || (comp == 1 && c[0] == '.') || (comp == 2 && c[0] == '.' && c[1] == '.'))
                return false;
            comp = 0;
            continue;
        }
        unsigned char ch = (unsigned char)s[i];
        if (!(isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '+' || ch == '=' ||
              ch == ',' || ch == '@'))
            return false;
        comp++;
    }
    return true;
}

ps_status ps_hf_resolve(const char *spec, const ps_download_params *params, char **path,
                        ps_error *err) {
    *path = NULL;
    ps_download_params defaults = ps_download_default_params();
    const ps_download_params *p = params ? params : &defaults;
    if (!spec) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "no --hf spec");
    const char *colon = strchr(spec, ':');
    size_t repo_len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (!safe_rel_path(spec, repo_len))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "bad --hf repo '%.*s': expected OWNER/NAME[:FILE] with letters, digits, "
                       "'-', '_', '.'",
                       (int)PS_MIN(repo_len, 200), spec);
    if (colon && !safe_rel_path(colon + 1, strlen(colon + 1)))
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "bad --hf file '%s': expected a relative path inside the repo", colon + 1);

    const char *endpoint = p->endpoint;
    if (!endpoint || !*endpoint) endpoint = getenv("HF_ENDPOINT");
    if (!endpoint || !*endpoint) endpoint = DEFAULT_ENDPOINT;
    size_t el = strlen(endpoint);
    while (el > 0 && endpoint[el - 1] == '/') el--;

    ps_status st = PS_OK;
    char *file = NULL, *cache = NULL;
    ps_buf url, dest;
    ps_buf_init(&url);
    ps_buf_init(&dest);
    /* REPO:NAME.gguf names the file; REPO:TAG (no .gguf: "Q4_K_M", as llama.cpp's -hf spells
     * it) picks the listed .gguf whose name holds TAG */
    const char *tag = colon && !ends_with_ci(colon + 1, ".gguf") ? colon + 1 : NULL;
    if (colon && !tag) {
        file = ps_strdup(colon + 1);
        if (!file) {
            st = ps_fail(err, PS_ERR_NOMEM, -1, "out of memory");
            goto out;
        }
    } else {
        pthread_once(&g_curl_once, curl_init_once);
        ps_buf listing;
        ps_buf_init(&listing);
        ps_buf_printf(&url, "%.*s/api/models/%.*s", (int)el, endpoint, (int)repo_len, spec);
        if (url.oom) {
            st = ps_fail(err, PS_ERR_NOMEM, -1, "out of memory");
            goto out;
        }
        st = http_get_mem(url.data, p, &listing, err);
        if (st == PS_OK) st = ps_hf_pick_gguf_tag(listing.data ? listing.data : "", listing.len,
                                                  tag, &file, err);
        ps_buf_free(&listing);
        if (st != PS_OK) goto out;
        if (!safe_rel_path(file, strlen(file))) {
            st = ps_fail(err, PS_ERR_FORMAT, -1, "the repo listing names an unusable file '%s'",
                         file);
            goto out;
        }
        if (tag) note(p, "picked %s from %.*s (the first .gguf holding '%s')", file, (int)repo_len, spec, tag);
        else note(p, "picked %s from %.*s (preference: Q8_0, BF16, F16, first .gguf)", file,
                  (int)repo_len, spec);
    }

    ps_error cerr;
    ps_error_clear(&cerr);
    cache = ps_download_cache_dir(p, &cerr);
    if (!cache) {
        st = ps_fail(err, cerr.code ? cerr.code : PS_ERR_NOMEM, -1, "%s",
                     cerr.message[0] ? cerr.message : "out of memory");
        goto out;
    }
    ps_buf_printf(&dest, "%s/%.*s/%s", cache, (int)repo_len, spec, file);
    ps_buf_reset(&url);
    ps_buf_printf(&url, "%.*s/%.*s/resolve/main/%s", (int)el, endpoint, (int)repo_len, spec,
                  file);
    if (dest.oom || url.oom) {
        st = ps_fail(err, PS_ERR_NOMEM, -1, "out of memory");
        goto out;
    }
    struct stat sb;
    if (stat(dest.data, &sb) == 0 && S_ISREG(sb.st_mode)) {
        note(p, "using cached %s", dest.data);
    } else {
        note(p, "downloading %s", url.data);
        st = ps_download_file(url.data, dest.data, p, err);
        if (st != PS_OK) goto out;
    }
    *path = dest.data;
    dest.data = NULL;
out:
    ps_free(file);
    ps_free(cache);
    ps_buf_free(&url);
    ps_buf_free(&dest);
    return st;
}
