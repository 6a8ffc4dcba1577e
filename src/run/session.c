/*
 * session.c — run state: sequences (KV cache, recurrent state, n_past), the workspace of a
 * forward pass (scratch for n_batch rows), reset / truncate, and the checked forward entry.
 *
 * A sequence is allocated for its own n_ctx: per KV-cached layer n_ctx positions (a sliding
 * layer: a ring of min(n_ctx, swa + n_batch - 1)) in attention.h's layout, plus the recurrent
 * state of the hybrid models (float32); the K/V elements are the session's kv_type (float32, or
 * IEEE half / bfloat16 at half the bytes, rounded once on write by attention.c). The workspace is sized by n_batch (rows per call) and the
 * session's n_ctx (the longest sequence: the attention scratch holds a block of score rows of
 * that length). ps_session_forward_segs checks a batch of segments, forward.c runs it, and each
 * sequence's n_past advances. The public single-sequence API runs on the session's own
 * sequence.
 */
#include "run/session.h"
#include "run/attention.h"
#include "run/forward.h"
#include "kernels/matmul_amx.h"
#include "base/testhooks.h"

#ifdef PS_TESTING
#include <pthread.h>

/* ps_test_forward_rows (testhooks.h): rows forwarded per model since the last reset */
static pthread_mutex_t fwd_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    const void *model;
    int64_t rows;
} fwd_rows[32];

void ps_test_forward_count_reset(void) {
    pthread_mutex_lock(&fwd_mu);
    memset(fwd_rows, 0, sizeof fwd_rows);
    pthread_mutex_unlock(&fwd_mu);
}

int64_t ps_test_forward_rows(const void *model) {
    int64_t r = 0;
    pthread_mutex_lock(&fwd_mu);
    for (int i = 0; i < 32; i++)
        if (fwd_rows[i].model == model) r = fwd_rows[i].rows;
    pthread_mutex_unlock(&fwd_mu);
    return r;
}

static void fwd_count(const void *model, int64_t rows) {
    pthread_mutex_lock(&fwd_mu);
    for (int i = 0; i < 32; i++)
        if (fwd_rows[i].model == model || !fwd_rows[i].model) {
            fwd_rows[i].model = model;
            fwd_rows[i].rows += rows;
            break;
        }
    pthread_mutex_unlock(&fwd_mu);
}
#endif

ps_session_params ps_session_default_params(void) {
    ps_session_params p;
    memset(&p, 0, sizeof p);
    p.n_ctx = 0;
    p.n_batch = PS_CHUNK;
    p.pool = NULL;
    p.isa = PS_ISA_AUTO;
    p.act = PS_ACT_NATIVE;
    p.kv_type = PS_KV_F32;
    return p;
}

const char *ps_kv_type_name(ps_kv_type type) {
    switch (type) {
    case PS_KV_F32: return "f32";
    case PS_KV_F16: return "f16";
    case PS_KV_BF16: return "bf16";
    case PS_KV_BF16_DOT: return "bf16-dot";
    case PS_KV_F16_DOT: return "f16-dot";
    }
    return "?";
}

/* PS_OK for a ps_kv_type this build knows (the ones ps_kv_type_name names), else
 * PS_ERR_INVALID_ARG saying which value. */
static ps_status check_kv_type(ps_kv_type t, ps_error *err) {
    if (strcmp(ps_kv_type_name(t), "?") != 0) return PS_OK;
    return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                   "kv_type = %d is not PS_KV_F32, PS_KV_F16, PS_KV_BF16, PS_KV_BF16_DOT or "
                   "PS_KV_F16_DOT",
                   (int)t);
}

/* a * b * c elements of elt bytes, 64-byte aligned; NULL on overflow or no memory. */
static void *alloc_elems(uint64_t a, uint64_t b, uint64_t c, uint64_t elt) {
    uint64_t n, bytes;
    if (!ps_mul_ok(a, b, &n) || !ps_mul_ok(n, c, &n) || !ps_mul_ok(n, elt, &bytes) ||
        bytes > SIZE_MAX)
        return NULL;
    return ps_aligned_alloc(64, (size_t)bytes);
}

