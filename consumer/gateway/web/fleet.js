/*
 * fleet.js -- the parley gateway's fleet page (served as /fleet.js; no
 * build step, no dependencies): GET /v1/fleet every REFRESH_MS, drawn as
 * two tables and two canvas charts (docs/fleet.md).
 *
 * Rules it keeps, like playground.js:
 *  - text from the fleet (worker ids, hosts, model names: any worker can
 *    write them) reaches the page as textContent, never as markup;
 *  - the API key is the playground's (sessionStorage, same tab) and goes
 *    out only in the Authorization header to this gateway;
 *  - every read ends in a drawing or an error shown on the page within
 *    FETCH_MS (no endless spinner when Kafka or the gateway is gone).
 */
"use strict";

const KEY_STORE = "parley.playground.key";
const REFRESH_MS = 2000;
const FETCH_MS = 8000;

const $ = (id) => document.getElementById(id);

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function apiKey() {
  return sessionStorage.getItem(KEY_STORE) || "";
}

function showKeyState() {
  $("key-state").textContent = apiKey() ? "key set for this tab" : "no key";
}

function fmt(x, digits) {
  return x === null || x === undefined ? "–" : Number(x).toFixed(digits);
}

function showError(msg) {
  document.body.dataset.state = "error";
  const e = $("fleet-error");
  e.textContent = msg;
  e.hidden = false;
}

/* One worker's row: membership, partitions, lag, and its status record. */
function workerRow(w, lagOf) {
  const s = w.status;
  const state = !s ? (w.member ? "no status" : "gone") : s.stale ? "stale" : s.state;
  const tr = el("tr");
  tr.dataset.worker = w.id;
  tr.dataset.state = state;
  if (s && s.stale) tr.className = "stale";
  if (!w.member) tr.className = "gone";
  const lag = w.partitions.reduce((a, p) => a + (lagOf[p] || 0), 0);
  const cells = [
    ["worker", w.id], ["host", w.host], ["partitions", w.partitions.join(", ") || "none"],
    ["lag", w.member ? lag : null, "num"], ["tps", s ? fmt(s.turns_per_s, 2) : null, "num"],
    ["cache", s && s.cache_share !== null ? fmt(100 * s.cache_share, 0) + "%" : null, "num"],
    ["model", s ? s.model : null], ["state", state, "state-" + state.replace(/ /g, "-")],
  ];
  for (const [col, v, cls] of cells) {
    const td = el("td", v === null ? "–" : v, cls);
    td.dataset.col = col;
    if (col === "lag") td.dataset.value = v === null ? "" : String(v);
    tr.append(td);
  }
  return tr;
}

function drawTables(f) {
  const lagOf = {};
  const prows = f.partitions.map((p) => {
    lagOf[p.partition] = p.lag;
    const tr = el("tr");
    tr.dataset.partition = p.partition;
    tr.dataset.lag = p.lag;
    for (const v of [p.partition, p.owner || "unassigned", p.end, p.committed, p.lag]) {
      tr.append(el("td", v === null ? "–" : v, typeof v === "number" ? "num" : ""));
    }
    return tr;
  });
  $("partitions").tBodies[0].replaceChildren(...prows);
  $("workers").tBodies[0].replaceChildren(...f.workers.map((w) => workerRow(w, lagOf)));
  $("topic").textContent = f.topic;
  const members = f.workers.filter((w) => w.member).length;
  $("summary").textContent = `group ${f.group} (${f.group_state}): ${members} member(s), ` +
    `${f.partitions.length} partition(s), total lag ${f.total_lag}; ` +
    `updated ${new Date(f.updated_ms).toLocaleTimeString()}`;
}

/* A line chart of series [[t, v], ...] on a canvas, y from 0 to the max. */
function drawChart(canvas, pts, digits) {
  const g = canvas.getContext("2d");
  const W = canvas.width, H = canvas.height, L = 44, B = 18, T = 8, R = 8;
  g.clearRect(0, 0, W, H);
  g.font = "11px system-ui, sans-serif";
  g.fillStyle = "#5a6572";
  g.strokeStyle = "#d0d4da";
  g.strokeRect(L, T, W - L - R, H - T - B);
  if (pts.length === 0) {
    g.fillText("no samples yet", L + 8, T + 16);
    return;
  }
  const t0 = pts[0][0], t1 = Math.max(pts[pts.length - 1][0], t0 + 1);
  const vmax = Math.max(1e-9, ...pts.map((p) => p[1])) * 1.1;
  g.fillText(fmt(vmax, digits), 2, T + 10);
  g.fillText("0", 2, H - B);
  g.fillText(`${Math.round((t1 - t0) / 1000)} s`, W - R - 40, H - 4);
  g.strokeStyle = "#2f6fde";
  g.lineWidth = 1.5;
  g.beginPath();
  pts.forEach(([t, v], i) => {
    const x = L + ((t - t0) / (t1 - t0)) * (W - L - R), y = H - B - (v / vmax) * (H - T - B);
    if (i) g.lineTo(x, y);
    else g.moveTo(x, y);
  });
  g.stroke();
}

let started = false;

function start() {
  if (!started) refresh();
  started = true;
}

async function refresh() {
  try {
    const h = {};
    if (apiKey()) h.Authorization = "Bearer " + apiKey();
    const resp = await fetch("/v1/fleet", { headers: h, signal: AbortSignal.timeout(FETCH_MS) });
    let j = null;
    try {
      j = await resp.json();
    } catch (e) {
      /* not JSON: the status says it */
    }
    if (!resp.ok) {
      const why = j && j.error && j.error.message ? ": " + j.error.message : "";
      showError(`the fleet cannot be read (HTTP ${resp.status}${why})`);
      return;
    }
    drawTables(j);
    drawChart($("lag-chart"), j.history.map((s) => [s[0], s[1]]), 0);
    drawChart($("tps-chart"), j.history.map((s) => [s[0], s[2]]), 2);
    $("fleet-error").hidden = true;
    document.body.dataset.state = "ok";
  } catch (e) {
    showError("the gateway does not answer: " + (e && e.message ? e.message : e));
  } finally {
    setTimeout(refresh, REFRESH_MS);
  }
}

function init() {
  $("key-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const k = $("key").value.trim();
    if (k) sessionStorage.setItem(KEY_STORE, k);
    $("key").value = "";
    showKeyState();
    start();
  });
  $("key-forget").addEventListener("click", () => {
    sessionStorage.removeItem(KEY_STORE);
    showKeyState();
  });
  showKeyState();
  /* without a stored key, wait for one ("Use key" with the field empty
   * reads a gateway that needs none) */
  if (apiKey()) start();
  else $("summary").textContent = "enter the API key above";
}

document.addEventListener("DOMContentLoaded", init);
