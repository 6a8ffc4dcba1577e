#!/usr/bin/python3
"""forward.py - an independent float64 reference forward pass for promptscore's tests.

It shares no code with the C library: it reads the GGUF file itself (header, metadata, tensor
infos, data; F32/F16/BF16/Q8_0 dequantised exactly into float64, the other types -- Q4_0 ..
Q5_1, Q2_K .. Q6_K, IQ4_NL, IQ4_XS, MXFP4 -- by dequant.py into the float32 values ggml's
dequantisation gives, then widened) and runs the llama, qwen2 and qwen3 architectures and the
mixture-of-experts ones (qwen3moe; llama with expert_count > 0, the Mixtral layout) the way
llama.cpp defines them, over the whole prompt at once (no KV cache, no chunks), in float64:

  x = token_embd[ids]
  per layer:  h = rmsnorm(x) * attn_norm
              q, k, v = Wq h (+bq), Wk h (+bk), Wv h (+bv)        (qwen2 has the biases)
              qwen3: q, k = rmsnorm per head * attn_q_norm / attn_k_norm
              q, k = rope(q), rope(k)   llama: adjacent pairs (x[2i], x[2i+1]);
                                        qwen2/qwen3: neox, (x[i], x[i + n_rot/2]);
                                        theta_i = pos * base^(-2i/n_rot) / rope_freqs[i]
                                        (or LongRoPE's long/short factors), scaled linearly
                                        or by YaRN (Model.rope_scaling)
              x += Wo softmax_causal(q k^T / sqrt(head_dim)) v     (GQA: head h reads kv head
                                                                    h // (n_head / n_head_kv))
              x += Wdown (silu(Wgate h2) * Wup h2),  h2 = rmsnorm(x) * ffn_norm
              experts (the layer has ffn_gate_inp): p = softmax(Wgate_inp h2) over all experts,
              the k = expert_used_count largest (ties: lower id), w = p[chosen] / sum (unless
              expert_weights_norm is false), x += sum_j w_j Wdown_e (silu(Wgate_e h2) * Wup_e h2)
              with the 3-D ffn_{gate,up,down}_exps tensors, matrix e = [e]
  logits = output (rmsnorm(x) * output_norm)       (output = token_embd when the file has none)
           (+ output.bias when the file has it)
olmo2 (forward_olmo2): no input norms, q/k RMSNorm over the whole projection, the attention
and FFN outputs RMS-normed before their residual adds.
phi3: q, k, v are the row ranges of one attn_qkv (or separate tensors), ffn_up holds the gate
rows then the up rows (no ffn_gate), the rope pairing is neox; Phi-3 also scales q by
1/sqrt(head_dim) before q k^T, which in float64 is the same as scaling the scores.

gpt-oss (llama.cpp's openai-moe; see forward_oai and experts_oai): q/k/v/o biases, a learned
sink logit per head in every attention softmax's denominator, sliding layers (even ones by
default) over the last attention.sliding_window positions, post_attention_norm before the
experts, which are biased, gated by a softmax over the top k logits, with the clamped SwiGLU
(alpha 1.702, limit 7, (up + 1)). Any file's experts may come as a merged ffn_gate_up_exps.

qwen35 (Qwen3.5 / 3.6 hybrid, llama.cpp's definition; see forward_hybrid): layer l is gated
full attention when (l + 1) % full_attention_interval == 0, else Gated DeltaNet; the FFN input
norm is post_attention_norm; nextn_predict_layers trailing MTP blocks are not run. qwen35moe:
the FFN is the experts (as above) plus a shared expert, sigmoid(ffn_gate_inp_shexp . h2) *
Wdown_shexp (silu(Wgate_shexp h2) * Wup_shexp h2).

gemma / gemma2 / gemma3 (llama.cpp's definition; see gemma_hparams): x = token_embd[ids] *
sqrt(n_embd); q k^T * attn_scale, soft-capped tanh(s / c) c (gemma2), masked to the layer's
sliding window (the query at p sees p-W+1 .. p) on sliding layers, whose rope has its own base
(gemma3); x += rmsnorm(attn, post_attention_norm); x += rmsnorm(Wdown (gelu_tanh(Wgate h2) *
Wup h2), post_ffw_norm) (gemma 1 has no post-norms); logits soft-capped tanh(z / c) c.

Weights in numpy are (ne[1], ne[0]) arrays, so y = W @ x for a GGUF matrix of ne = {in, out}.

--q8-act mirrors llama.cpp's Q8_0 matrix product: the activation row is quantised to Q8_0
(blocks of 32, d = amax/127 stored as f16, q = round-half-away(x / d)) before it is multiplied
with a Q8_0 weight. Without it, Q8_0 weights are exact and activations stay float64.
--bf16-act likewise mirrors the BF16 product of llama.cpp and promptscore's default: the
activation row is rounded to float32, then to bfloat16 (nearest even) before it meets a BF16
weight. --native-act does all of those and also rounds the row to float32, then to half, before
an F16 weight (llama.cpp's F16 products take f16 on both sides).
--kv-type f16|bf16 mirrors promptscore's half-precision K/V cache: every attention layer's keys
(after the norms and RoPE) and values are rounded to float32, then to IEEE half or bfloat16
(nearest even), before attention reads them; everything else stays float64 (the hybrids'
recurrent state too). --kv-type bf16-dot rounds K and V as bf16 does and also the two other
operands of attention's products: each query (phi3: the query times its scale, as promptscore
scales it first) and each row of softmax probabilities, rounded to float32, then to bfloat16;
the sums themselves stay float64. --kv-type f16-dot does the same with IEEE half (K and V as
f16 does; each query and each row of probabilities rounded to float32, then to half).

usage:
  forward.py MODEL.gguf --tokens 1,2,3 [--out logits.f64]   raw little-endian float64, T x n_vocab
  forward.py MODEL.gguf --tokens-file ids.txt --out logits.f64
  forward.py MODEL.gguf --tokens 1,2,3 --nll                teacher-forced NLL of the list
  forward.py MODEL.gguf --tokens 1 --greedy 60              greedy continuation ids
  forward.py stories260K.gguf --check-stories GOLDEN.txt    checks the NLLs and greedy ids
  forward.py MODEL.gguf --tokens 1,2,3 --stats [--compare OTHER.gguf]
      one JSON line per scored position i >= 1: entropy (nats, -sum p log p of the whole
      distribution after tokens[0..i-1]), varentropy (sum p (log p + entropy)^2, two passes),
      logprob (of tokens[i]), rank (1-based, of tokens[i], equal logits by ascending id), and
      with --compare: kld = KL(MODEL || OTHER) over the whole vocabulary, same_top1 (argmax,
      ties by the lowest id), dp = p_OTHER(tokens[i]) - p_MODEL(tokens[i]) and logprob_other
Needs numpy (run with /usr/bin/python3).
"""
import argparse
import struct
import sys

import numpy as np

