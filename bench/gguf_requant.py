#!/usr/bin/env python3
"""gguf_requant.py -- a Q8_0 or F16 copy of an F32 GGUF model, for the llama-perplexity
--kl-divergence comparison (docs/correctness.md).

usage: PYTHONPATH=LLAMA_CPP/gguf-py python3 bench/gguf_requant.py IN.gguf OUT.gguf q8_0|f16 [REGEX]

Every key-value pair is copied as it is. One-dimensional tensors (norms) stay F32. With q8_0,
a matrix whose row (ne0) is a multiple of 32 becomes Q8_0 (gguf-py's quantizer, the reference
rounding of ggml's quantize_row_q8_0_ref) and any other matrix F16 (stories260K's ffn_down,
rows of 172); with f16 every matrix becomes F16. With REGEX, only the matrices whose name it
matches (re.search) change; the others stay F32 (to find which tensors a difference comes
from). Needs numpy and llama.cpp's gguf-py.
"""
import re
import sys

import numpy as np
import gguf


def main():
    if len(sys.argv) not in (4, 5) or sys.argv[3] not in ("q8_0", "f16"):
        sys.exit(__doc__)
    src, dst, kind = sys.argv[1:4]
    only = re.compile(sys.argv[4]) if len(sys.argv) == 5 else None
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"]
    arch = bytes(arch.parts[arch.data[0]]).decode()
    w = gguf.GGUFWriter(dst, arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", "general.file_type"):
            continue
        vt = f.types[0]
        if vt == gguf.GGUFValueType.ARRAY:
            et = f.types[1]
            if et == gguf.GGUFValueType.STRING:
                val = [bytes(f.parts[i]) for i in f.data]
            else:
                val = [f.parts[i].tolist()[0] for i in f.data]
            w.add_key_value(name, val, vt, sub_type=et)
        elif vt == gguf.GGUFValueType.STRING:
            w.add_key_value(name, bytes(f.parts[f.data[0]]), vt)
        else:
            w.add_key_value(name, f.parts[f.data[0]].tolist()[0], vt)
    if kind == "q8_0":
        w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    else:
        w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    for t in r.tensors:
        assert t.tensor_type == gguf.GGMLQuantizationType.F32, f"{t.name}: not F32"
        a = np.asarray(t.data, dtype=np.float32).reshape(list(reversed([int(x) for x in t.shape])))
        if a.ndim == 1 or (only and not only.search(t.name)):
            w.add_tensor(t.name, a)
        elif kind == "q8_0" and a.shape[-1] % 32 == 0:
            q = gguf.quants.quantize(a, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(t.name, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(t.name, a.astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