/* a * b * c floats, 64-byte aligned; NULL on overflow or no memory. */
static float *alloc_floats(uint64_t a, uint64_t b, uint64_t c) {
    uint64_t n, bytes;
    if (!ps_mul_ok(a, b, &n) || !ps_mul_ok(n, c, &n) || !ps_mul_ok(n, sizeof(float), &bytes) ||
        bytes > SIZE_MAX)
        return NULL;
    return ps_aligned_alloc(64, (size_t)bytes);
}

/* ---- sequences ---- */

void ps_seq_free(ps_seq *q) {
    if (!q) return;
    ps_free(q->k_cache);
    ps_free(q->v_cache);
    ps_free(q->conv_state);
    ps_free(q->ssm_state);
    ps_free(q->kv_len);
    ps_free(q->k_off);
    ps_free(q->v_off);
    ps_free(q);
}

ps_status ps_seq_create(const ps_model *model, int32_t n_ctx, int32_t n_batch, ps_kv_type kv_type,
                        ps_seq **out, ps_error *err) {
    *out = NULL;
    if (n_ctx < 1 || n_ctx > PS_MAX_CTX)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "n_ctx = %d must be in 1..%d", (int)n_ctx,
                       PS_MAX_CTX);
    ps_status st = check_kv_type(kv_type, err);
    if (st != PS_OK) return st;
    const ps_hparams *hp = &model->hp;
    ps_seq *q = ps_calloc(1, sizeof *q);
    if (!q) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory (sequence)");
    q->model = model;
    q->n_ctx = n_ctx;
    q->kv_type = kv_type;
    q->kv_elt = (int32_t)ps_kv_elt(kv_type);
    const int64_t nkv = hp->n_head_kv, hd = hp->head_dim;
    /* per KV slot: n_ctx positions (global layers) or a ring of swa + n_batch - 1 (sliding
     * layers, when that is shorter); a hybrid model caches only its full-attention layers (at
     * least one buffer is allocated so that the checks below stay simple) */
    const uint64_t n_kv_layer = hp->n_layer_kv > 0 ? (uint64_t)hp->n_layer_kv : 1;
    q->kv_len = ps_calloc(n_kv_layer, sizeof *q->kv_len);
    q->k_off = ps_calloc(n_kv_layer + 1, sizeof *q->k_off);
    q->v_off = ps_calloc(n_kv_layer + 1, sizeof *q->v_off);
    bool ok = q->kv_len && q->k_off && q->v_off;
    uint64_t k_floats = 0, v_floats = 0, ring_floats = 0;
    for (int32_t l = 0; ok && l < hp->n_layer; l++) {
        const ps_layer *L = &model->w.layers[l];
        if (L->kv_slot < 0) continue;
        int64_t len = n_ctx;
        /* bf16-dot pairs keys by position (2i, 2i + 1): a ring of even length keeps each
         * pair in two neighbouring slots wherever it wraps */
        if (L->swa > 0) {
            int64_t ring = (int64_t)L->swa + n_batch - 1;
            if (kv_type == PS_KV_BF16_DOT) ring += ring & 1;
            len = PS_MIN(len, ring);
        }
        const uint64_t kf = ps_kv_k_floats(nkv, hd, len), vf = ps_kv_v_floats(nkv, hd, len);
        q->kv_len[L->kv_slot] = len;
        q->k_off[L->kv_slot] = (int64_t)k_floats;
        q->v_off[L->kv_slot] = (int64_t)v_floats;
        k_floats += kf;
        v_floats += vf;
        if (len < n_ctx) ring_floats += kf + vf;
    }
    if (hp->n_layer_kv == 0 && ok) {
        q->kv_len[0] = n_ctx;
        k_floats = ps_kv_k_floats(nkv, hd, n_ctx);
        v_floats = ps_kv_v_floats(nkv, hd, n_ctx);
    }
    q->k_cache = ok ? alloc_elems(k_floats, 1, 1, (uint64_t)q->kv_elt) : NULL;
    q->v_cache = ok ? alloc_elems(v_floats, 1, 1, (uint64_t)q->kv_elt) : NULL;
    /* the rings are read from a 16-key block's start, so a fresh one reads zeros, not garbage */
    if (q->k_cache && q->v_cache && ring_floats > 0)
        for (int32_t l = 0; l < hp->n_layer; l++) {
            const ps_layer *L = &model->w.layers[l];
            if (L->kv_slot < 0 || q->kv_len[L->kv_slot] >= n_ctx) continue;
            const int64_t len = q->kv_len[L->kv_slot];
            memset((uint8_t *)q->k_cache + (size_t)q->k_off[L->kv_slot] * (size_t)q->kv_elt, 0,
                   ps_kv_k_floats(nkv, hd, len) * (size_t)q->kv_elt);
            memset((uint8_t *)q->v_cache + (size_t)q->v_off[L->kv_slot] * (size_t)q->kv_elt, 0,
                   ps_kv_v_floats(nkv, hd, len) * (size_t)q->kv_elt);
        }
    q->kv_elems = (int64_t)(k_floats + v_floats);
    bool rs_ok = true;
    if (hp->info->flags & PS_A_HYBRID) {
        const uint64_t dk = (uint64_t)hp->ssm_d_state, nv = (uint64_t)hp->ssm_n_v,
                       dv = nv * dk, ch = 2 * (uint64_t)hp->ssm_n_k * dk + dv;
        const uint64_t nrs = hp->n_layer_rs > 0 ? (uint64_t)hp->n_layer_rs : 1;
        q->conv_state = alloc_floats(nrs, (uint64_t)(hp->ssm_d_conv - 1), ch);
        q->ssm_state = alloc_floats(nrs, dv, dk);
        rs_ok = q->conv_state && q->ssm_state;
    }
    if (!q->k_cache || !q->v_cache || !rs_ok) {
        double kv_mib = (double)(k_floats + v_floats) * (double)q->kv_elt / (1024.0 * 1024.0);
        ps_seq_free(q);
        return ps_fail(err, PS_ERR_NOMEM, -1,
                       "out of memory for a session of n_ctx %d (KV cache %.1f MiB)", (int)n_ctx,
                       kv_mib);
    }
    *out = q;
    return PS_OK;
}

