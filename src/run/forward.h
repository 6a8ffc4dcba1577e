/*
 * forward.h — the layer graph over one batch of rows (forward.c).
 */
#ifndef PS_FORWARD_H
#define PS_FORWARD_H

#include "run/state.h"

/* Runs the segments' tokens (already validated by ps_session_forward_segs: rows in all 1..
 * n_batch, each at its sequence's next positions) through the model: appends their K/V (and
 * recurrent state) to their sequences and writes logits (rows, n_vocab), segment after segment,
 * when not NULL. Does not advance n_past. */
void ps_forward_run(ps_session *s, const ps_seg *segs, int32_t n_segs, float *logits);

#endif /* PS_FORWARD_H */