import dequant  # tests/reference/dequant.py: the quantised weight types

# ---------------------------------------------------------------- minimal GGUF reader
GGML_F32, GGML_F16, GGML_Q8_0, GGML_BF16 = 0, 1, 8, 30

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
           10: "<Q", 11: "<q", 12: "<d"}


class Reader:
    def __init__(self, buf):
        self.buf = buf
        self.pos = 0

    def unpack(self, fmt):
        v = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return v[0]

    def string(self):
        n = self.unpack("<Q")
        s = bytes(self.buf[self.pos:self.pos + n])
        if len(s) != n:
            raise ValueError("string past end of file at %d" % self.pos)
        self.pos += n
        return s.decode("utf-8", errors="surrogateescape")

    def value(self, t):
        if t in _SCALAR:
            return self.unpack(_SCALAR[t])
        if t == 8:
            return self.string()
        if t == 9:
            et = self.unpack("<I")
            n = self.unpack("<Q")
            if et in _SCALAR and et != 7:
                dt = np.dtype(_SCALAR[et])
                a = np.frombuffer(self.buf, dtype=dt, count=n, offset=self.pos)
                self.pos += n * dt.itemsize
                return a
            return [self.value(et) for _ in range(n)]
        raise ValueError("unknown GGUF value type %d" % t)


def read_gguf(path):
    """Returns (metadata dict, {name: float64 ndarray of shape reversed(ne)})."""
    with open(path, "rb") as f:
        buf = f.read()
    r = Reader(buf)
    if buf[:4] != b"GGUF":
        raise ValueError("%s: not a GGUF file" % path)
    r.pos = 4
    version = r.unpack("<I")
    if version not in (2, 3):
        raise ValueError("%s: GGUF version %d" % (path, version))
    n_tensors = r.unpack("<Q")
    n_kv = r.unpack("<Q")
    kv = {}
    for _ in range(n_kv):
        key = r.string()
        kv[key] = r.value(r.unpack("<I"))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        n_dims = r.unpack("<I")
        ne = [r.unpack("<Q") for _ in range(n_dims)]
        ttype = r.unpack("<I")
        off = r.unpack("<Q")
        infos.append((name, ne, ttype, off))
    align = int(kv.get("general.alignment", 32))
    data_start = (r.pos + align - 1) // align * align
    kv["__tensor_infos__"] = (data_start, infos)  # for read_block_mins
    tensors = {}
    for name, ne, ttype, off in infos:
        n = int(np.prod(ne))
        start = data_start + off
        if ttype == GGML_F32:
            a = np.frombuffer(buf, "<f4", n, start).astype(np.float64)
        elif ttype == GGML_F16:
            a = np.frombuffer(buf, "<f2", n, start).astype(np.float64)
        elif ttype == GGML_BF16:
            u = np.frombuffer(buf, "<u2", n, start).astype(np.uint32) << 16
            a = u.view(np.float32).astype(np.float64)
        elif ttype == GGML_Q8_0:
            if ne[0] % 32:
                raise ValueError("%s: Q8_0 row of %d" % (name, ne[0]))
            blk = np.dtype([("d", "<f2"), ("qs", "i1", 32)])
            b = np.frombuffer(buf, blk, n // 32, start)
            a = (b["d"].astype(np.float64)[:, None] * b["qs"].astype(np.float64)).reshape(-1)
        else:
            # every other weight type: dequant.py (float32 values, bitwise ggml's), widened
            if ne[0] % dequant.TYPES.get(ttype, (None, 1))[1]:
                raise ValueError("%s: row of %d is not whole blocks" % (name, ne[0]))
            a = dequant.dequant(ttype, buf, start, n).astype(np.float64)
        if a.size != n:
            raise ValueError("%s: data past end of file" % name)
        tensors[name] = (a.reshape(list(reversed(ne))), ttype)
    return kv, tensors


def read_block_mins(buf, kv, name, expert=None):
    """The f16 min m of every block of 32 of the Q4_1 / Q5_1 tensor `name` (bytes 2..3 of each
    block of 20 / 24 bytes), as float64 of shape (rows, ne[0] / 32); expert e: matrix [e]."""
    data_start, infos = kv["__tensor_infos__"]
    for tname, ne, ttype, off in infos:
        if tname != name:
            continue
        if ttype not in (GGML_Q4_1, GGML_Q5_1):
            raise ValueError("%s: not Q4_1 / Q5_1" % name)
        bb = 20 if ttype == GGML_Q4_1 else 24
        nb = int(np.prod(ne)) // 32
        raw = np.frombuffer(buf, np.uint8, nb * bb, data_start + off).reshape(nb, bb)
        m = raw[:, 2:4].copy().view("<f2").astype(np.float64).reshape(-1)
        m = m.reshape(list(reversed(ne[1:])) + [ne[0] // 32])
        return m[expert] if expert is not None else m
    raise ValueError("%s: no such tensor" % name)


# ---------------------------------------------------------------- the model
def f16_round(x):
    return np.float64(np.float16(x))


def quantize_q8_0_rows(x):
    """llama.cpp's quantize_row_q8_0 applied to every row of x (..., n), n % 32 == 0, in the
    arithmetic of its scalar reference (float32): d = amax / 127, id = 1/d, q = roundf(x*id),
    the stored scale is f16(d). Returns the dequantised rows (float64)."""
    shp = x.shape
    b = x.astype(np.float32).reshape(-1, 32)
    amax = np.max(np.abs(b), axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idd = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), np.float32(0)).astype(np.float32)
    v = (b * idd[:, None]).astype(np.float32)
    q = np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))  # roundf: half away from zero
    dh = d.astype(np.float16).astype(np.float64)
    return (q.astype(np.float64) * dh[:, None]).reshape(shp)


def quantize_q8_k_rows(x):
    """llama.cpp's quantize_row_q8_K_ref on every row of x (..., n), n % 256 == 0, float32:
    max = the first element of largest |x| (sign kept), iscale = -127 / max, q = min(127,
    nearest_int(iscale * x)) (ties to even, as its 1.5 * 2^23 trick), d = 1 / iscale; an
    all-zero block has d = 0. Returns the dequantised rows q * d (float64)."""
    shp = x.shape
    b = x.astype(np.float32).reshape(-1, 256)
    i = np.argmax(np.abs(b), axis=1)  # the first index of the largest magnitude
    mx = b[np.arange(b.shape[0]), i]
    nz = mx != 0
    iscale = np.where(nz, np.float32(-127) / np.where(nz, mx, 1), np.float32(0)).astype(np.float32)
    q = np.minimum(np.rint((b * iscale[:, None]).astype(np.float32)), 127)
    d = np.where(nz, np.float32(1) / np.where(nz, iscale, 1), np.float32(0)).astype(np.float32)
    return (q.astype(np.float64) * d.astype(np.float64)[:, None]).reshape(shp)


