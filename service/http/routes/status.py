"""The built-in status page (``GET /``) and the history it plots."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from core import __version__
from service.http.deps import App, Read
from service.http.views import challenger_info, model_info
from service.model.live import LiveModel

router = APIRouter(tags=["status"])


@router.get("/v1/status/history", dependencies=[Read])
def status_history(app: App, request: Request) -> dict:
    """Live models (members side by side, drift, learning; beyond `METRICS_TOP_N`, those
    `/metrics` shows) and the sampled history."""
    history = request.app.state.history
    models = []
    now = time.time()
    serving = app.models.serving()
    shown = app.metrics.exported()  # (the models a scrape shows, when there are many)
    if shown is None:
        shown = app.metrics.choose(live.name for live in serving)
    for live in serving:
        if live.name not in shown:
            continue
        models.append(
            live.describe(model_status)
            | {"snapshot_age_seconds": now - (live.record.last_snapshot_at or live.created_at)}
        )
    return {
        "service_version": __version__,
        "now": now,
        "interval": history.interval,
        "span": history.span,
        "models": models,
        "samples": history.samples(),
    }


#: what the status page shows of a model's info (``GET /v1/models/{name}``)
MODEL_FIELDS = (
    "name",
    "kind",
    "task",
    "version",
    "examples_learned",
    "predictions",
    "metrics",
    "member",
    "variant",
    "promotion",
    "serve",
    "promotions",
    "drift",
    "learning",
)


def model_status(live: LiveModel) -> dict:
    """A model as the status page shows it, read at once under its lock: its info (what
    serves: ``member`` and ``variant``; drift; learning paused and backlog) and every
    member, the champion first, with its variants side by side (each one's progressive
    metrics, comparison with what serves, and whether it serves)."""
    info = model_info(live)
    members = []
    for member in live.group.members():
        shown = challenger_info(live, member)
        serving = shown["name"] == info["member"]
        members.append(
            {
                "name": shown["name"],
                "kind": shown["kind"],
                "examples_learned": shown["examples_learned"],
                "serving": serving,
                "variants": {
                    variant: {
                        "serving": serving and variant == info["variant"],
                        "metrics": figures["metrics"],
                        "comparison": figures["comparison"],
                    }
                    for variant, figures in shown["variants"].items()
                },
            }
        )
    return {key: info[key] for key in MODEL_FIELDS} | {"members": members}


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def status_page() -> HTMLResponse:
    """A self-contained status page (no external assets)."""
    return HTMLResponse(PAGE, headers={"cache-control": "no-store"})


PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>lorentztron status</title>
<style>
  :root { --fg: #1d2433; --muted: #667085; --line: #e4e7ec; --bg: #f7f8fa; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif;
         color: var(--fg); background: var(--bg); }
  header { display: flex; align-items: baseline; gap: 16px; padding: 14px 24px;
           background: #fff; border-bottom: 1px solid var(--line); }
  header h1 { font-size: 18px; margin: 0; }
  header .muted { font-size: 13px; }
  header nav { margin-left: auto; display: flex; gap: 14px; font-size: 13px; }
  a { color: #2e6fdb; }
  main { padding: 16px 24px; max-width: 1240px; }
  .muted { color: var(--muted); }
  section { background: #fff; border: 1px solid var(--line); border-radius: 8px;
            padding: 12px 16px; margin-bottom: 16px; }
  h2 { font-size: 14px; margin: 0 0 8px; }
  table { border-collapse: collapse; width: 100%; }
  th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line);
           font-variant-numeric: tabular-nums; }
  th { font-weight: 600; color: var(--muted); font-size: 12px; }
  td.num, th.num { text-align: right; }
  .grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(540px, 1fr));
          gap: 16px; }
  .grid section { margin: 0; }
  svg { display: block; width: 100%; height: auto; }
  svg text { font-size: 11px; fill: var(--muted); }
  .legend { display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 12px; margin-top: 4px; }
  .legend i { display: inline-block; width: 10px; height: 10px; border-radius: 2px;
              margin-right: 5px; vertical-align: -1px; }
  h3 { font-size: 13px; margin: 14px 0 4px; }
  h3 span { font-weight: normal; }
  p.note { margin: 0 0 4px; font-size: 12px; }
  div[data-members] { overflow-x: auto; }
  table.members th, table.members td { padding: 5px 7px; }
  table.members td { white-space: nowrap; }
  tr.serving td { font-weight: 600; }
  td.better { color: #027a48; }
  td.worse, .warn { color: #b54708; }
  #auth { display: none; }
  #error { color: #b42318; }
  input { font: inherit; padding: 4px 6px; }
</style>
</head>
<body>
<header>
  <h1>lorentztron</h1>
  <span class="muted" id="summary">loading&hellip;</span>
  <span class="muted" id="error"></span>
  <nav><a href="docs">API docs</a> <a href="metrics">metrics</a></nav>
</header>
<main>
  <section id="auth">
    <form id="auth-form">
      This service needs a read key:
      <input type="password" id="key" autocomplete="off" placeholder="bearer key">
      <button>Show</button>
    </form>
  </section>
  <section>
    <h2>Models</h2>
    <table>
      <thead><tr>
        <th>name</th><th>kind</th><th>task</th><th class="num">version</th>
        <th class="num">examples learned</th><th class="num">predictions</th>
        <th class="num">accuracy (recent)</th><th class="num">loss (recent)</th>
        <th class="num">RMSE (recent)</th><th class="num">snapshot age</th>
      </tr></thead>
      <tbody id="models"><tr><td colspan="10" class="muted">no models yet</td></tr></tbody>
    </table>
  </section>
  <section>
    <h2>Members</h2>
    <p class="muted note">Every member of a model (the champion, then its challengers) and its
      variants side by side. Each scores every example before learning it, so each is compared
      with what serves on the same examples: the mean difference of their errors (negative:
      fewer errors), its interval and the verdict at the model's confidence.</p>
    <div id="members"><p class="muted">no models yet</p></div>
  </section>
  <div class="grid">
    <section><h2>Progressive accuracy (recent window)</h2><div id="accuracy"></div></section>
    <section><h2>Progressive loss (recent window)</h2><div id="loss"></div></section>
    <section><h2>Request latency, ms (p99 solid, p50 dashed)</h2><div id="latency"></div></section>
    <section><h2>Requests per second</h2><div id="rate"></div></section>
  </div>
</main>
<script>
"use strict";
const COLORS = ["#2e6fdb", "#e8590c", "#2f9e44", "#ae3ec9", "#c92a2a", "#0c8599",
                "#f08c00", "#5c7cfa", "#868e96", "#d6336c"];
const SVG = "http://www.w3.org/2000/svg";

function el(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function niceTicks(lo, hi, n) {
  if (!(hi > lo)) { hi = lo + 1; }
  const raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map(m => m * mag).find(s => s >= raw);
  const ticks = [];
  for (let v = Math.floor(lo / step) * step; v <= hi + step * 1e-9; v += step) ticks.push(v);
  return ticks;
}

function fmt(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "\\u2013";
  const a = Math.abs(v);
  if (a === 0) return "0";
  if (a < 0.01 || a >= 1e5) return v.toExponential(2);
  return a >= 100 ? v.toFixed(0) : a >= 10 ? v.toFixed(1) : v.toFixed(3);
}

function clock(t) {
  return new Date(t * 1000).toTimeString().slice(0, 8);
}

// series: [{name, points: [[t, v|null], ...]}]; a null breaks the line
function chart(target, series, t0, t1, yFixed) {
  const box = document.getElementById(target);
  box.textContent = "";
  // only what the window shows: a sample older than t0 would stretch the axis unseen
  series = series.map(s => ({...s, points: s.points.filter(p => p[0] >= t0)}))
                 .filter(s => s.points.some(p => p[1] !== null && p[1] !== undefined));
  const W = 560, H = 210, L = 52, R = 10, T = 8, B = 24;
  const values = series.flatMap(s => s.points.map(p => p[1])).filter(v => v !== null);
  const svg = el("svg", {viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img"});
  if (!values.length) {
    svg.appendChild(el("text", {x: W / 2, y: H / 2, "text-anchor": "middle"}, "no data yet"));
    box.appendChild(svg);
    return;
  }
  let lo = yFixed ? yFixed[0] : Math.min(...values), hi = yFixed ? yFixed[1] : Math.max(...values);
  if (!yFixed) { const pad = (hi - lo) * 0.08 || Math.abs(hi) * 0.1 || 1; lo -= pad; hi += pad;
                 if (Math.min(...values) >= 0) lo = Math.max(0, lo); }
  const ticks = niceTicks(lo, hi, 4);
  lo = Math.min(lo, ticks[0]); hi = Math.max(hi, ticks[ticks.length - 1]);
  const x = t => L + (W - L - R) * (t - t0) / Math.max(t1 - t0, 1e-9);
  const y = v => T + (H - T - B) * (1 - (v - lo) / (hi - lo));
  for (const v of ticks) {
    svg.appendChild(el("line", {x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: "#eef0f3"}));
    svg.appendChild(el("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end"}, fmt(v)));
  }
  for (let i = 0; i <= 4; i++) {
    const t = t0 + (t1 - t0) * i / 4;
    const anchor = i === 0 ? "start" : i === 4 ? "end" : "middle";
    svg.appendChild(el("text", {x: x(t), y: H - 6, "text-anchor": anchor}, clock(t)));
  }
  svg.appendChild(el("line", {x1: L, x2: W - R, y1: H - B, y2: H - B, stroke: "#c8ccd2"}));
  const legend = document.createElement("div");
  legend.className = "legend";
  series.forEach((s, k) => {
    const color = COLORS[(s.color === undefined ? k : s.color) % COLORS.length];
    let d = "", pen = false, last = null;
    for (const [t, v] of s.points) {
      if (v === null || v === undefined) { pen = false; continue; }
      d += `${pen ? "L" : "M"}${x(t).toFixed(1)},${y(v).toFixed(1)}`;
      pen = true; last = [t, v];
    }
    const line = {d, fill: "none", stroke: color, "stroke-width": 1.8, "stroke-linejoin": "round"};
    if (s.dash) line["stroke-dasharray"] = "4 3";
    if (d) svg.appendChild(el("path", line));
    if (last) svg.appendChild(el("circle", {cx: x(last[0]), cy: y(last[1]), r: 2.5,
                                            fill: color}));
    if (s.legend === false) return;
    const item = document.createElement("span");
    const swatch = document.createElement("i");
    swatch.style.background = color;
    item.appendChild(swatch);
    const value = s.legendValue ? s.legendValue() : last ? fmt(last[1]) : "";
    item.appendChild(document.createTextNode(s.name + "  " + value));
    legend.appendChild(item);
  });
  box.appendChild(svg);
  box.appendChild(legend);
}

function age(seconds) {
  if (seconds === null || seconds === undefined) return "\u2013";
  if (seconds < 90) return Math.round(seconds) + " s";
  if (seconds < 5400) return Math.round(seconds / 60) + " min";
  return (seconds / 3600).toFixed(1) + " h";
}

function modelSeries(samples, field, label, current) {
  // the models served now (a deleted model leaves the legends)
  const names = [...new Set(samples.flatMap(s => Object.keys(s.models)))]
    .filter(name => current.has(name)).sort();
  return names.map((name, k) => ({
    name: label ? label(name, samples) : name,
    color: k,
    points: samples.map(s => [s.t, s.models[name] ? s.models[name][field] : null]),
  }));
}

function endpointSeries(samples, field, scale, companion) {
  // one colour per endpoint; `companion` (p50 under p99) is drawn dashed in the same colour
  const names = [...new Set(samples.flatMap(s => Object.keys(s.endpoints)))].sort();
  const pick = (name, f) => samples.map(s => {
    const e = s.endpoints[name];
    return [s.t, e && e[f] !== null && e[f] !== undefined ? e[f] * scale : null];
  });
  const lastOf = points => points.map(p => p[1]).filter(v => v !== null).pop();
  const series = [];
  names.forEach((name, k) => {
    // "POST predict", "GET /{name}", "DELETE /{name}", "POST create": the method says which
    const [method, path] = name.split(" ");
    const short = method + " " + (path.replace("/v1/models", "").replace("/{name}/", "") ||
                                  "create");
    const points = pick(name, field);
    const entry = {name: short, color: k, points};
    if (companion) {
      const others = pick(name, companion);
      entry.legendValue = () => `${field} ${fmt(lastOf(points))} \u00b7 ` +
                                `${companion} ${fmt(lastOf(others))}`;
      series.push({name: short, color: k, points: others, dash: true, legend: false});
    }
    series.push(entry);
  });
  return series;
}

function renderModels(models) {
  const body = document.getElementById("models");
  body.textContent = "";
  if (!models.length) {
    const row = body.insertRow(), cell = row.insertCell();
    cell.colSpan = 10; cell.className = "muted"; cell.textContent = "no models yet";
    return;
  }
  for (const m of models) {
    const row = body.insertRow();
    row.dataset.model = m.name;
    const mt = m.metrics;
    const cells = [
      [m.name], [m.kind], [m.task], [m.version, 1], [m.examples_learned, 1],
      [m.predictions, 1], [fmt(mt.recent_accuracy), 1],
      [mt.recent_loss === null ? fmt(null) : fmt(mt.recent_loss) + " " + mt.loss_kind, 1],
      [fmt(mt.recent_rmse), 1], [age(m.snapshot_age_seconds), 1],
    ];
    for (const [text, num] of cells) {
      const cell = row.insertCell();
      cell.textContent = String(text);
      if (num) cell.className = "num";
    }
  }
}

function node(tag, text, className) {
  const made = document.createElement(tag);
  if (text !== undefined) made.textContent = text;
  if (className) made.className = className;
  return made;
}

function signed(v) {
  return v === null || v === undefined ? fmt(v) : (v > 0 ? "+" : "") + fmt(v);
}

// what serves, the promotion policy and the drift detector of a model, in words
function modelLine(m) {
  const p = m.promotion, d = m.drift;
  const parts = [`serves ${m.member}/${m.variant}` + (m.serve === "best" ? " (best variant)" : "")];
  parts.push(p.auto ? `automatic promotion after ${p.min_examples} examples at ${p.confidence}`
                    : `promotion by an operator (confidence ${p.confidence})`);
  parts.push(`${m.promotions} promotion(s)`);
  if (d) {
    const last = d.last_detected_at_example;
    parts.push(`drift (${d.detector}): ${d.detections} detection(s)` +
               (last === null ? "" : `, the last at example ${last}`) +
               (d.on_drift === "challenger" ? ", each starts a challenger" : ""));
  } else {
    parts.push("no drift detector");
  }
  return parts.join(" \u00b7 ");
}

const MEMBER_COLUMNS = [
  "member", "kind", "variant", "serves", "examples learned", "accuracy (recent)",
  "accuracy (cumulative)", "loss (recent)", "loss (cumulative)", "vs what serves",
  "paired examples", "error difference", "interval",
];

function renderMembers(models) {
  const box = document.getElementById("members");
  box.textContent = "";
  if (!models.length) {
    box.appendChild(node("p", "no models yet", "muted"));
    return;
  }
  for (const m of models) {
    const block = node("div");
    block.dataset.members = m.name;
    const title = node("h3", m.name + " ");
    title.appendChild(node("span", modelLine(m) + " \u00b7 ", "muted"));
    const paused = m.learning.paused;
    const learning = node("span", paused ? `learning paused, backlog ${m.learning.backlog} ` +
                                           "record(s)" : "learning", paused ? "warn" : "muted");
    learning.dataset.learning = paused ? "paused" : "on";
    title.appendChild(learning);
    block.appendChild(title);
    const table = node("table", undefined, "members");
    const head = table.createTHead().insertRow();
    MEMBER_COLUMNS.forEach((name, k) => head.appendChild(node("th", name, k >= 4 ? "num" : "")));
    const body = table.createTBody();
    for (const member of m.members) {
      for (const [variant, shown] of Object.entries(member.variants)) {
        const row = body.insertRow();
        row.dataset.member = member.name;
        row.dataset.variant = variant;
        if (shown.serving) row.className = "serving";
        const mt = shown.metrics, c = shown.comparison;
        const loss = v => v === null ? fmt(null) : fmt(v) + " " + mt.loss_kind;
        const cells = [
          [member.name], [member.kind], [variant], [shown.serving ? "serves" : ""],
          [member.examples_learned, "num"], [fmt(mt.recent_accuracy), "num"],
          [fmt(mt.accuracy), "num"], [loss(mt.recent_loss), "num"], [loss(mt.loss), "num"],
          [c ? c.verdict : fmt(null), c ? c.verdict : ""],
          [c ? c.examples : fmt(null), "num"], [c ? signed(c.mean_difference) : fmt(null), "num"],
          [c && c.interval ? `[${signed(c.interval[0])}, ${signed(c.interval[1])}]` : fmt(null),
           "num"],
        ];
        for (const [text, className] of cells) {
          const cell = row.insertCell();
          cell.textContent = String(text);
          if (className) cell.className = className;
        }
      }
    }
    block.appendChild(table);
    box.appendChild(block);
  }
}

let key = sessionStorage.getItem("lorentztron-key") || "";
let interval = 5;

async function refresh() {
  const headers = key ? {Authorization: "Bearer " + key} : {};
  let data;
  try {
    const response = await fetch("v1/status/history", {headers, cache: "no-store"});
    if (response.status === 401 || response.status === 403) {
      document.getElementById("auth").style.display = "block";
      document.getElementById("error").textContent = "read key needed";
      return;
    }
    if (!response.ok) throw new Error("HTTP " + response.status);
    data = await response.json();
  } catch (error) {
    document.getElementById("error").textContent = "cannot reach the service: " + error.message;
    return;
  }
  document.getElementById("error").textContent = "";
  document.getElementById("auth").style.display = "none";
  interval = data.interval;
  const samples = data.samples;
  const t1 = data.now, t0 = samples.length ? Math.max(samples[0].t, t1 - data.span) : t1 - 60;
  document.getElementById("summary").textContent =
    `version ${data.service_version} \\u00b7 ${data.models.length} model(s) \\u00b7 ` +
    `${samples.length} samples every ${data.interval} s \\u00b7 updated ${clock(data.now)}`;
  renderModels(data.models);
  renderMembers(data.models);
  const current = new Set(data.models.map(m => m.name));
  chart("accuracy", modelSeries(samples, "accuracy", null, current), t0, t1, [0, 1]);
  const lossName = (name, all) => {
    const last = all.map(s => s.models[name]).filter(Boolean).pop();
    return last ? `${name} (${last.loss_kind})` : name;
  };
  chart("loss", modelSeries(samples, "loss", lossName, current), t0, t1);
  chart("latency", endpointSeries(samples, "p99", 1000, "p50"), t0, t1);
  chart("rate", endpointSeries(samples, "rate", 1), t0, t1);
  document.body.dataset.ready = "1";
}

document.getElementById("auth-form").addEventListener("submit", event => {
  event.preventDefault();
  key = document.getElementById("key").value.trim();
  sessionStorage.setItem("lorentztron-key", key);
  refresh();
});

async function loop() {
  await refresh();
  setTimeout(loop, Math.max(2, interval) * 1000);
}
loop();
</script>
</body>
</html>
"""