/* ---- the workspace ---- */

/* The workspace's main buffers live in one allocation (s->ws), each at a 64-byte aligned
 * offset, so that another session of the same thread can run in the same memory
 * (ps_session_share_workspace). These are pure scratch: a forward call writes each before it
 * reads it, so nothing in them carries from one call to the next. */
#define WS_N PS_WS_BUFFERS
static float **ws_fields(ps_session *s, size_t i) {
    float **f[WS_N] = {&s->x, &s->xb, &s->ffn_out, &s->q,  &s->att,        &s->k,
                       &s->v, &s->hb, &s->hb2,     &s->mm_scratch, &s->att_scratch};
    return f[i];
}

/* Sets s->ws_floats and s->ws_len[] for rows nb; false on overflow. Each buffer is rows x
 * floats per row: nb activation rows, or one slot per thread for the two scratches. */
static bool ws_layout(ps_session *s, uint64_t nb, uint64_t n_embd, uint64_t dq, uint64_t dkv,
                      uint64_t ff_rows) {
    const uint64_t nt = (uint64_t)s->n_threads;
    const uint64_t shape[WS_N][2] = {{nb, n_embd}, {nb, n_embd}, {nb, n_embd}, {nb, dq},
                                     {nb, dq},     {nb, dkv},    {nb, dkv},    {nb, ff_rows},
                                     {nb, ff_rows}, {nt, s->mm_stride}, {nt, s->att_stride}};
    uint64_t total = 0;
    for (size_t i = 0; i < WS_N; i++) {
        uint64_t n;
        if (!ps_mul_ok(shape[i][0], shape[i][1], &n) || n > (UINT64_MAX >> 8)) return false;
        n = (n + 15) & ~(uint64_t)15; /* 64 bytes */
        s->ws_len[i] = n;
        total += n;
        if (total > SIZE_MAX / sizeof(float)) return false;
    }
    s->ws_floats = (size_t)total;
    return true;
}

/* Points the workspace buffers into base (ws_floats floats, 64-byte aligned). */
static void ws_carve(ps_session *s, float *base) {
    size_t off = 0;
    for (size_t i = 0; i < WS_N; i++) {
        *ws_fields(s, i) = base + off;
        off += (size_t)s->ws_len[i];
    }
}

