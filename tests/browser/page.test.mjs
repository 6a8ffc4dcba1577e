// tests/browser/page.test.mjs — drives promptscore's page (web/index.html, served at GET /) in
// Debian's headless Chromium through playwright-core, against a real `promptscore serve` on
// 127.0.0.1 with ../shared/models/stories260K.gguf:
//   - type a prompt, click Score: one coloured element per token, whose data-id / data-logprob
//     equal a direct POST /v1/completions of the same request;
//   - the header names the file, architecture and weight type (GET /v1/models meta); a legend
//     line explains the glyphs; one-character tokens are wide enough to hover; colour by rank
//     and by quantile follow their definitions and the legend follows; Copy JSON copies the
//     response;
//   - hover a token: the card shows its logprob and its top-K alternatives (ids from top_ids);
//   - Ctrl+Enter scores; arrow keys move between tokens;
//   - a prompt longer than the context (second server with --ctx 64) shows the server's error
//     message in the page; a dead server shows a network error;
//   - a synthetic 4,000-token response (routed in the browser) renders quickly and hovers;
//   - serve --api-key: opened as /#key=KEY the page sends "Authorization: Bearer KEY" and drops
//     the key from the address bar; opened without it, the page asks on the 401, then scores;
//   - screenshots go to tests/out/ (page.png is the README's picture).
// Prints "page: N passed, N failed, N skipped". Run by tests/test_page.sh (which skips when
// chromium or node_modules are missing). Options: --base URL uses a running server (e.g. the
// mock in mock-server.mjs) instead of starting one; the real-server comparisons still run.
import { chromium } from "playwright-core";
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
process.chdir(root);
const BUILD = process.env.BUILD || "build";
const SHARED = process.env.PS_SHARED || "../shared";
const MODEL = path.join(SHARED, "models/stories260K.gguf");
const CHROMIUM = process.env.PS_CHROMIUM || "/usr/bin/chromium";
const OUT = path.join(root, "tests/out");
const argBase = (() => { const j = process.argv.indexOf("--base"); return j > 0 ? process.argv[j + 1] : null; })();

let pass = 0, fail = 0, skip = 0;
function check(cond, what, detail) {
    if (cond) pass++;
    else { fail++; console.error(`FAIL ${what}${detail !== undefined ? ": " + detail : ""}`); }
}
// under CI=true (CI installs everything) a skip is a failure, as in tests/check.h
const IN_CI = !["", "0", "false"].includes(process.env.CI ?? "");
function skipped(why) {
    if (IN_CI) { fail++; console.error(`FAIL skipped under CI=true (a skip is a failure there): ${why}`); }
    else { skip++; console.error(`SKIP ${why}`); }
}
function done() {
    console.log(`page: ${pass} passed, ${fail} failed, ${skip} skipped`);
    process.exit(fail ? 1 : 0);
}

function freePort() {
    return new Promise((resolve, reject) => {
        const s = net.createServer();
        s.on("error", reject);
        s.listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => resolve(p)); });
    });
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Starts `promptscore serve` on a free port; resolves to {base, proc, log()} once /health says ok.
async function startServer(extra) {
    const port = await freePort();
    const bin = path.join(BUILD, "promptscore");
    const args = ["serve", "-m", MODEL, "--port", String(port), ...extra];
    const proc = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"] });
    let log = "";
    proc.stdout.on("data", (d) => (log += d));
    proc.stderr.on("data", (d) => (log += d));
    let exited = null;
    proc.on("exit", (code, sig) => (exited = code ?? sig));
    const base = `http://127.0.0.1:${port}/`;
    for (let t = 0; t < 150 && exited === null; t++) {
        try {
            const r = await fetch(base + "health");
            if (r.ok) return { base, proc, log: () => log };
        } catch { /* not up yet */ }
        await sleep(100);
    }
    proc.kill("SIGTERM");
    if (/not built yet/.test(log)) return null; /* the CLI's placeholder: no server in this tree yet */
    throw new Error(`${bin} ${args.join(" ")} did not come up (exit ${exited}): ${log.slice(-600)}`);
}

