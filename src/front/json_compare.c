/*
 * json_compare.c — the "compare" array of a score compared with several models
 * (ps_score_params.compares): one object per compared model, in the order given,
 *     {"model": FILE, "kld": [...], "same_top1": [...], "dp": [...], "kld_mean": x,
 *      "same_top1_pct": y}
 * the arrays aligned with token_logprobs (null where it is null, before logprobs_from and on
 * generated entries), kld_mean and same_top1_pct over the prompt's scored positions 1 ..
 * n_prompt - 1 exactly as a single --compare's line totals (jsonl.c). The score command puts
 * it on the line, the server inside the logprobs object.
 */
#include "front/json.h"

#include <math.h>

void ps_json_compares(ps_buf *b, const ps_score_result *r, int32_t first, int32_t end,
                      int32_t values_from) {
    if (!r->n_compares || !r->compares) return;
    ps_buf_puts(b, ",\"compare\":[");
    for (int32_t c = 0; c < r->n_compares; c++) {
        const ps_score_compare *k = &r->compares[c];
        if (c) ps_buf_putc(b, ',');
        ps_buf_puts(b, "{\"model\":");
        ps_json_str(b, k->model ? k->model : "", k->model ? strlen(k->model) : 0);
        for (int a = 0; a < 3; a++) {
            ps_buf_puts(b, a == 0 ? ",\"kld\":[" : a == 1 ? ",\"same_top1\":[" : ",\"dp\":[");
            for (int32_t i = first; i < end; i++) {
                if (i > first) ps_buf_putc(b, ',');
                if (i < values_from || i >= r->n_prompt || isnan(r->logprobs[i]))
                    ps_buf_append(b, "null", 4);
                else if (a == 0)
                    ps_json_f32(b, k->kld[i]);
                else if (a == 1)
                    ps_buf_printf(b, "%d", (int)k->same_top1[i]);
                else
                    ps_json_f32(b, k->dp[i]);
            }
            ps_buf_putc(b, ']');
        }
        double kl = 0.0;
        int64_t same = 0;
        for (int32_t i = 1; i < r->n_prompt; i++) {
            kl += (double)k->kld[i];
            same += k->same_top1[i] == 1;
        }
        const int32_t m = r->n_prompt - 1;
        ps_buf_puts(b, ",\"kld_mean\":");
        ps_json_f64(b, m > 0 ? kl / m : NAN);
        ps_buf_puts(b, ",\"same_top1_pct\":");
        ps_json_f64(b, m > 0 ? 100.0 * (double)same / m : NAN);
        ps_buf_putc(b, '}');
    }
    ps_buf_putc(b, ']');
}
