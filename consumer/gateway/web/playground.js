/*
 * playground.js -- the parley gateway's chat playground (served as
 * /playground.js; no build step, no dependencies).
 *
 * Safety rules this file keeps (tests/py/test_playground.py checks them):
 *  - every text that came from a model or a user reaches the page through
 *    showText (textContent), never through innerHTML or similar;
 *  - the API key lives in sessionStorage and goes out only in the
 *    Authorization header of calls to this same gateway, never in a URL;
 *  - every call ends in a reply, an error shown on the page, or a timeout
 *    (no endless spinner when the fleet is stopped).
 */
"use strict";

const KEY_STORE = "parley.playground.key";
const IDLE_MS = 30000; /* a stream silent this long (no keep-alive even) is given up */

const $ = (id) => document.getElementById(id);
let convo = []; /* the conversation: [{role, content}], sent whole each turn */
let running = null; /* the AbortController of the request in flight */

/* The one way text reaches the page: as text, never as markup. */
function showText(el, text) {
  el.textContent = text;
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) showText(e, text);
  return e;
}

function apiKey() {
  return sessionStorage.getItem(KEY_STORE) || "";
}

function headers() {
  const h = { "Content-Type": "application/json" };
  const k = apiKey();
  if (k) h.Authorization = "Bearer " + k;
  return h;
}

function setStatus(text) {
  showText($("status"), text);
}

function showKeyState() {
  showText($("key-state"), apiKey() ? "key set for this tab" : "no key");
}

/* The error message of a failed API call: OpenAI's error JSON when there is one. */
async function errorOf(resp) {
  let msg = "HTTP " + resp.status;
  try {
    const j = await resp.json();
    if (j && j.error && j.error.message) msg += ": " + j.error.message;
  } catch (e) {
    /* not JSON: the status says it */
  }
  if (resp.status === 401) msg += " (enter the API key above)";
  return msg;
}

async function loadModels() {
  const sel = $("model");
  const keep = sel.value;
  setStatus("loading models...");
  try {
    const resp = await fetch("/v1/models", { headers: headers(), signal: AbortSignal.timeout(10000) });
    if (!resp.ok) {
      setStatus("models: " + (await errorOf(resp)));
      return;
    }
    const j = await resp.json();
    sel.replaceChildren();
    for (const m of j.data || []) {
      const o = el("option", null, m.id);
      o.value = m.id;
      sel.appendChild(o);
    }
    if (keep) sel.value = keep;
    setStatus((j.data || []).length ? "" : "the gateway lists no models (gateway.models is empty)");
  } catch (e) {
    setStatus("models: cannot reach the gateway (" + e.message + ")");
  }
}

/* The request body of the next turn, or throws with a message for the user. */
function buildRequest() {
  const model = $("model").value;
  if (!model) throw new Error("pick a model first");
  const msgs = [];
  const sys = $("system").value.trim();
  if (sys) msgs.push({ role: "system", content: sys });
  const body = {
    model: model,
    messages: msgs.concat(convo),
    stream: true,
    stream_options: { include_usage: true },
    temperature: Number($("temperature").value),
    max_tokens: Number($("max-tokens").value),
    n: Number($("n").value) || 1,
  };
  const fmt = $("format").value;
  if (fmt === "json_object") body.response_format = { type: "json_object" };
  if (fmt === "json_schema") {
    let schema;
    try {
      schema = JSON.parse($("schema").value);
    } catch (e) {
      throw new Error("the JSON schema does not parse: " + e.message);
    }
    body.response_format = { type: "json_schema", json_schema: { name: "playground", schema: schema, strict: true } };
  }
  return body;
}

function addMessage(role, text) {
  const m = el("div", "msg " + role);
  m.appendChild(el("div", "role", role));
  m.appendChild(el("div", "text", text));
  $("log").appendChild(m);
  m.scrollIntoView({ block: "end" });
  return m;
}

/* The assistant's turn element: one text block per choice, stats below. */
function addReply(n) {
  const m = el("div", "msg assistant");
  m.dataset.state = "waiting";
  m.appendChild(el("div", "role", "assistant"));
  const texts = [];
  for (let i = 0; i < n; i++) {
    const c = el("div", "choice");
    if (n > 1) c.appendChild(el("div", "role", "choice " + (i + 1)));
    const t = el("div", "text", "");
    c.appendChild(t);
    m.appendChild(c);
    texts.push(t);
  }
  const stats = el("div", "stats");
  m.appendChild(stats);
  $("log").appendChild(m);
  return { root: m, texts: texts, stats: stats };
}

function addStat(stats, name, label, value) {
  const s = el("span", "stat", label + ": " + value);
  s.dataset.stat = name;
  s.dataset.value = String(value);
  stats.appendChild(s);
}

function showError(reply, msg) {
  reply.root.dataset.state = "error";
  reply.root.appendChild(el("div", "error", msg));
  setStatus("error: " + msg);
}