bool ps_session_share_workspace(ps_session *s, const ps_session *lender) {
    if (!s || !lender || s == lender || lender->ws_borrowed || s->ws_borrowed ||
        lender->ws_floats < s->ws_floats || lender->n_threads < s->n_threads)
        return false;
    ps_free(s->ws);
    s->ws = lender->ws;
    s->ws_borrowed = true;
    ws_carve(s, s->ws);
    return true;
}

void ps_session_free(ps_session *s) {
    if (!s) return;
    float *bufs[] = {s->rope_cos,   s->rope_sin,    s->logits,     s->dn_qkv,    s->dn_conv,
                     s->dn_z,       s->dn_out,      s->dn_beta,    s->dn_alpha,  s->att_gate,
                     s->moe_logits, s->moe_w,       s->moe_x,      s->moe_g,     s->moe_u,
                     s->shexp_out,  s->rope_cos_swa, s->rope_sin_swa};
    for (size_t i = 0; i < PS_ARRAY_LEN(bufs); i++) ps_free(bufs[i]);
    if (!s->ws_borrowed) ps_free(s->ws);
    int32_t *ibufs[] = {s->moe_sel, s->moe_pos, s->moe_start, s->moe_fill, s->row_pos};
    for (size_t i = 0; i < PS_ARRAY_LEN(ibufs); i++) ps_free(ibufs[i]);
    ps_free(s->row_seq);
    ps_seq_free(s->seq);
    for (int32_t i = 0; i < s->n_seq_pool; i++) ps_seq_free(s->seq_pool[i]);
    ps_free(s->seq_pool);
    ps_free(s);
}

/* Long on purpose: the checks of the parameters, then one allocation after another of what a
 * session holds (each freed by ps_session_free on the way out), in the order the comments
 * give; there is no phase that stands alone. */