async function direct(base, body) {
    const r = await fetch(base + "v1/completions", {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
    return { status: r.status, json: await r.json() };
}

// A synthetic response of n tokens in the contract's shape (for the rendering-speed check).
function bigResponse(n, K) {
    const words = ["Once", " upon", " a", " time", ",", " there", " was", " a", " little", " girl", ".", "\n", " She", " liked", "\t", " the", " park"];
    const lp = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [], token_ids: [], top_ids: [] };
    let off = 0;
    for (let i = 0; i < n; i++) {
        const t = i === 0 ? "<s>" : words[i % words.length], id = i === 0 ? 1 : 10 + (i % words.length);
        lp.tokens.push(t); lp.token_ids.push(id); lp.text_offset.push(off); off += t.length;
        if (i === 0) { lp.token_logprobs.push(null); lp.top_logprobs.push(null); lp.top_ids.push(null); continue; }
        const v = -((i * 37) % 1100) / 100;
        const top = [];
        for (let j = 0; j < K; j++) top.push([100 + j, -0.05 - j * 0.7]);
        top.push([id, v]);
        top.sort((a, b) => b[1] - a[1] || a[0] - b[0]);
        const map = {};
        // at position 5, ids 100 and 101 decode to the same text: the key keeps 100's value, so the
        // page must name 101 some other way (it asks the server's /detokenize)
        top.forEach(([tid, tv]) => { const tx = tid === id ? t : i === 5 && tid === 101 ? "alt100" : "alt" + tid; if (!(tx in map)) map[tx] = tv; });
        lp.token_logprobs.push(v); lp.top_logprobs.push(map); lp.top_ids.push(top);
    }
    return { id: "cmpl-big", object: "text_completion", created: 1, model: "big",
             choices: [{ index: 0, text: lp.tokens.join(""), finish_reason: "length", logprobs: lp }],
             usage: { prompt_tokens: n, completion_tokens: 0, total_tokens: n } };
}

const PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play outside.\n" +
               "One day, she saw a big red ball in the park. She was very happy!\n" +
               "\tLily said, \"Mom, can I play with the ball?\"";
const K = 5;

async function main() {
    if (!fs.existsSync(CHROMIUM)) { skipped(`NOTE: ${CHROMIUM} not found (apt-get install chromium)`); return done(); }
    if (!argBase && !fs.existsSync(MODEL)) { skipped(`NOTE: shared test material not found at ${SHARED} (set PS_SHARED)`); return done(); }
    if (!argBase && !fs.existsSync(path.join(BUILD, "promptscore"))) { skipped(`NOTE: ${BUILD}/promptscore not built (make BUILD=${BUILD})`); return done(); }
    fs.mkdirSync(OUT, { recursive: true });

    const servers = [];
    let browser = null;
    try {
        let base = argBase, small = null;
        if (!base) {
            const s = await startServer([]);
            if (!s) { skipped(`NOTE: ${BUILD}/promptscore serve is not built yet (placeholder)`); return; }
            servers.push(s); base = s.base;
            small = await startServer(["--ctx", "64"]);
            servers.push(small);
        }
        browser = await chromium.launch({
            executablePath: CHROMIUM, headless: true,
            args: ["--no-sandbox", "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
                   "--disable-background-networking", "--disable-component-update", "--disable-sync"],
        });
        const ctx = await browser.newContext({ viewport: { width: 1100, height: 820 }, colorScheme: "light" });
        const page = await ctx.newPage();
        const pageErrors = [], offsite = [];
        page.on("pageerror", (e) => pageErrors.push(String(e)));
        page.on("console", (m) => {
            // a 400 or a refused connection is logged by the browser itself; those are expected here
            if (m.type() === "error" && !/Failed to load resource|net::ERR_/.test(m.text())) pageErrors.push("console: " + m.text());
        });
        page.on("request", (r) => { if (!r.url().startsWith("http://127.0.0.1:")) offsite.push(r.url()); });

        // ---- 1. the page loads from GET / ----
        const resp = await page.goto(base, { waitUntil: "load" });
        check(resp && resp.status() === 200, "GET / answers 200", resp && resp.status());
        check((resp.headers()["content-type"] || "").startsWith("text/html"), "GET / is text/html", resp.headers()["content-type"]);
        check(await page.locator("#prompt").count() === 1 && await page.locator("#score").count() === 1, "page has the text box and the Score button");

        // ---- 2. type, choose K, click Score ----
        await page.fill("#prompt", PROMPT);
        await page.selectOption("#k", String(K));
        const want = await direct(base, { prompt: PROMPT, echo: true, max_tokens: 0, logprobs: K, add_special_tokens: true, stats: true });
        check(want.status === 200, "direct /v1/completions answers 200", JSON.stringify(want.json).slice(0, 300));
        const wl = want.json.choices[0].logprobs;
        await page.click("#score");
        await page.waitForFunction(() => document.querySelectorAll("#tokens .t").length > 0 && !document.querySelector("#score").disabled, null, { timeout: 10000 });
        const got = await page.$$eval("#tokens .t", (els) => els.map((e) => ({
            i: e.dataset.i, id: e.dataset.id, lp: e.dataset.logprob, text: e.textContent,
            bg: getComputedStyle(e).backgroundColor, none: e.classList.contains("none"),
        })));
        check(got.length === wl.tokens.length, "one element per token", `${got.length} elements, ${wl.tokens.length} tokens`);
        let idOk = 0, lpOk = 0, colOk = 0, idxOk = 0;
        const colours = new Set();
        got.forEach((g, i) => {
            if (Number(g.i) === i) idxOk++;
            if (Number(g.id) === wl.token_ids[i]) idOk++;
            const v = wl.token_logprobs[i];
            if (v === null ? g.lp === "" : Number(g.lp) === v) lpOk++;
            if (v !== null && !g.none && g.bg !== "rgba(0, 0, 0, 0)" && g.bg !== "transparent") { colOk++; colours.add(g.bg); }
        });
        const scoredN = wl.token_logprobs.filter((v) => v !== null).length;
        check(idxOk === got.length, "data-i numbers the tokens in order", `${idxOk}/${got.length}`);
        check(idOk === wl.tokens.length, "data-id equals token_ids", `${idOk}/${wl.tokens.length}`);
        check(lpOk === wl.tokens.length, "data-logprob equals token_logprobs exactly", `${lpOk}/${wl.tokens.length}`);
        check(colOk === scoredN && scoredN > 0, "every scored token is coloured", `${colOk}/${scoredN}`);
        check(colours.size >= 3, "colours vary with the logprob", `${colours.size} distinct colours`);
        // the lowest-logprob token is darker than the highest (viridis: dark = surprising)
        const lum = (rgb) => { const m = rgb.match(/\d+/g).map(Number); return 0.2126 * m[0] + 0.7152 * m[1] + 0.0722 * m[2]; };
        let lo = -1, hi = -1;
        wl.token_logprobs.forEach((v, i) => { if (v === null) return; if (lo < 0 || v < wl.token_logprobs[lo]) lo = i; if (hi < 0 || v > wl.token_logprobs[hi]) hi = i; });
        check(lum(got[lo].bg) < lum(got[hi].bg), "the most surprising token is darker than the least", `${got[lo].bg} vs ${got[hi].bg}`);
        const nl = wl.tokens.findIndex((t) => t.includes("\n"));
        if (nl >= 0) check(got[nl].text.includes("↵"), "a newline token shows ↵", JSON.stringify(got[nl].text));
        else skipped("no newline token in the prompt's tokenization");
        const text = await page.$eval("#tokens", (e) => e.innerText);
        check(text.split("\n").length >= 3, "newlines in the prompt break lines in the view", JSON.stringify(text.slice(0, 120)));

        // summary: tokens, NLL, perplexity, time
        const summary = await page.textContent("#summary");
        const nll = -wl.token_logprobs.filter((v) => v !== null).reduce((a, b) => a + b, 0);
        check(summary.includes(`${wl.tokens.length} tokens`), "summary counts the tokens", summary);
        check(summary.includes(nll.toFixed(3)), "summary shows the total NLL", `${nll.toFixed(3)} in ${summary}`);
        check(summary.includes(Math.exp(nll / scoredN).toFixed(3)), "summary shows the perplexity", summary);
        check(/\d+ ms/.test(summary), "summary shows the time taken", summary);

        // ---- 2b. the header, the glyph legend, one-character tokens, colour modes, Copy JSON ----
        await page.waitForFunction(() => document.querySelector("#model").textContent.length > 0, null, { timeout: 5000 }).catch(() => {});
        const header = await page.textContent("#model");
        check(/stories260K\.gguf/.test(header) && /\bllama\b/.test(header) && /\bF32\b/.test(header),
              "the header shows the file, architecture and weight type", header);
        const glyphs = await page.textContent("#glyphs");
        check(["↵", "∅", "·", "→", "\\x07", "�"].every((g) => glyphs.includes(g)), "a legend line explains the glyphs", glyphs);
        const oneChar = wl.tokens.map((t, i) => ([...t].length === 1 && t !== "\n" ? i : -1)).filter((i) => i >= 0);
        const c1w = await page.$$eval("#tokens .t", (els, idx) => idx.map((i) => els[i].getBoundingClientRect().width), oneChar);
        check(oneChar.length > 0 && Math.min(...c1w) >= 11, "one-character tokens are at least 11 px wide (a monospace character alone is 8.7; easy to hover)",
              `${oneChar.length} tokens, widths ${JSON.stringify(c1w.slice(0, 8))}`);
        const bgs = () => page.$$eval("#tokens .t", (els) => els.map((e) => getComputedStyle(e).backgroundColor));
        const BRIGHT = "rgb(253, 231, 37)", DARK = "rgb(68, 1, 84)";
        await page.selectOption("#colorby", "rank");
        const rankBg = await bgs();
        let rankOk = 0;
        // the page asks for "stats": the exact rank in the whole vocabulary, on a log scale
        check(Array.isArray(wl.rank) && Array.isArray(wl.entropy), "the page asks for stats (rank, entropy)", Object.keys(wl).join(","));
        wl.token_logprobs.forEach((v, i) => {
            if (v === null) return;
            const at = wl.top_ids[i].findIndex((r) => r[0] === wl.token_ids[i]);
            // the rank must agree with top_ids within the top K (entry K + 1, when present, is the
            // scored token appended as OpenAI does, whatever its rank)
            if (at >= 0 && at < K && wl.rank[i] !== at + 1) return;
            if (wl.rank[i] === 1 ? rankBg[i] === BRIGHT : rankBg[i] !== BRIGHT) rankOk++;
        });
        check(rankOk === scoredN, "colour by rank: rank 1 brightest, every other rank darker; rank agrees with top_ids", `${rankOk}/${scoredN}`);
        check((await page.textContent("#ticks")).includes("rank 1"), "the legend follows the colour mode", await page.textContent("#ticks"));
        await page.selectOption("#colorby", "quantile");
        const qBg = await bgs();
        const byLp = wl.token_logprobs.map((v, i) => [v, i]).filter(([v]) => v !== null).sort((a, b) => a[0] - b[0]);
        let mono = true;
        for (let j = 1; j < byLp.length; j++) if (lum(qBg[byLp[j][1]]) + 1e-9 < lum(qBg[byLp[j - 1][1]])) mono = false;
        const qColours = new Set(byLp.map(([, i]) => qBg[i]));
        check(mono && qBg[byLp[byLp.length - 1][1]] === BRIGHT && qColours.size >= colours.size,
              "colour by quantile: brightness follows the logprob's rank in this prompt, spread over the scale",
              `monotonic ${mono}, ${qColours.size} vs ${colours.size} colours`);
        await page.selectOption("#colorby", "logprob");
        const back = await bgs();
        check(back.every((b, i) => b === got[i].bg), "back to colour by logprob: the first colours again");
        await ctx.grantPermissions(["clipboard-read", "clipboard-write"], { origin: new URL(base).origin });
        await page.click("#copy");
        await page.waitForFunction(() => /copied|failed/.test(document.querySelector("#copied").textContent), null, { timeout: 3000 }).catch(() => {});
        const clip = await page.evaluate(() => navigator.clipboard.readText()).catch((e) => "error: " + e);
        let cj = null;
        try { cj = JSON.parse(clip); } catch { cj = null; }
        check(cj && JSON.stringify(cj.choices[0].logprobs) === JSON.stringify(wl), "Copy JSON puts the response on the clipboard",
              `${await page.textContent("#copied")} ${String(clip).slice(0, 120)}`);

        // ---- 3. hover a token: its top-K ----
        let hi2 = wl.token_logprobs.findIndex((v, i) => v !== null && i > 3 && wl.top_ids[i].findIndex((r) => r[0] === wl.token_ids[i]) >= 0);
        if (hi2 < 0) hi2 = 1;
        await page.hover(`#tokens .t[data-i="${hi2}"]`);
        await page.waitForSelector("#tip:not([hidden])", { timeout: 3000 });
        const tip = await page.$eval("#tip", (t) => ({
            text: t.innerText,
            ids: [...t.querySelectorAll("tbody tr:not(.gap)")].map((r) => Number(r.children[2].textContent)),
            me: [...t.querySelectorAll("tbody tr.me")].map((r) => Number(r.children[2].textContent)),
        }));
        const wantIds = wl.top_ids[hi2].map((r) => r[0]);
        check(JSON.stringify(tip.ids) === JSON.stringify(wantIds), "hover shows the top-K from top_ids, in order",
              `${JSON.stringify(tip.ids)} vs ${JSON.stringify(wantIds)}`);
        check(tip.ids.length >= K, "hover lists at least K alternatives", tip.ids.length);
        check(tip.me.length === 1 && tip.me[0] === wl.token_ids[hi2], "hover marks the scored token's row", JSON.stringify(tip.me));
        const lpShown = wl.token_logprobs[hi2].toFixed(4).replace("-", "−");
        check(tip.text.includes(lpShown), "hover shows the logprob", `${lpShown} in ${tip.text.slice(0, 200)}`);
        check(tip.text.includes(`id ${wl.token_ids[hi2]}`), "hover shows the token id");
        check(tip.text.includes(`${wl.rank[hi2]} of `), "hover shows the exact rank", tip.text.slice(0, 200));
        await page.screenshot({ path: path.join(OUT, "page-hover.png") });
        // the alternatives' texts: every row's text equals the top_logprobs key with its value, or a prompt token of that id
        const rowTexts = await page.$$eval("#tip tbody tr:not(.gap) td.txt", (tds) => tds.map((td) => td.textContent));
        const show = (s) => s.replace(/ /g, "·").replace(/\t/g, "→").replace(/\n/g, "↵");
        let named = 0;
        wl.top_ids[hi2].forEach(([id, v], j) => {
            const keyed = Object.entries(wl.top_logprobs[hi2]).filter(([, kv]) => kv === v).map(([k]) => show(k));
            const own = wl.token_ids.map((x, n) => (x === id ? show(wl.tokens[n]) : null)).filter((x) => x !== null);
            if (keyed.includes(rowTexts[j]) || own.includes(rowTexts[j])) named++;
        });
        check(named === wl.top_ids[hi2].length, "alternatives are named by their own text", `${named}/${wl.top_ids[hi2].length}: ${JSON.stringify(rowTexts)}`);

        // the "most surprising" buttons open those tokens, the lowest logprob first
        await page.mouse.move(5, 5);
        const worst = await page.$$eval("#worst button", (bs) => bs.map((b) => Number(b.dataset.i)));
        check(worst.length === Math.min(5, scoredN) && wl.token_logprobs[worst[0]] === wl.token_logprobs[lo],
              "most surprising tokens listed, lowest logprob first", JSON.stringify(worst));
        const pick = worst.length > 1 ? 1 : 0;
        await page.setViewportSize({ width: 1100, height: 900 }); // room for the card below its token
        await page.click(`#worst button >> nth=${pick}`);
        const pinnedI = await page.$eval("#tokens .t.sel", (e) => Number(e.dataset.i)).catch(() => -1);
        check(pinnedI === worst[pick] && await page.isVisible("#tip"), "a most-surprising button opens its token", `${pinnedI} vs ${worst[pick]}`);
        await page.screenshot({ path: path.join(OUT, "page.png") });
        await page.keyboard.press("Escape");
        await page.setViewportSize({ width: 1100, height: 820 });

        // ---- 4. keyboard: arrows move the selection, Escape closes; Ctrl+Enter scores ----
        await page.mouse.move(5, 5);
        await page.focus("#tokens");
        await page.keyboard.press("Home");
        await page.keyboard.press("ArrowRight");
        const sel = await page.$eval("#tokens .t.sel", (e) => e.dataset.i).catch(() => null);
        check(sel === "1", "arrow keys select tokens", sel);
        check(await page.isVisible("#tip"), "the selected token's card is shown");
        await page.keyboard.press("Escape");
        check(await page.isHidden("#tip"), "Escape closes the card");
        await page.fill("#prompt", "The cat sat.");
        await page.focus("#prompt");
        await page.keyboard.press("Control+Enter");
        const want2 = await direct(base, { prompt: "The cat sat.", echo: true, max_tokens: 0, logprobs: K, add_special_tokens: true, stats: true });
        await page.waitForFunction((n) => document.querySelectorAll("#tokens .t").length === n, want2.json.choices[0].logprobs.tokens.length, { timeout: 10000 })
            .then(() => check(true, "Ctrl+Enter scores"), (e) => check(false, "Ctrl+Enter scores", e.message));

        // ---- 5. errors: over-long prompt (server's message), network error ----
        if (small) {
            const longPrompt = "Once upon a time, there was a little girl named Lily. ".repeat(8);
            const bad = await direct(small.base, { prompt: longPrompt, echo: true, max_tokens: 0, logprobs: K, add_special_tokens: true });
            check(bad.status === 400 && bad.json.error && typeof bad.json.error.message === "string",
                  "direct over-long prompt is a 400 with error.message", JSON.stringify(bad.json).slice(0, 300));
            await page.goto(small.base);
            await page.fill("#prompt", "The cat sat.");   // a result first: the error must replace it
            await page.click("#score");
            await page.waitForFunction(() => document.querySelectorAll("#tokens .t").length > 0, null, { timeout: 10000 });
            await page.fill("#prompt", longPrompt);
            await page.selectOption("#k", String(K));
            await page.click("#score");
            await page.waitForSelector("#error:not([hidden])", { timeout: 10000 }).catch(() => {});
            const errText = (await page.textContent("#error")) || "";
            check(bad.json.error && errText.includes(bad.json.error.message), "the page shows the server's error message",
                  `${JSON.stringify(errText)} vs ${bad.json.error && JSON.stringify(bad.json.error.message)}`);
            check(errText.includes("400"), "the error shows the HTTP status", errText);
            check(await page.locator("#tokens .t").count() === 0 && (await page.textContent("#summary")) === "", "an error replaces the previous result");
            await page.screenshot({ path: path.join(OUT, "page-error.png") });
            // kill that server: the next Score is a network error, shown as text
            small.proc.kill("SIGTERM");
            await new Promise((r) => (small.proc.exitCode !== null ? r() : small.proc.once("exit", r)));
            await page.fill("#prompt", "The dog.");
            await page.click("#score");
            await page.waitForFunction(() => /Network error/.test(document.querySelector("#error").textContent), null, { timeout: 10000 })
                .then(() => check(true, "a network error is shown"), (e) => check(false, "a network error is shown", e.message));
        } else {
            skipped("over-long prompt and network error need the real server (no --base)");
        }

        // ---- 6. a 4,000-token response renders in one pass and stays responsive ----
        const big = bigResponse(4000, 10);
        await page.goto(base);
        await page.route("**/v1/completions", (route) => route.fulfill({ status: 200, contentType: "application/json", body: JSON.stringify(big) }));
        await page.selectOption("#k", "10");
        const t0 = Date.now();
        await page.click("#score");
        await page.waitForFunction(() => document.querySelectorAll("#tokens .t").length === 4000, null, { timeout: 10000 });
        const renderMs = Date.now() - t0;
        check(renderMs < 3000, "4,000 tokens render in under 3 s", `${renderMs} ms`);
        const t1 = Date.now();
        await page.hover('#tokens .t[data-i="3999"]');
        await page.waitForSelector("#tip:not([hidden])", { timeout: 3000 });
        const hoverMs = Date.now() - t1;
        check(hoverMs < 1000, "hovering among 4,000 tokens answers in under 1 s", `${hoverMs} ms`);
        const tipIds = await page.$$eval("#tip tbody tr:not(.gap)", (rs) => rs.map((r) => Number(r.children[2].textContent)));
        check(JSON.stringify(tipIds) === JSON.stringify(big.choices[0].logprobs.top_ids[3999].map((r) => r[0])), "the big response's card shows its top_ids");
        // an alternative whose text lost its top_logprobs key to a higher-ranked one is named by /detokenize
        const dt = await fetch(base + "detokenize", { method: "POST", headers: { "Content-Type": "application/json" }, body: '{"tokens":[101]}' })
            .then((r) => r.json()).catch(() => null);
        await page.mouse.move(5, 5);
        await page.hover('#tokens .t[data-i="5"]');
        await page.waitForSelector("#tip:not([hidden])", { timeout: 3000 });
        const cell101 = () => page.$$eval("#tip tbody tr:not(.gap)", (rs) => {
            const r = rs.find((x) => x.children[2].textContent === "101");
            return r ? r.children[1].textContent : null;
        });
        await page.waitForFunction(() => [...document.querySelectorAll("#tip tbody tr:not(.gap)")]
            .some((r) => r.children[2].textContent === "101" && r.children[1].textContent !== "…"), null, { timeout: 3000 }).catch(() => {});
        const c101 = await cell101();
        const want101 = dt && typeof dt.prompt === "string" ? show(dt.prompt) : "?";
        check(c101 === want101, "an alternative without its own key is named by /detokenize", `${JSON.stringify(c101)} vs ${JSON.stringify(want101)}`);
        console.error(`NOTE: 4,000 tokens: click to rendered ${renderMs} ms, hover ${hoverMs} ms`);
        await page.unroute("**/v1/completions");

        // ---- 7. dark mode screenshot, no page errors, nothing fetched off this machine ----
        {
            const dark = await browser.newContext({ viewport: { width: 1100, height: 820 }, colorScheme: "dark" });
            const dp = await dark.newPage();
            await dp.goto(base);
            await dp.fill("#prompt", PROMPT);
            await dp.click("#score");
            await dp.waitForFunction(() => document.querySelectorAll("#tokens .t").length > 0, null, { timeout: 10000 });
            await dp.click('#tokens .t[data-i="12"]');
            await dp.screenshot({ path: path.join(OUT, "page-dark.png") });
            await dark.close();
        }
        {   // a phone: nothing wider than the screen, and a tap opens a token's card
            const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, hasTouch: true, isMobile: true });
            const pp = await phone.newPage();
            await pp.goto(base);
            await pp.fill("#prompt", PROMPT);
            await pp.click("#score");
            await pp.waitForFunction(() => document.querySelectorAll("#tokens .t").length > 0, null, { timeout: 10000 });
            const [sw, cw] = await pp.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
            check(sw <= cw, "no horizontal overflow on a 390 px screen", `${sw} > ${cw}`);
            await pp.tap('#tokens .t[data-i="6"]');
            check(await pp.isVisible("#tip") && (await pp.$eval("#tip", (t) => t.dataset.i)) === "6", "a tap opens the token's card");
            await phone.close();
        }
        // ---- 8. serve --api-key: the page sends the key of its address's #key=, drops it from
        //         the address bar, and asks for it on a 401 ----
        if (!argBase) {
            const keyed = await startServer(["--api-key", "k3y-for-the-page"]);
            servers.push(keyed);
            const kc = await browser.newContext({ viewport: { width: 1100, height: 820 } });
            const kp = await kc.newPage();
            const auths = [];
            kp.on("request", (r) => { if (r.url().endsWith("/v1/completions")) auths.push(r.headers()["authorization"] || ""); });
            await kp.goto(keyed.base + "#key=k3y-for-the-page");
            check(!kp.url().includes("key="), "the key is dropped from the address bar", kp.url());
            await kp.fill("#prompt", PROMPT);
            await kp.click("#score");
            await kp.waitForFunction(() => document.querySelectorAll("#tokens .t").length > 0 || !document.getElementById("error").hidden, null, { timeout: 10000 });
            check(await kp.locator("#tokens .t").count() > 0 && auths[0] === "Bearer k3y-for-the-page",
                  "with #key= the page scores, sending Authorization: Bearer KEY", `${auths.join(",")} ${await kp.textContent("#error")}`);
            await kc.close();
            const kc2 = await browser.newContext({ viewport: { width: 1100, height: 820 } });
            const kp2 = await kc2.newPage();
            let asked = 0;
            kp2.on("dialog", async (d) => { asked++; await d.accept("k3y-for-the-page"); });
            await kp2.goto(keyed.base);
            await kp2.fill("#prompt", PROMPT);
            await kp2.click("#score");
            await kp2.waitForFunction(() => document.querySelectorAll("#tokens .t").length > 0 || !document.getElementById("error").hidden, null, { timeout: 10000 });
            check(asked === 1 && await kp2.locator("#tokens .t").count() > 0,
                  "without a key the page asks for it on the 401 and then scores", `asked ${asked}: ${await kp2.textContent("#error")}`);
            await kc2.close();
        }
        check(pageErrors.length === 0, "no JavaScript errors in the page", pageErrors.join(" | "));
        check(offsite.length === 0, "the page fetches nothing but its own server", offsite.join(" "));
    } catch (e) {
        check(false, "page test ran to the end", e && e.stack ? e.stack : e);
    } finally {
        if (browser) await browser.close().catch(() => {});
        for (const s of servers) if (s.proc.exitCode === null) s.proc.kill("SIGTERM");
    }
}

main().then(done, (e) => { check(false, "page test", e && e.stack ? e.stack : e); done(); });