/* Read the server-sent events of one streamed reply into `reply`. */
async function readStream(resp, reply, t0, ctl) {
  const out = { text: reply.texts.map(() => ""), finish: reply.texts.map(() => null), usage: null, tFirst: 0, error: null };
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  let idle = setTimeout(() => ctl.abort(new Error("no answer from the gateway for " + IDLE_MS / 1000 + " s")), IDLE_MS);
  try {
    for (;;) {
      const { value, done } = await reader.read();
      clearTimeout(idle);
      if (done) break;
      idle = setTimeout(() => ctl.abort(new Error("no answer from the gateway for " + IDLE_MS / 1000 + " s")), IDLE_MS);
      buf += dec.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const event = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        for (const line of event.split("\n")) {
          if (!line.startsWith("data: ")) continue; /* comments: keep-alives */
          const data = line.slice(6);
          if (data === "[DONE]") return out;
          const j = JSON.parse(data);
          if (j.error) {
            out.error = j.error.message || "the stream failed";
            continue;
          }
          if (j.usage) out.usage = j.usage;
          for (const c of j.choices || []) {
            const i = c.index || 0;
            if (i >= out.text.length) continue;
            const piece = (c.delta && c.delta.content) || "";
            if (piece) {
              if (!out.tFirst) out.tFirst = performance.now();
              out.text[i] += piece;
              showText(reply.texts[i], out.text[i]); /* the text grows as it streams */
              reply.root.dataset.state = "streaming";
            }
            if (c.finish_reason) out.finish[i] = c.finish_reason;
          }
        }
      }
    }
  } finally {
    clearTimeout(idle);
  }
  if (!out.error) out.error = "the stream ended without [DONE]";
  return out;
}

function showStats(reply, out, t0, tEnd) {
  const u = out.usage || {};
  const cached = (u.prompt_tokens_details && u.prompt_tokens_details.cached_tokens) || 0;
  addStat(reply.stats, "prompt_tokens", "prompt tokens", u.prompt_tokens ?? "?");
  addStat(reply.stats, "cached_tokens", "cached", cached);
  addStat(reply.stats, "ttft_ms", "first token", out.tFirst ? Math.round(out.tFirst - t0) + " ms" : "-");
  const gen = out.tFirst ? (tEnd - out.tFirst) / 1000 : 0;
  const tps = u.completion_tokens && gen > 0 ? (u.completion_tokens / gen).toFixed(1) : "-";
  addStat(reply.stats, "tokens_per_s", "tokens/s", tps);
  addStat(reply.stats, "finish_reason", "finish", out.finish.map((f) => f || "?").join(", "));
}

async function send(text) {
  if (running) return;
  let body;
  convo.push({ role: "user", content: text });
  try {
    body = buildRequest();
  } catch (e) {
    convo.pop();
    setStatus(e.message);
    return;
  }
  addMessage("user", text);
  const reply = addReply(body.n);
  const ctl = new AbortController();
  running = ctl;
  $("send").disabled = true;
  $("stop").disabled = false;
  setStatus("waiting for the fleet...");
  const t0 = performance.now();
  try {
    const resp = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: headers(),
      body: JSON.stringify(body),
      signal: ctl.signal,
    });
    if (!resp.ok) {
      convo.pop();
      showError(reply, await errorOf(resp));
      return;
    }
    const out = await readStream(resp, reply, t0, ctl);
    const tEnd = performance.now();
    if (out.error) {
      convo.pop();
      showError(reply, out.error);
      return;
    }
    convo.push({ role: "assistant", content: out.text[0] });
    showStats(reply, out, t0, tEnd);
    reply.root.dataset.state = "done";
    setStatus("");
  } catch (e) {
    convo.pop();
    const why = ctl.signal.reason instanceof Error ? ctl.signal.reason.message : e.message;
    showError(reply, "the request failed: " + why);
  } finally {
    running = null;
    $("send").disabled = false;
    $("stop").disabled = true;
  }
}

function init() {
  $("key-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const k = $("key").value.trim();
    if (k) sessionStorage.setItem(KEY_STORE, k);
    $("key").value = "";
    showKeyState();
    loadModels();
  });
  $("key-forget").addEventListener("click", () => {
    sessionStorage.removeItem(KEY_STORE);
    showKeyState();
  });
  $("models-reload").addEventListener("click", loadModels);
  const fmt = () => $("schema-label").classList.toggle("hidden", $("format").value !== "json_schema");
  $("format").addEventListener("change", fmt);
  fmt();
  $("new-chat").addEventListener("click", () => {
    if (running) running.abort(new Error("stopped"));
    convo = [];
    $("log").replaceChildren();
    setStatus("");
  });
  $("stop").addEventListener("click", () => running && running.abort(new Error("stopped")));
  $("composer").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const text = $("input").value;
    if (!text.trim() || running) return;
    $("input").value = "";
    send(text);
  });
  $("input").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      $("composer").requestSubmit();
    }
  });
  showKeyState();
  /* without a stored key, wait for one (Reload models works keyless too) */
  if (apiKey()) loadModels();
  else setStatus("enter the API key above (or press Reload models if the gateway needs none)");
}

document.addEventListener("DOMContentLoaded", init);