ps_status ps_session_create(const ps_model *model, const ps_session_params *params,
                            ps_session **out, ps_error *err) {
    ps_error_clear(err);
    if (!model || !out) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "model and out must be set");
    *out = NULL;
    if (model->info.vocab_only)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                       "the model was loaded vocab-only; sessions need its weights");
    ps_session_params defaults = ps_session_default_params();
    if (!params) params = &defaults;
    if (params->n_ctx < 0 || params->n_ctx > PS_MAX_CTX)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "n_ctx = %d is out of range (0..%d)",
                       (int)params->n_ctx, PS_MAX_CTX);
    if (params->n_batch < 1 || params->n_batch > PS_CHUNK)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "n_batch = %d is out of range (1..%d)",
                       (int)params->n_batch, PS_CHUNK);
    if (params->act != PS_ACT_NATIVE && params->act != PS_ACT_F32)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "act = %d is not PS_ACT_NATIVE or PS_ACT_F32",
                       (int)params->act);
    ps_status kst = check_kv_type(params->kv_type, err);
    if (kst != PS_OK) return kst;
    ps_isa isa = params->isa == PS_ISA_AUTO ? ps_isa_best() : params->isa;
    if (!ps_isa_supported(isa) || isa == PS_ISA_AUTO)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "isa %s is not available on this CPU (%s)",
                       ps_isa_name(params->isa),
                       isa == PS_ISA_AMX ? ps_amx_status() : "cpuid");
    /* AMX: asked for (PS_ISA_AMX, or PS_ISA=amx with AUTO), or by default where usable */
    const int env_amx = params->isa == PS_ISA_AUTO ? ps_isa_env_amx() : 0;
    if (env_amx == 2 && !ps_cpu_has_amx())
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "PS_ISA=amx: %s", ps_amx_status());
    const bool amx = isa == PS_ISA_AMX ||
                     (env_amx != 0 && isa == PS_ISA_AVX512 && ps_cpu_has_amx());
    if (isa == PS_ISA_AMX) isa = PS_ISA_AVX512;
    const ps_hparams *hp = &model->hp;
    ps_session *s = ps_calloc(1, sizeof *s);
    if (!s) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory (session)");
    s->model = model;
    s->n_ctx = params->n_ctx > 0 ? params->n_ctx : model->info.n_ctx;
    s->n_batch = params->n_batch;
    s->pool = params->pool;
    s->n_threads = ps_pool_size(params->pool);
    s->isa = isa;
    s->amx = amx;
    s->kv_type = params->kv_type;
    s->f32_act = params->act == PS_ACT_F32;
    if (s->n_ctx < 1) {
        ps_session_free(s);
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "n_ctx = %d must be >= 1", (int)s->n_ctx);
    }
    ps_status st = ps_seq_create(model, s->n_ctx, s->n_batch, s->kv_type, &s->seq, err);
    if (st != PS_OK) {
        ps_session_free(s);
        return st;
    }
    const uint64_t nb = (uint64_t)s->n_batch, dq = (uint64_t)hp->n_head * hp->head_dim,
                   dkv = (uint64_t)hp->n_head_kv * hp->head_dim;
    bool moe = false;
    for (int32_t l = 0; l < hp->n_layer; l++) moe = moe || (model->w.layers[l].feat & PS_L_FFN_MOE);
    int64_t max_in = PS_MAX(PS_MAX((int64_t)hp->n_embd, (int64_t)hp->n_ff), (int64_t)dq);
    max_in = PS_MAX(max_in, PS_MAX((int64_t)hp->n_ff_exp, (int64_t)hp->n_ff_shexp));
    bool hy_ok = true;
    if (hp->info->flags & PS_A_HYBRID) {
        const uint64_t dk = (uint64_t)hp->ssm_d_state, nv = (uint64_t)hp->ssm_n_v,
                       dv = nv * dk, ch = 2 * (uint64_t)hp->ssm_n_k * dk + dv;
        s->dn_qkv = alloc_floats(nb, PS_MAX(ch, 2 * dq), 1);
        s->dn_conv = alloc_floats(nb, ch, 1);
        s->dn_z = alloc_floats(nb, dv, 1);
        s->dn_out = alloc_floats(nb, dv, 1);
        s->dn_beta = alloc_floats(nb, nv, 1);
        s->dn_alpha = alloc_floats(nb, nv, 1);
        s->att_gate = alloc_floats(nb, dq, 1);
        hy_ok = s->dn_qkv && s->dn_conv && s->dn_z && s->dn_out && s->dn_beta && s->dn_alpha &&
                s->att_gate;
        max_in = PS_MAX(max_in, (int64_t)dv);
    }
    s->mm_stride = ps_matmul_scratch_floats(max_in);
    s->att_stride = ps_attention_scratch_floats(s->n_ctx, s->model->hp.head_dim);
    /* hb, hb2: the dense FFN's or the shared expert's hidden rows */
    const uint64_t ff_rows = (uint64_t)PS_MAX(PS_MAX(hp->n_ff, hp->n_ff_shexp), 1);
    const bool ws_ok = ws_layout(s, nb, hp->n_embd, dq, dkv, ff_rows) &&
                       (s->ws = alloc_floats(s->ws_floats, 1, 1)) != NULL;
    if (ws_ok) ws_carve(s, s->ws);
    bool moe_ok = true;
    if (hp->n_ff_shexp > 0) {
        s->shexp_out = alloc_floats(nb, hp->n_embd, 1);
        moe_ok = s->shexp_out != NULL;
    }
    if (moe) {
        const uint64_t E = (uint64_t)hp->n_expert, k = (uint64_t)hp->n_expert_used;
        s->moe_logits = alloc_floats(nb, E, 1);
        s->moe_w = alloc_floats(nb, k, 1);
        s->moe_x = alloc_floats(nb * k, hp->n_embd, 1);
        s->moe_g = alloc_floats(nb * k, hp->n_ff_exp, 1);
        s->moe_u = alloc_floats(nb * k, hp->n_ff_exp, 1);
        s->moe_sel = (int32_t *)alloc_floats(nb, k, 1); /* int32 and float are both 4 bytes */
        s->moe_pos = (int32_t *)alloc_floats(nb, k, 1);
        s->moe_start = (int32_t *)alloc_floats(E + 1, 1, 1);
        s->moe_fill = (int32_t *)alloc_floats(E + 1, 1, 1);
        moe_ok = moe_ok && s->moe_logits && s->moe_w && s->moe_x && s->moe_g && s->moe_u && s->moe_sel &&
                 s->moe_pos && s->moe_start && s->moe_fill;
    }
    s->rope_cos = alloc_floats(nb, (uint64_t)hp->n_rot / 2 + 1, 1);
    s->rope_sin = alloc_floats(nb, (uint64_t)hp->n_rot / 2 + 1, 1);
    bool rope_ok = true;
    if (hp->n_swa > 0 && (hp->rope_base_swa != hp->rope_base ||
                          hp->rope_freq_scale_swa != hp->rope_freq_scale)) {
        s->rope_cos_swa = alloc_floats(nb, (uint64_t)hp->n_rot / 2 + 1, 1);
        s->rope_sin_swa = alloc_floats(nb, (uint64_t)hp->n_rot / 2 + 1, 1);
        rope_ok = s->rope_cos_swa && s->rope_sin_swa;
    }
    s->row_pos = ps_calloc(nb, sizeof *s->row_pos);
    s->row_seq = ps_calloc(nb, sizeof *s->row_seq);
    if (!ws_ok || !s->x || !s->xb || !s->ffn_out || !s->q || !s->att || !s->k || !s->v || !s->hb ||
        !s->hb2 || !s->rope_cos || !s->rope_sin || !s->mm_scratch || !s->att_scratch ||
        !s->row_pos || !s->row_seq || !hy_ok || !moe_ok || !rope_ok) {
        int n_ctx = (int)s->n_ctx;
        double kv_mib = (double)s->seq->kv_elems * (double)s->seq->kv_elt / (1024.0 * 1024.0);
        ps_session_free(s);
        return ps_fail(err, PS_ERR_NOMEM, -1,
                       "out of memory for a session of n_ctx %d (KV cache %.1f MiB)", n_ctx,
                       kv_mib);
    }
    *out = s;
    return PS_OK;
}

