// tests/browser/mock-server.mjs — a stand-in for `promptscore serve` while developing the page:
// serves web/index.html at GET / and answers POST /v1/completions in the shape of docs/api.md
// with made-up (deterministic) tokens and logprobs. Not a model: for layout and error paths only.
//   node tests/browser/mock-server.mjs [port] [ctx]
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const port = Number(process.argv[2] || 8090);
const ctx = Number(process.argv[3] || 512);
const NV = 512;

function tokenize(s) { return s.match(/ ?[A-Za-z]+| ?[0-9]|\n|\t| |[^A-Za-z0-9\s]/g) || []; }
function hash(s) { let h = 2166136261; for (const c of s) h = Math.imul(h ^ c.codePointAt(0), 16777619) >>> 0; return h; }
const idOf = (t) => 3 + (hash(t) % (NV - 3));
const f32 = (x) => Math.fround(x);

function score(prompt, K, bos) {
    const toks = (bos ? ["<s>"] : []).concat(tokenize(prompt));
    const ids = toks.map((t) => (t === "<s>" ? 1 : idOf(t)));
    const out = { tokens: toks, token_logprobs: [], top_logprobs: [], text_offset: [], token_ids: ids, top_ids: [] };
    let off = 0;
    toks.forEach((t, i) => {
        out.text_offset.push(off); off += [...t].length;
        if (i === 0) { out.token_logprobs.push(null); out.top_logprobs.push(null); out.top_ids.push(null); return; }
        const lp = f32(-((hash(t + i) % 1000) / 100));
        const alts = [];
        for (let j = 0; j < K; j++) alts.push([(ids[i] + 7 * (j + 1)) % NV, f32(-0.2 - j * 0.9)]);
        if (lp > alts[0]?.[1] ?? -1e9) alts.unshift([ids[i], lp]);
        alts.sort((a, b) => b[1] - a[1] || a[0] - b[0]);
        const top = alts.slice(0, K);
        if (!top.some((r) => r[0] === ids[i])) top.push([ids[i], lp]);
        else top.forEach((r) => { if (r[0] === ids[i]) r[1] = lp; });
        const map = {};
        for (const [id, v] of top) { const tx = id === ids[i] ? t : "tok" + id; if (!(tx in map)) map[tx] = v; }
        out.token_logprobs.push(lp); out.top_logprobs.push(map); out.top_ids.push(top);
    });
    return out;
}

function send(res, code, obj) {
    res.writeHead(code, { "Content-Type": "application/json" });
    res.end(JSON.stringify(obj));
}
const err = (res, code, message, param, c) => send(res, code, { error: { message, type: "invalid_request_error", param: param || null, code: c || null } });

http.createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
        if (req.method === "GET" && req.url === "/") {
            res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
            return res.end(fs.readFileSync(path.join(root, "web/index.html")));
        }
        if (req.method === "GET" && req.url === "/v1/models")
            return send(res, 200, { object: "list", data: [{ id: "mock", object: "model", owned_by: "promptscore", max_model_len: ctx }] });
        if (req.method === "POST" && req.url === "/detokenize") {
            const b = JSON.parse(body || "{}");
            return send(res, 200, { prompt: (b.tokens || []).map((t) => "tok" + t).join("") });
        }
        if (req.method === "POST" && req.url === "/v1/completions") {
            let b;
            try { b = JSON.parse(body); } catch (e) { return err(res, 400, "body is not JSON: " + e.message); }
            if (typeof b.prompt !== "string" || b.prompt === "") return err(res, 400, "prompt must be a non-empty string", "prompt");
            const lp = score(b.prompt, b.logprobs ?? 0, b.add_special_tokens !== false);
            if (lp.tokens.length > ctx)
                return err(res, 400, `prompt has ${lp.tokens.length} tokens, more than the context of ${ctx}`, "prompt", "context_length_exceeded");
            return setTimeout(() => send(res, 200, {
                id: "cmpl-mock", object: "text_completion", created: 1764400000, model: "mock",
                choices: [{ index: 0, text: lp.tokens.join(""), finish_reason: "length", logprobs: lp }],
                usage: { prompt_tokens: lp.tokens.length, completion_tokens: 0, total_tokens: lp.tokens.length },
            }), 30);
        }
        err(res, 404, "no route " + req.method + " " + req.url);
    });
}).listen(port, "127.0.0.1", () => console.log(`mock on http://127.0.0.1:${port}/ (ctx ${ctx})`));