def q8_1_sums(x):
    """Q8_1's s per block of 32 (llama.cpp's quantize_row_q8_1_ref): f16(sum q * amax / 127)
    with q as quantize_q8_0_rows rounds them; shape (..., n / 32)."""
    b = x.astype(np.float32).reshape(-1, 32)
    amax = np.max(np.abs(b), axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idd = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), np.float32(0)).astype(np.float32)
    v = (b * idd[:, None]).astype(np.float32)
    q = np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))
    s = (q.sum(axis=1).astype(np.float32) * d).astype(np.float32).astype(np.float16)
    return s.astype(np.float64).reshape(x.shape[:-1] + (x.shape[-1] // 32,))


# ggml type -> the activation type llama.cpp quantises to for it (its vec_dot_type)
GGML_Q4_0, GGML_Q4_1, GGML_Q5_0, GGML_Q5_1 = 2, 3, 6, 7
NATIVE_ACT = {GGML_Q8_0: "q8_0", GGML_Q4_0: "q8_0", GGML_Q5_0: "q8_0", 20: "q8_0", 39: "q8_0",
              GGML_Q4_1: "q8_1", GGML_Q5_1: "q8_1", 10: "q8_k", 11: "q8_k", 12: "q8_k",
              13: "q8_k", 14: "q8_k", 23: "q8_k", GGML_BF16: "bf16", GGML_F16: "f16"}


def round_bf16_rows(x):
    """x rounded to float32, then to bfloat16 (round to nearest even on the bits, as
    ps_f32_to_bf16), returned as float64. Finite inputs only (activations here are finite)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


class Model:
    def __init__(self, path, q8_act=False, bf16_act=False, native_act=False, n_ctx=0, swa=0,
                 kv_type="f32"):
        self.kv, self.t = read_gguf(path)
        self.native_act = native_act
        self.kv_type = kv_type
        self.buf_path = path
        kv = self.kv
        self.arch = kv["general.architecture"]
        if self.arch not in ("llama", "qwen2", "qwen3", "qwen3moe", "qwen35", "qwen35moe",
                             "gpt-oss", "phi3", "olmo2", "gemma", "gemma2", "gemma3"):
            raise ValueError("architecture %s not supported" % self.arch)
        a = self.arch
        self.n_embd = int(kv[a + ".embedding_length"])
        self.n_layer = int(kv[a + ".block_count"])
        self.n_head = int(kv[a + ".attention.head_count"])
        self.n_head_kv = int(kv.get(a + ".attention.head_count_kv", self.n_head))
        self.head_dim = int(kv.get(a + ".attention.key_length", self.n_embd // self.n_head))
        self.n_rot = int(kv.get(a + ".rope.dimension_count", self.head_dim))
        self.eps = float(kv.get(a + ".attention.layer_norm_rms_epsilon", 1e-5))
        self.rope_base = float(kv.get(a + ".rope.freq_base", 10000.0))
        self.rope_scaling(kv, a, n_ctx)
        self.neox = a in ("qwen2", "qwen3", "qwen3moe", "gpt-oss", "phi3", "olmo2", "gemma", "gemma2", "gemma3")
        self.n_expert = int(kv.get(a + ".expert_count", 0))
        self.n_expert_used = int(kv.get(a + ".expert_used_count", 0))
        self.expert_norm = bool(kv.get(a + ".expert_weights_norm", True))
        self.q8_act = q8_act
        self.bf16_act = bf16_act
        emb, _ = self.t["token_embd.weight"]
        self.n_vocab = emb.shape[0]
        # the frequency factors: rope_freqs, else LongRoPE's long table when the context is
        # longer than the original one, else its short table (llama.cpp's get_rope_factors)
        self.ff = None
        for name in ("rope_freqs.weight",
                     "rope_factors_long.weight" if self.n_ctx > self.n_ctx_orig
                     else "rope_factors_short.weight"):
            if self.ff is None and name in self.t:
                self.ff = self.t[name][0]
        if self.arch == "gpt-oss":
            # even layers slide (attention.sliding_window_pattern, default 2: layer l slides
            # when l % period < period - 1), over the last attention.sliding_window positions
            self.oai_window = int(kv.get(a + ".attention.sliding_window", 0))
            period = int(kv.get(a + ".attention.sliding_window_pattern", 2))
            self.oai_slides = [self.oai_window > 0 and (period == 0 or l % period < period - 1)
                               for l in range(self.n_layer)]
        # sliding-window attention: window[l] = W (the query at p sees keys p-W+1 .. p), 0 =
        # global. --swa W makes the even layers of any family slide (the mechanism's test).
        self.window = [swa if (swa and l % 2 == 0) else 0 for l in range(self.n_layer)]
        self.gemma = a in ("gemma", "gemma2", "gemma3")
        self.attn_scale = 1.0 / np.sqrt(self.head_dim)
        self.attn_softcap = 0.0
        self.final_softcap = 0.0
        self.layer_rope = [(self.rope_base, self.freq_scale)] * self.n_layer
        if self.gemma:
            self.gemma_hparams(kv, a)
        if self.arch in ("qwen35", "qwen35moe"):
            self.n_layer -= int(kv.get(a + ".nextn_predict_layers", 0))
            self.interval = int(kv.get(a + ".full_attention_interval", 4))
            self.d_conv = int(kv[a + ".ssm.conv_kernel"])
            self.dk = int(kv[a + ".ssm.state_size"])
            self.nk = int(kv[a + ".ssm.group_count"])
            self.nv = int(kv[a + ".ssm.time_step_rank"])
            self.sections = [int(v) for v in kv[a + ".rope.dimension_sections"]]

    def rope_scaling(self, kv, a, n_ctx):
        """RoPE scaling as llama.cpp defines it (its context setup and ggml's rope_yarn):
        rope.scaling.type none / linear / yarn / longrope, freq_scale = 1/factor; YaRN mixes
        the interpolated angle freq_scale * theta with the original one by a ramp over the
        pairs between ggml's correction dims, and scales cos and sin by mscale."""
        stype = kv.get(a + ".rope.scaling.type", "linear")
        if stype not in ("none", "linear", "llama3", "yarn", "longrope"):
            raise ValueError("rope scaling type %s not supported" % stype)
        factor = float(kv.get(a + ".rope.scaling.factor", 0.0))
        if factor == 0.0:
            factor = float(kv.get(a + ".rope.scale_linear", 0.0))
        self.freq_scale = 1.0 / factor if factor != 0.0 and stype != "none" else 1.0
        self.n_ctx = n_ctx if n_ctx > 0 else int(kv[a + ".context_length"])
        self.n_ctx_orig = int(kv.get(a + ".rope.scaling.original_context_length",
                                     kv[a + ".context_length"]))
        ext = float(kv.get(a + ".rope.scaling.yarn_ext_factor", -1.0))
        if ext < 0:
            ext = 1.0 if stype == "yarn" else 0.0
        attn = float(kv.get(a + ".rope.scaling.yarn_attn_factor", 1.0))
        if ext != 0:
            f = 1.0 / self.freq_scale
            log_mul = float(kv.get(a + ".rope.scaling.yarn_log_multiplier", 0.0))

            def msc(s, k):
                return 1.0 if s <= 1.0 else 0.1 * k * np.log(s) + 1.0
            attn = msc(f, 1.0) / msc(f, log_mul) if log_mul != 0 else msc(f, 1.0)
            attn *= 1.0 / (1.0 + 0.1 * np.log(f))
        attn *= float(kv.get(a + ".rope.scaling.attn_factor", 1.0))
        self.rope_mscale = attn * (1.0 + 0.1 * np.log(1.0 / self.freq_scale)) if ext != 0 else attn
        self.rope_ext = ext
        # ggml's correction dims (float32, so that floor / ceil land on the same integers)
        beta_fast = float(kv.get(a + ".rope.scaling.yarn_beta_fast", 32.0))
        beta_slow = float(kv.get(a + ".rope.scaling.yarn_beta_slow", 1.0))
        f32 = np.float32

        def corr(beta):
            return f32(self.n_rot) * np.log(f32(self.n_ctx_orig) / (f32(beta) * f32(2) * f32(np.pi))) \
                / (f32(2) * np.log(f32(self.rope_base)))
        lo = max(0.0, float(np.floor(corr(beta_fast))))
        hi = min(float(self.n_rot - 1), float(np.ceil(corr(beta_slow))))
        self.rope_corr = (lo, hi)

    def W(self, name):
        return self.t[name][0]

    def gemma_hparams(self, kv, a):
        """gemma2 / gemma3 as llama.cpp defines them: sliding layers l % period < period - 1
        (period 2 / 6, or attention.sliding_window_pattern) with window attention.sliding_window
        (gemma2 default 4096; gemma3 without the key: all global); sliding layers' rope base
        rope.freq_base_swa (gemma2 default: the global base and scale; gemma3: 10000, unscaled);
        query scale 1/sqrt(head_dim), or 1/sqrt(n_embd/n_head) for the 27B layer counts (46,
        62); soft-caps attn_logit_softcapping (gemma2, default 50), final_logit_softcapping
        (gemma2 default 30, gemma3 none)."""
        g2 = a == "gemma2"
        if a == "gemma":  # gemma (1): no windows, no soft-caps
            return
        win = int(kv.get(a + ".attention.sliding_window", 4096 if g2 else 0))
        period = int(kv.get(a + ".attention.sliding_window_pattern", 2 if g2 else 6))
        if g2:
            swa_rope = (float(kv.get(a + ".rope.freq_base_swa", self.rope_base)), self.freq_scale)
        else:
            swa_rope = (float(kv.get(a + ".rope.freq_base_swa", 10000.0)), 1.0)
        for l in range(self.n_layer):
            slides = win > 0 and (period == 0 or l % period < period - 1)
            self.window[l] = win if slides else 0
            if slides:
                self.layer_rope[l] = swa_rope
        if self.n_layer == (46 if g2 else 62):
            self.attn_scale = 1.0 / np.sqrt(self.n_embd // self.n_head)
        if g2:
            self.attn_softcap = float(kv.get(a + ".attn_logit_softcapping", 50.0))
        self.final_softcap = float(kv.get(a + ".final_logit_softcapping", 30.0 if g2 else 0.0))

    def layer_mask(self, mask, l):
        """The causal mask of layer l, with keys older than its window masked too."""
        w = self.window[l]
        if not w:
            return mask
        T = mask.shape[0]
        i = np.arange(T)
        return np.where(i[:, None] - i[None, :] >= w, -np.inf, mask)

    def has(self, name):
        return name in self.t

    def matmul(self, x, name, expert=None):
        """x (T, in) @ W^T where W is (out, in) -> (T, out); expert e: W = the 3-D tensor's [e]."""
        w, ttype = self.t[name]
        if expert is not None:
            w = w[expert]
        act = NATIVE_ACT.get(ttype) if self.native_act else None
        if (self.q8_act and ttype == GGML_Q8_0) or act == "q8_0":
            x = quantize_q8_0_rows(x)
        elif (self.bf16_act and ttype == GGML_BF16) or act == "bf16":
            x = round_bf16_rows(x)
        elif act == "f16":
            x = x.astype(np.float32).astype(np.float16).astype(np.float64)
        elif act == "q8_k":
            x = quantize_q8_k_rows(x)
        elif act == "q8_1":
            # w = d q + m per block of 32: the m part meets Q8_1's s (f16 of the block's
            # d x sum q, before d's own f16 rounding), the rest the dequantised activations
            m = self.block_mins(name, expert)  # (out, in / 32)
            xq = quantize_q8_0_rows(x)
            return xq @ (w - np.repeat(m, 32, axis=1)).T + q8_1_sums(x) @ m.T
        return x @ w.T

    def block_mins(self, name, expert):
        """The f16 min m of every block of 32 of a Q4_1 / Q5_1 matrix, (out, in / 32)."""
        key = (name, expert)
        if not hasattr(self, "_mins"):
            self._mins = {}
        if key not in self._mins:
            with open(self.buf_path, "rb") as f:
                self._mins[key] = read_block_mins(f.read(), self.kv, name, expert)
        return self._mins[key]

    def rmsnorm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x, pos, base=None, freq_scale=None):
        """x (T, H, head_dim), rotates the first n_rot dims of every head."""
        base = self.rope_base if base is None else base
        freq_scale = self.freq_scale if freq_scale is None else freq_scale
        half = self.n_rot // 2
        i = np.arange(half, dtype=np.float64)
        inv = base ** (-2.0 * i / self.n_rot)
        if self.ff is not None:
            inv = inv / self.ff[:half]
        extrap = pos[:, None].astype(np.float64) * inv[None, :]  # (T, half)
        ang = freq_scale * extrap
        if self.rope_ext != 0:
            lo, hi = self.rope_corr
            y = (i - lo) / max(0.001, hi - lo)
            mix = (1.0 - np.clip(y, 0.0, 1.0)) * self.rope_ext
            ang = ang * (1.0 - mix[None, :]) + extrap * mix[None, :]
        c = np.cos(ang)[:, None, :] * self.rope_mscale
        s = np.sin(ang)[:, None, :] * self.rope_mscale
        y = x.copy()
        if self.neox:
            x0, x1 = x[..., :half], x[..., half:2 * half]
            y[..., :half] = x0 * c - x1 * s
            y[..., half:2 * half] = x0 * s + x1 * c
        else:
            x0, x1 = x[..., 0:2 * half:2], x[..., 1:2 * half:2]
            y[..., 0:2 * half:2] = x0 * c - x1 * s
            y[..., 1:2 * half:2] = x0 * s + x1 * c
        return y

    def experts(self, h, p):
        """The mixture-of-experts FFN of layer prefix p on h (T, n_embd)."""
        T, k = h.shape[0], self.n_expert_used
        z = self.matmul(h, p + "ffn_gate_inp.weight")  # (T, E)
        z = np.exp(z - z.max(axis=1, keepdims=True))
        prob = z / z.sum(axis=1, keepdims=True)
        chosen = np.argsort(-prob, axis=1, kind="stable")[:, :k]  # ties: lower id first
        w = np.take_along_axis(prob, chosen, axis=1)
        if self.expert_norm:
            w = w / np.maximum(w.sum(axis=1, keepdims=True), 2.0 ** -14)
        out = np.zeros_like(h)
        for e in np.unique(chosen):
            rows, slot = np.nonzero(chosen == e)
            he = h[rows]
            gt, up = self.gate_up(he, p, e)
            y = self.matmul(gt / (1.0 + np.exp(-gt)) * up, p + "ffn_down_exps.weight", e)
            out[rows] += w[rows, slot][:, None] * y
        return out

    def gate_up(self, he, p, e):
        """Expert e's gate and up products of the rows he: from ffn_gate_exps / ffn_up_exps,
        or from the merged ffn_gate_up_exps (rows [0, F) of expert e are the gate, [F, 2F) the
        up, as llama.cpp's views of the merged product take them)."""
        if self.has(p + "ffn_gate_up_exps.weight"):
            gu = self.matmul(he, p + "ffn_gate_up_exps.weight", e)
            F = gu.shape[1] // 2
            return gu[:, :F], gu[:, F:]
        return (self.matmul(he, p + "ffn_gate_exps.weight", e),
                self.matmul(he, p + "ffn_up_exps.weight", e))

    # ------------------------------------------------------------ gpt-oss (openai-moe)
    def experts_oai(self, h, p):
        """gpt-oss's experts (llama.cpp: SOFTMAX_WEIGHT gating, LLM_FFN_SWIGLU_OAI_MOE): logits
        z = Wgate_inp h + b; the k largest z (ties: lower id); w = softmax of those k; expert e:
        g = Wgate_e h + bg_e, u = Wup_e h + bu_e, x = min(g, 7), y = clip(u, -7, 7),
        y_e = Wdown_e (x sigmoid(1.702 x) (y + 1)) + bd_e; out = sum_j w_j y_e."""
        k = self.n_expert_used
        z = self.matmul(h, p + "ffn_gate_inp.weight") + self.W(p + "ffn_gate_inp.bias")
        chosen = np.argsort(-z, axis=1, kind="stable")[:, :k]
        zc = np.take_along_axis(z, chosen, axis=1)
        ez = np.exp(zc - zc.max(axis=1, keepdims=True))
        w = ez / ez.sum(axis=1, keepdims=True)
        bg, bu = self.W(p + "ffn_gate_exps.bias"), self.W(p + "ffn_up_exps.bias")
        bd = self.W(p + "ffn_down_exps.bias")
        out = np.zeros_like(h)
        for e in np.unique(chosen):
            rows, slot = np.nonzero(chosen == e)
            gt, up = self.gate_up(h[rows], p, e)
            xg = np.minimum(gt + bg[e], 7.0)
            yu = np.clip(up + bu[e], -7.0, 7.0)
            act = xg / (1.0 + np.exp(-1.702 * xg)) * (yu + 1.0)
            y = self.matmul(act, p + "ffn_down_exps.weight", e) + bd[e]
            out[rows] += w[rows, slot][:, None] * y
        return out

    def forward_oai(self, tokens):
        """gpt-oss: attention with q/k/v/o biases and a learned sink logit per head that joins
        every softmax's normalisation (p_j = exp(s_j) / (sum_i exp(s_i) + exp(sink))); layers
        that slide see the keys p - W + 1 .. p; the FFN input norm is post_attention_norm and
        the FFN the experts above."""
        tok = np.asarray(tokens, dtype=np.int64)
        if tok.min() < 0 or tok.max() >= self.n_vocab:
            raise ValueError("token id outside [0, %d)" % self.n_vocab)
        T = len(tok)
        H, HK, D = self.n_head, self.n_head_kv, self.head_dim
        x = self.W("token_embd.weight")[tok].copy()
        pos = np.arange(T)
        causal = pos[:, None] >= pos[None, :]
        for l in range(self.n_layer):
            p = "blk.%d." % l
            h = self.rmsnorm(x, self.W(p + "attn_norm.weight"))
            q = (self.matmul(h, p + "attn_q.weight") + self.W(p + "attn_q.bias")).reshape(T, H, D)
            k = (self.matmul(h, p + "attn_k.weight") + self.W(p + "attn_k.bias")).reshape(T, HK, D)
            v = (self.matmul(h, p + "attn_v.weight") + self.W(p + "attn_v.bias")).reshape(T, HK, D)
            q = self.rope(q, pos)
            k = self.rope(k, pos)
            k, v = self.kv_round(k), self.kv_round(v)
            seen = causal
            if self.oai_slides[l]:
                seen = causal & (pos[:, None] - pos[None, :] < self.oai_window)
            sinks = self.W(p + "attn_sinks.weight")
            g = H // HK
            out = np.empty((T, H, D))
            for hh in range(H):
                kh = hh // g
                sc = np.where(seen, self.dot_round(q[:, hh, :]) @ k[:, kh, :].T / np.sqrt(D),
                              -np.inf)
                m = np.maximum(sc.max(axis=1), sinks[hh])
                e = np.exp(sc - m[:, None])
                den = e.sum(axis=1) + np.exp(sinks[hh] - m)
                out[:, hh, :] = self.dot_round(e / den[:, None]) @ v[:, kh, :]
            x = x + self.matmul(out.reshape(T, H * D), p + "attn_output.weight") \
                + self.W(p + "attn_output.bias")
            h = self.rmsnorm(x, self.W(p + "post_attention_norm.weight"))
            x = x + self.experts_oai(h, p)
        x = self.rmsnorm(x, self.W("output_norm.weight"))
        return self.matmul(x, "output.weight" if self.has("output.weight") else "token_embd.weight")

    def forward_olmo2(self, tokens):
        """olmo2 (llama.cpp's olmo2.cpp): no input norms; q and k RMS-normed over the whole
        projection (n_head * head_dim, n_head_kv * head_dim) before rope; the attention output
        and the FFN output are RMS-normed (post_attention_norm, post_ffw_norm) before their
        residual adds:  x += norm(Wo attn(x));  x += norm(Wdown (silu(Wgate x) * Wup x))."""
        tok = np.asarray(tokens, dtype=np.int64)
        if tok.min() < 0 or tok.max() >= self.n_vocab:
            raise ValueError("token id outside [0, %d)" % self.n_vocab)
        T = len(tok)
        H, HK, D = self.n_head, self.n_head_kv, self.head_dim
        x = self.W("token_embd.weight")[tok].copy()
        pos = np.arange(T)
        mask = np.triu(np.full((T, T), -np.inf), 1)
        for l in range(self.n_layer):
            p = "blk.%d." % l
            q = self.rmsnorm(self.matmul(x, p + "attn_q.weight"), self.W(p + "attn_q_norm.weight"))
            k = self.rmsnorm(self.matmul(x, p + "attn_k.weight"), self.W(p + "attn_k_norm.weight"))
            v = self.matmul(x, p + "attn_v.weight").reshape(T, HK, D)
            q = self.rope(q.reshape(T, H, D), pos)
            k = self.rope(k.reshape(T, HK, D), pos)
            k, v = self.kv_round(k), self.kv_round(v)
            out = np.empty((T, H, D))
            for hh in range(H):
                kh = hh // (H // HK)
                sc = self.dot_round(q[:, hh, :]) @ k[:, kh, :].T / np.sqrt(D) + mask
                e = np.exp(sc - sc.max(axis=1, keepdims=True))
                out[:, hh, :] = self.dot_round(e / e.sum(axis=1, keepdims=True)) @ v[:, kh, :]
            a = self.matmul(out.reshape(T, H * D), p + "attn_output.weight")
            x = x + self.rmsnorm(a, self.W(p + "post_attention_norm.weight"))
            gt = self.matmul(x, p + "ffn_gate.weight")
            up = self.matmul(x, p + "ffn_up.weight")
            f = self.matmul(gt / (1.0 + np.exp(-gt)) * up, p + "ffn_down.weight")
            x = x + self.rmsnorm(f, self.W(p + "post_ffw_norm.weight"))
        x = self.rmsnorm(x, self.W("output_norm.weight"))
        return self.matmul(x, "output.weight" if self.has("output.weight") else "token_embd.weight")

    def forward(self, tokens):
        """tokens: list of ids -> logits (T, n_vocab) float64."""
        if self.arch in ("qwen35", "qwen35moe"):
            return self.forward_hybrid(tokens)
        if self.arch == "olmo2":
            return self.forward_olmo2(tokens)
        if self.arch == "gpt-oss":
            return self.forward_oai(tokens)
        tok = np.asarray(tokens, dtype=np.int64)
        if tok.min() < 0 or tok.max() >= self.n_vocab:
            raise ValueError("token id outside [0, %d)" % self.n_vocab)
        T = len(tok)
        H, HK, D = self.n_head, self.n_head_kv, self.head_dim
        x = self.W("token_embd.weight")[tok].copy()
        if self.gemma:
            x = x * np.sqrt(self.n_embd)
        pos = np.arange(T)
        mask = np.triu(np.full((T, T), -np.inf), 1)
        for l in range(self.n_layer):
            lmask = self.layer_mask(mask, l)
            p = "blk.%d." % l
            h = self.rmsnorm(x, self.W(p + "attn_norm.weight"))
            if self.has(p + "attn_qkv.weight"):  # phi3: one matrix, q | k | v
                qkv = self.matmul(h, p + "attn_qkv.weight")
                q, k, v = qkv[:, :H * D], qkv[:, H * D:(H + HK) * D], qkv[:, (H + HK) * D:]
            else:
                q = self.matmul(h, p + "attn_q.weight")
                k = self.matmul(h, p + "attn_k.weight")
                v = self.matmul(h, p + "attn_v.weight")
            if self.has(p + "attn_q.bias"):
                q = q + self.W(p + "attn_q.bias")
            if self.has(p + "attn_k.bias"):
                k = k + self.W(p + "attn_k.bias")
            if self.has(p + "attn_v.bias"):
                v = v + self.W(p + "attn_v.bias")
            q = q.reshape(T, H, D)
            k = k.reshape(T, HK, D)
            v = v.reshape(T, HK, D)
            if self.has(p + "attn_q_norm.weight"):
                q = self.rmsnorm(q, self.W(p + "attn_q_norm.weight"))
            if self.has(p + "attn_k_norm.weight"):
                k = self.rmsnorm(k, self.W(p + "attn_k_norm.weight"))
            q = self.rope(q, pos, *self.layer_rope[l])
            k = self.rope(k, pos, *self.layer_rope[l])
            k, v = self.kv_round(k), self.kv_round(v)
            g = H // HK
            out = np.empty((T, H, D))
            for hh in range(H):
                kh = hh // g
                if self.arch == "phi3":  # promptscore scales q first (PS_A_Q_PRESCALE)
                    s = self.dot_round(q[:, hh, :] * self.attn_scale) @ k[:, kh, :].T
                else:
                    s = self.dot_round(q[:, hh, :]) @ k[:, kh, :].T * self.attn_scale
                if self.attn_softcap:
                    s = np.tanh(s / self.attn_softcap) * self.attn_softcap
                s = s + lmask
                s = s - s.max(axis=1, keepdims=True)
                e = np.exp(s)
                out[:, hh, :] = self.dot_round(e / e.sum(axis=1, keepdims=True)) @ v[:, kh, :]
            att = self.matmul(out.reshape(T, H * D), p + "attn_output.weight")
            if self.gemma:  # post-norms around attention and FFN (gemma2, gemma3); GeGLU
                post = self.has(p + "post_attention_norm.weight")
                if post:
                    att = self.rmsnorm(att, self.W(p + "post_attention_norm.weight"))
                x = x + att
                h = self.rmsnorm(x, self.W(p + "ffn_norm.weight"))
                gt = self.matmul(h, p + "ffn_gate.weight")
                up = self.matmul(h, p + "ffn_up.weight")
                gelu = 0.5 * gt * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * gt * (1.0 + 0.044715 * gt * gt)))
                y = self.matmul(gelu * up, p + "ffn_down.weight")
                x = x + (self.rmsnorm(y, self.W(p + "post_ffw_norm.weight")) if post else y)
                continue
            x = x + att
            h = self.rmsnorm(x, self.W(p + "ffn_norm.weight"))
            if self.has(p + "ffn_gate_inp.weight"):
                x = x + self.experts(h, p)
                continue
            if self.has(p + "ffn_gate.weight"):
                gt = self.matmul(h, p + "ffn_gate.weight")
                up = self.matmul(h, p + "ffn_up.weight")
            else:  # phi3: ffn_up is gate then up
                gu = self.matmul(h, p + "ffn_up.weight")
                gt, up = gu[:, :gu.shape[1] // 2], gu[:, gu.shape[1] // 2:]
            x = x + self.matmul(gt / (1.0 + np.exp(-gt)) * up, p + "ffn_down.weight")
        x = self.rmsnorm(x, self.W("output_norm.weight"))
        # gemma and gemma2 always read the output from token_embd (llama.cpp)
        tied = not self.has("output.weight") or self.arch in ("gemma", "gemma2")
        z = self.matmul(x, "token_embd.weight" if tied else "output.weight")
        if self.has("output.bias"):
            z = z + self.W("output.bias")
        if self.final_softcap:
            z = np.tanh(z / self.final_softcap) * self.final_softcap
        return z


    # ------------------------------------------------------------ qwen35 (hybrid)
    def rope_text_angles(self, T):
        """(T, n_rot/2) angles of the multi-section ("interleaved mrope") rope for text: pair i
        lies in section sector = i % sum(sections); sectors cycle t, h, w (sector % 3 == 0, 1, 2)
        while each section has pairs left, the rest belong to the fourth section. Text gives t,
        h and w the token position and the fourth position 0."""
        half = self.n_rot // 2
        s0, s1, s2, s3 = self.sections
        total = s0 + s1 + s2 + s3
        use_pos = np.zeros(half)
        for i in range(half):
            sec = i % total
            r = sec % 3
            limit = (s0, s1, s2)[r]
            use_pos[i] = 1.0 if sec < 3 * limit else 0.0
        inv = self.rope_base ** (-2.0 * np.arange(half) / self.n_rot)
        pos = np.arange(T, dtype=np.float64)[:, None]
        return self.freq_scale * pos * use_pos[None, :] * inv[None, :]

    def kv_round(self, a):
        """K or V as the cache stores them: --kv-type f16 / bf16 round to float32, then to half
        (numpy's float16 cast: nearest even) or bfloat16 (nearest even on the float32 bits)."""
        if self.kv_type in ("f16", "f16-dot"):
            return a.astype(np.float32).astype(np.float16).astype(np.float64)
        if self.kv_type in ("bf16", "bf16-dot"):
            b = a.astype(np.float32).view(np.uint32).astype(np.uint64)
            b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
            return b.astype(np.uint32).view(np.float32).astype(np.float64)
        return a

    def dot_round(self, a):
        """A query or a row of probabilities as --kv-type bf16-dot multiplies it: rounded to
        float32, then to bfloat16 (nearest even); --kv-type f16-dot: to float32, then to half;
        unchanged for the other types."""
        if self.kv_type == "f16-dot":
            return a.astype(np.float32).astype(np.float16).astype(np.float64)
        return round_bf16_rows(a) if self.kv_type == "bf16-dot" else a

    def gated_attention(self, h, p):
        T = h.shape[0]
        H, HK, D = self.n_head, self.n_head_kv, self.head_dim
        qg = self.matmul(h, p + "attn_q.weight").reshape(T, H, 2 * D)
        q, gate = qg[..., :D], qg[..., D:]
        k = self.matmul(h, p + "attn_k.weight").reshape(T, HK, D)
        v = self.matmul(h, p + "attn_v.weight").reshape(T, HK, D)
        q = self.rmsnorm(q, self.W(p + "attn_q_norm.weight"))
        k = self.rmsnorm(k, self.W(p + "attn_k_norm.weight"))
        ang = self.rope_text_angles(T)
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        half = self.n_rot // 2

        def rot(x):
            y = x.copy()
            x0, x1 = x[..., :half], x[..., half:2 * half]
            y[..., :half] = x0 * c - x1 * s
            y[..., half:2 * half] = x0 * s + x1 * c
            return y
        q, k = rot(q), rot(k)
        k, v = self.kv_round(k), self.kv_round(v)
        mask = np.triu(np.full((T, T), -np.inf), 1)
        out = np.empty((T, H, D))
        grp = H // HK
        for hh in range(H):
            sc = self.dot_round(q[:, hh, :]) @ k[:, hh // grp, :].T / np.sqrt(D) + mask
            e = np.exp(sc - sc.max(axis=1, keepdims=True))
            out[:, hh, :] = self.dot_round(e / e.sum(axis=1, keepdims=True)) @ v[:, hh // grp, :]
        out = out * (1.0 / (1.0 + np.exp(-gate)))
        return self.matmul(out.reshape(T, H * D), p + "attn_output.weight")

    def deltanet(self, h, p):
        """Gated DeltaNet: S (per value head, key dim x value dim) starts at zero; per token
        S <- exp(g) S;  S <- S + k (beta (v - S^T k))^T;  o = S^T q / sqrt(dk)."""
        T = h.shape[0]
        dk, nk, nv = self.dk, self.nk, self.nv
        qkv = self.matmul(h, p + "attn_qkv.weight")                      # (T, ch)
        z = self.matmul(h, p + "attn_gate.weight").reshape(T, nv, dk)
        beta = 1.0 / (1.0 + np.exp(-self.matmul(h, p + "ssm_beta.weight")))
        a = self.matmul(h, p + "ssm_alpha.weight") + self.W(p + "ssm_dt.bias")
        softplus = np.where(a > 20.0, a, np.log1p(np.exp(np.minimum(a, 20.0))))
        g = softplus * self.W(p + "ssm_a")                                 # (T, nv)
        w = self.W(p + "ssm_conv1d.weight")                                 # (ch, d_conv)
        padded = np.vstack([np.zeros((self.d_conv - 1, qkv.shape[1])), qkv])
        conv = np.zeros_like(qkv)
        for i in range(self.d_conv):
            conv += padded[i:i + T, :] * w[None, :, i]
        conv = conv / (1.0 + np.exp(-conv))
        q = conv[:, :nk * dk].reshape(T, nk, dk)
        k = conv[:, nk * dk:2 * nk * dk].reshape(T, nk, dk)
        v = conv[:, 2 * nk * dk:].reshape(T, nv, dk)

        def l2(x):
            return x / np.maximum(np.sqrt((x * x).sum(axis=-1, keepdims=True)), self.eps)
        q, k = l2(q), l2(k)
        o = np.empty((T, nv, dk))
        for hv in range(nv):
            hk = hv % nk  # llama.cpp tiles the key heads over the value heads
            S = np.zeros((dk, dk))
            for t in range(T):
                S = S * np.exp(g[t, hv])
                d = beta[t, hv] * (v[t, hv] - S.T @ k[t, hk])
                S = S + np.outer(k[t, hk], d)
                o[t, hv] = S.T @ q[t, hk] / np.sqrt(dk)
        o = self.rmsnorm(o, self.W(p + "ssm_norm.weight")) * (z / (1.0 + np.exp(-z)))
        return self.matmul(o.reshape(T, nv * dk), p + "ssm_out.weight")

    def forward_hybrid(self, tokens):
        tok = np.asarray(tokens, dtype=np.int64)
        if tok.min() < 0 or tok.max() >= self.n_vocab:
            raise ValueError("token id outside [0, %d)" % self.n_vocab)
        x = self.W("token_embd.weight")[tok].copy()
        for l in range(self.n_layer):
            p = "blk.%d." % l
            h = self.rmsnorm(x, self.W(p + "attn_norm.weight"))
            if (l + 1) % self.interval == 0:
                x = x + self.gated_attention(h, p)
            else:
                x = x + self.deltanet(h, p)
            h = self.rmsnorm(x, self.W(p + "post_attention_norm.weight"))
            x = x + self.ffn(h, p)
        x = self.rmsnorm(x, self.W("output_norm.weight"))
        return self.matmul(x, "output.weight" if self.has("output.weight") else "token_embd.weight")

    def ffn(self, h, p):
        if self.has(p + "ffn_gate_inp.weight"):  # qwen35moe: experts + the gated shared expert
            gt = self.matmul(h, p + "ffn_gate_shexp.weight")
            up = self.matmul(h, p + "ffn_up_shexp.weight")
            sh = self.matmul(gt / (1.0 + np.exp(-gt)) * up, p + "ffn_down_shexp.weight")
            gate = 1.0 / (1.0 + np.exp(-(h @ self.W(p + "ffn_gate_inp_shexp.weight"))))
            return self.experts(h, p) + sh * gate[:, None]
        gt = self.matmul(h, p + "ffn_gate.weight")
        up = self.matmul(h, p + "ffn_up.weight")
        return self.matmul(gt / (1.0 + np.exp(-gt)) * up, p + "ffn_down.weight")


def log_softmax(z):
    m = z.max(axis=-1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(axis=-1, keepdims=True))


def nll(model, tokens):
    lp = log_softmax(model.forward(tokens))
    return -sum(lp[i - 1, tokens[i]] for i in range(1, len(tokens)))


def greedy(model, tokens, n):
    toks = list(tokens)
    for _ in range(n):
        toks.append(int(np.argmax(model.forward(toks)[-1])))
    return toks[len(tokens):]


def stats_lines(model, tokens, other=None):
    """The per-position statistics of --stats, in float64."""
    z = model.forward(tokens)
    lp = log_softmax(z)
    if other is not None:
        zo = other.forward(tokens)
        lpo = log_softmax(zo)
    out = []
    for i in range(1, len(tokens)):
        row, t = lp[i - 1], tokens[i]
        p = np.exp(row)
        fin = p > 0
        h = float(-(p[fin] * row[fin]).sum())
        d = {"pos": i, "entropy": h,
             "varentropy": float((p[fin] * (row[fin] + h) ** 2).sum()),
             "logprob": float(row[t]),
             "rank": int(1 + (z[i - 1] > z[i - 1][t]).sum() + (z[i - 1][:t] == z[i - 1][t]).sum())}
        if other is not None:
            d["kld"] = float((p[fin] * (row[fin] - lpo[i - 1][fin])).sum())
            d["same_top1"] = int(np.argmax(z[i - 1]) == np.argmax(zo[i - 1]))
            d["dp"] = float(np.exp(lpo[i - 1][t]) - p[t])
            d["logprob_other"] = float(lpo[i - 1][t])
        out.append(d)
    return out


def check_stories(model, golden):
    """Golden file: lines 1-3 'n nll_python ...', line 4 the greedy list (BOS first), then three
    'tokens(...) = [...]' lines. Returns the number of mismatches."""
    lines = [l for l in open(golden, encoding="utf-8").read().split("\n") if l and l[0] != "#"]
    want = [float(l.split()[1]) for l in lines[:3]]
    gre = [int(t) for t in lines[3].strip("[]").split(",")]
    lists = [[int(t) for t in l.rsplit("= ", 1)[1].strip("[]").split(",")]
             for l in lines if l.startswith("tokens(")]
    bad = 0
    for toks, w in zip(lists, want):
        got = nll(model, toks)
        rel = abs(got - w) / abs(w)
        ok = rel <= 1e-6
        bad += not ok
        print("nll n=%d: got %.6f want %.6f rel %.2e %s" % (len(toks), got, w, rel, "ok" if ok else "MISMATCH"))
    got = greedy(model, gre[:1], len(gre) - 1)
    ok = got == gre[1:]
    bad += not ok
    print("greedy %d ids from %d: %s" % (len(gre) - 1, gre[0], "ok" if ok else "MISMATCH %s" % got))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--tokens", help="comma-separated ids")
    ap.add_argument("--tokens-file", help="ids separated by whitespace or commas")
    ap.add_argument("--out", help="write logits (T x n_vocab, float64 little-endian) here")
    ap.add_argument("--nll", action="store_true", help="print the teacher-forced NLL")
    ap.add_argument("--greedy", type=int, default=0, help="greedy ids after the tokens")
    ap.add_argument("--q8-act", action="store_true", help="quantise activations for Q8_0 weights")
    ap.add_argument("--native-act", action="store_true",
                    help="quantise activations before every quantised weight as llama.cpp "
                         "(Q8_K, Q8_1, Q8_0; bf16 for BF16; f16 for F16): promptscore's default")
    ap.add_argument("--bf16-act", action="store_true",
                    help="round activations to bfloat16 for BF16 weights")
    ap.add_argument("--check-stories", metavar="GOLDEN")
    ap.add_argument("--stats", action="store_true",
                    help="print entropy and rank per scored position (JSON lines)")
    ap.add_argument("--compare", metavar="OTHER",
                    help="with --stats: also kld, same_top1 and dp against this model")
    ap.add_argument("--n-ctx", type=int, default=0,
                    help="the context length the C model was loaded with (picks LongRoPE's "
                         "long or short factors; default context_length)")
    ap.add_argument("--swa", type=int, default=0,
                    help="make the even layers attend to a sliding window of this many keys")
    ap.add_argument("--kv-type", choices=("f32", "f16", "bf16", "bf16-dot", "f16-dot"), default="f32",
                    help="round attention's keys and values as promptscore's K/V cache of "
                         "this type stores them (default f32: not rounded); bf16-dot also "
                         "its queries and probabilities")
    a = ap.parse_args()
    m = Model(a.model, q8_act=a.q8_act, bf16_act=a.bf16_act, native_act=a.native_act,
              n_ctx=a.n_ctx, swa=a.swa, kv_type=a.kv_type)
    if a.check_stories:
        bad = check_stories(m, a.check_stories)
        print("stories260K reference: %s" % ("ok" if not bad else "%d MISMATCHES" % bad))
        return 1 if bad else 0
    if a.tokens_file:
        toks = [int(t) for t in open(a.tokens_file).read().replace(",", " ").split()]
    elif a.tokens:
        toks = [int(t) for t in a.tokens.split(",")]
    else:
        ap.error("give --tokens or --tokens-file")
    if a.stats:
        import json
        other = None
        if a.compare:
            other = Model(a.compare, q8_act=a.q8_act, bf16_act=a.bf16_act,
                          native_act=a.native_act, n_ctx=a.n_ctx, swa=a.swa, kv_type=a.kv_type)
        for d in stats_lines(m, toks, other):
            print(json.dumps(d))
        return 0
    if a.nll:
        print("%.9f" % nll(m, toks))
    if a.greedy:
        print(",".join(str(t) for t in greedy(m, toks, a.greedy)))
    if a.out:
        m.forward(toks).astype("<f8").tofile(a.out)
    elif not a.nll and not a.greedy:
        np.set_printoptions(precision=6, suppress=True, linewidth=150)
        print(m.forward(toks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