float *ps_session_logits(ps_session *s, size_t rows) {
    uint64_t need;
    if (!ps_mul_ok((uint64_t)rows, (uint64_t)s->model->hp.n_vocab, &need) ||
        need > SIZE_MAX / sizeof(float))
        return NULL;
    if (s->logits_floats < need) {
        ps_free(s->logits);
        s->logits = ps_aligned_alloc(64, (size_t)need * sizeof(float));
        s->logits_floats = s->logits ? (size_t)need : 0;
    }
    return s->logits;
}

void ps_seq_touch(ps_seq *q) {
    if (!q || !q->k_cache || !q->v_cache) return;
    const ps_hparams *hp = &q->model->hp;
    const int64_t nkv = hp->n_head_kv, hd = hp->head_dim;
    const int32_t n_slots = hp->n_layer_kv > 0 ? hp->n_layer_kv : 1;
    for (int32_t l = 0; l < n_slots; l++) {
        const int64_t len = q->kv_len[l];
        memset((uint8_t *)q->k_cache + (size_t)q->k_off[l] * (size_t)q->kv_elt, 0,
               ps_kv_k_floats(nkv, hd, len) * (size_t)q->kv_elt);
        memset((uint8_t *)q->v_cache + (size_t)q->v_off[l] * (size_t)q->kv_elt, 0,
               ps_kv_v_floats(nkv, hd, len) * (size_t)q->kv_elt);
    }
}

ps_seq *ps_session_pool_seq(ps_session *s, int32_t i, int32_t n_ctx, ps_error *err) {
    if (i >= s->n_seq_pool) {
        ps_seq **grown = ps_realloc(s->seq_pool, (size_t)(i + 1) * sizeof *grown);
        if (!grown) {
            ps_fail(err, PS_ERR_NOMEM, -1, "out of memory (sequence list)");
            return NULL;
        }
        for (int32_t j = s->n_seq_pool; j <= i; j++) grown[j] = NULL;
        s->seq_pool = grown;
        s->n_seq_pool = i + 1;
    }
    ps_seq *q = s->seq_pool[i];
    if (q && q->n_ctx < n_ctx) {
        ps_seq_free(q);
        q = s->seq_pool[i] = NULL;
    }
    if (!q && ps_seq_create(s->model, n_ctx, s->n_batch, s->kv_type, &s->seq_pool[i], err) != PS_OK)
        return NULL;
    q = s->seq_pool[i];
    q->n_past = 0;
    return q;
}

/* ---- the single-sequence API ---- */

void ps_session_reset(ps_session *s) {
    if (s) s->seq->n_past = 0;
}

int32_t ps_session_n_past(const ps_session *s) { return s ? s->seq->n_past : 0; }

ps_status ps_session_truncate(ps_session *s, int32_t n_keep) {
    if (!s || n_keep < 0 || n_keep > s->seq->n_past) return PS_ERR_INVALID_ARG;
    const ps_seq *q = s->seq;
    /* a recurrent state holds every position at once: it can only start over */
    if (s->model->hp.n_layer_rs > 0 && n_keep != 0 && n_keep != q->n_past)
        return PS_ERR_UNSUPPORTED;
    /* a sliding layer's ring still holds the swa - 1 keys before n_keep only when at most
     * ring - swa + 1 positions are dropped */
    if (n_keep != 0 && n_keep != q->n_past)
        for (int32_t l = 0; l < s->model->hp.n_layer; l++) {
            const ps_layer *L = &s->model->w.layers[l];
            if (L->kv_slot < 0 || L->swa <= 0 || q->kv_len[L->kv_slot] >= q->n_ctx) continue;
            if ((int64_t)q->n_past - n_keep > q->kv_len[L->kv_slot] - L->swa + 1)
                return PS_ERR_UNSUPPORTED;
        }
    s->seq->n_past = n_keep;
    return PS_OK;
}

ps_status ps_session_forward_segs(ps_session *s, const ps_seg *segs, int32_t n_segs,
                                  float *logits, ps_error *err) {
    ps_error_clear(err);
    if (!s || !segs || n_segs < 1)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "session and segments must be set");
    const int32_t n_vocab = s->model->hp.n_vocab;
    int64_t rows = 0;
    for (int32_t si = 0; si < n_segs; si++) {
        const ps_seg *g = &segs[si];
        if (!g->seq || !g->tokens || g->seq->model != s->model || g->seq->n_ctx > s->n_ctx)
            return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                           "segment %d: a sequence of this session's model (n_ctx <= %d) and "
                           "tokens are required", (int)si, (int)s->n_ctx);
        if (g->n < 1 || g->n > s->n_batch - rows)
            return ps_fail(err, PS_ERR_INVALID_ARG, -1, "n_tokens = %d is out of range (1..%d)",
                           (int)g->n, (int)(s->n_batch - rows));
        for (int32_t j = 0; j < si; j++)
            if (segs[j].seq == g->seq)
                return ps_fail(err, PS_ERR_INVALID_ARG, -1,
                               "segments %d and %d run the same sequence", (int)j, (int)si);
        for (int32_t i = 0; i < g->n; i++)
            if (g->tokens[i] < 0 || g->tokens[i] >= n_vocab)
                return ps_fail(err, PS_ERR_TOKEN_RANGE, -1,
                               "token %d at index %d is outside the vocabulary [0, %d)",
                               (int)g->tokens[i], (int)i, (int)n_vocab);
        if ((int64_t)g->seq->n_past + g->n > g->seq->n_ctx)
            return ps_fail(err, PS_ERR_CONTEXT, -1,
                           "%d cached + %d new positions exceed the context of %d",
                           (int)g->seq->n_past, (int)g->n, (int)g->seq->n_ctx);
        rows += g->n;
    }
    ps_forward_run(s, segs, n_segs, logits);
#ifdef PS_TESTING
    fwd_count(s->model, rows);
#endif
    for (int32_t si = 0; si < n_segs; si++) segs[si].seq->n_past += segs[si].n;
    return PS_OK;
}

ps_status ps_session_forward(ps_session *s, const int32_t *tokens, int32_t n_tokens,
                             float *logits, ps_error *err) {
    ps_error_clear(err);
    if (!s || !tokens) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "session and tokens must be set");
    const ps_seg seg = {s->seq, tokens, n_tokens};
    return ps_session_forward_segs(s, &seg, 1, logits, err);
}
