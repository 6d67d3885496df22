"""The report as one self-contained HTML page: the JSON inline, drawn by the page's own script (inline SVG, no
network, no libraries). Chart elements carry ids and ``data-*`` attributes with their numbers, so that tests and
scripts can read what was drawn."""

from __future__ import annotations

import json
from typing import Any, Dict

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; \
script-src 'unsafe-inline'; img-src data:">
<title>IPU profile: __TITLE__</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#242b3a;color:#fff;padding:12px 20px}
header h1{font-size:18px;margin:0}
header .sub{color:#b9c2d4;font-size:12px}
main{padding:12px 20px;max-width:1400px}
section{background:#fff;border:1px solid #dde1e8;border-radius:6px;margin:12px 0;padding:12px 16px}
h2{font-size:15px;margin:0 0 8px}
.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{border:1px solid #dde1e8;border-radius:6px;padding:8px 12px;min-width:150px}
.card .k{font-size:11px;color:#5b6478;text-transform:uppercase}
.card .v{font-size:20px;font-weight:600}
.bad{color:#b3261e}
table{border-collapse:collapse;width:100%;font-size:12px}
th,td{padding:3px 6px;border-bottom:1px solid #eceef2;text-align:left}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.scroll{max-height:360px;overflow:auto}
svg text{font-size:10px;fill:#5b6478}
.legend span{display:inline-block;margin-right:12px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
#program-tree ul{list-style:none;padding-left:16px;margin:0}
#program-tree li{white-space:nowrap;font-size:12px}
.muted{color:#8a93a6}
</style>
</head>
<body>
<header><h1>IPU profile: <span id="program-name"></span></h1><div class="sub" id="target-line"></div></header>
<main>
<section><h2>Summary</h2><div class="cards" id="summary"></div></section>
<section id="memory-section"><h2>Memory per tile</h2><div class="legend" id="tile-legend"></div>
<svg id="tile-memory-chart" width="100%" height="220" preserveAspectRatio="none"></svg>
<div class="muted" id="tile-chart-note"></div></section>
<section id="category-section"><h2>Memory by category</h2><div id="memory-categories"></div>
<h2 style="margin-top:12px">Worst tiles</h2><table id="worst-tiles"></table></section>
<section id="liveness-section"><h2>Liveness (bytes live while each program step runs, all tiles)</h2>
<svg id="liveness-chart" width="100%" height="200" preserveAspectRatio="none"></svg>
<div class="muted" id="liveness-note"></div></section>
<section><h2>Cycles per program step</h2><div class="muted" id="steps-note"></div>
<div class="scroll"><table id="step-table"></table></div></section>
<section><h2>Cycles per op (by source line)</h2><div class="scroll"><table id="op-table"></table></div></section>
<section id="tree-section"><h2>Program tree</h2><div class="scroll" id="program-tree"></div></section>
<section><h2>Host transfers and callbacks</h2><div id="host"></div></section>
<section id="partitioning-section"><h2>Partitioning over IPUs</h2><div id="partitioning"></div></section>
</main>
<script id="profile-data" type="application/json">__DATA__</script>
<script>
"use strict";
const P = JSON.parse(document.getElementById("profile-data").textContent);
const SVGNS = "http://www.w3.org/2000/svg";
const COLORS = {variables:"#3d6fb6", not_always_live:"#e08a2c", vertex_state:"#6aa84f", code:"#8e6bbf"};
const CATEGORY_NAMES = {variables:"Variables (always live)", not_always_live:"Not always live (peak)",
  exchange_buffers:"of which exchange buffers", vertex_state:"Vertex state", code:"Code"};
function el(tag, attrs, text, parent) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVGNS, tag.slice(4)) : document.createElement(tag);
  for (const k in (attrs || {})) e.setAttribute(k, attrs[k]);
  if (text !== undefined && text !== null) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function fmt(n) { return Number(n).toLocaleString("en-US"); }
function bytes(n) {
  n = Number(n);
  if (n >= 1048576) return (n / 1048576).toFixed(2) + " MiB";
  if (n >= 1024) return (n / 1024).toFixed(1) + " KiB";
  return n + " B";
}
function seconds(s) {
  if (s >= 1) return s.toFixed(3) + " s";
  if (s >= 1e-3) return (s * 1e3).toFixed(3) + " ms";
  return (s * 1e6).toFixed(3) + " \\u00b5s";
}
function card(id, key, value, data, cls) {
  const c = el("div", Object.assign({class: "card", id: id}, data), null, document.getElementById("summary"));
  el("div", {class: "k"}, key, c);
  el("div", {class: "v" + (cls ? " " + cls : "")}, value, c);
}
function table(id, header, rows, parent) {
  const t = document.getElementById(id) || el("table", {id: id}, null, parent);
  const h = el("tr", null, null, el("thead", null, null, t));
  header.forEach(([name, numeric]) => el("th", numeric ? {class: "n"} : null, name, h));
  const body = el("tbody", null, null, t);
  rows.forEach(([attrs, cells]) => {
    const tr = el("tr", attrs, null, body);
    cells.forEach((c, i) => el("td", header[i][1] ? {class: "n"} : null, c, tr));
  });
  return t;
}

const T = P.target, M = P.memory, E = P.execution;
document.getElementById("program-name").textContent = P.program;
document.title = "IPU profile: " + P.program;
document.getElementById("target-line").textContent =
  `${T.chip}, ${fmt(T.tiles)} tiles, ${T.ipus} IPU(s) (devices ${T.device_ids.join(", ")}), ` +
  `clock ${(T.clock_hz / 1e9).toFixed(3)} GHz, ${fmt(T.bytes_per_tile)} bytes per tile, ` +
  `${T.num_worker_contexts} workers per tile, exchange ${T.exchange_bytes_per_cycle} bytes per cycle per tile, ` +
  `sync ${fmt(T.global_sync_cycles)} cycles \\u2014 ` +
    `${P.format} v${P.version}, ${P.created}`;

// Summary
const run = E && E.runs.length ? E.runs[0] : null;
const totalCycles = run ? run.total_cycles : P.estimate.cycles;
if (M) {
  card("summary-memory-percent", "Memory used", M.percent_of_chip.toFixed(2) + " % of chip",
       {"data-value": M.percent_of_chip, "data-bytes": M.total_bytes}, M.overflowing_tiles.length ? "bad" : "");
  card("summary-worst-tile", "Worst tile", `tile ${M.worst_tile}: ${bytes(M.worst_bytes)}`,
       {"data-tile": M.worst_tile, "data-bytes": M.worst_bytes}, M.worst_bytes > M.bytes_per_tile_limit ? "bad" : "");
  card("summary-overflow", "Tiles over memory", String(M.overflowing_tiles.length),
       {"data-value": M.overflowing_tiles.length}, M.overflowing_tiles.length ? "bad" : "");
}
card("summary-total-cycles", run ? `Total cycles (last run, device ${run.device})` : "Total cycles (static estimate)",
     fmt(totalCycles), {"data-value": totalCycles, "data-source": run ? "execution" : "estimate"});
card("summary-time", "Estimated time at " + (T.clock_hz / 1e9).toFixed(3) + " GHz", seconds(totalCycles / T.clock_hz),
     {"data-seconds": totalCycles / T.clock_hz});
if (run) card("summary-split", "Compute / exchange / sync",
              [run.compute_cycles, run.exchange_cycles, run.sync_cycles].map(c =>
                (100 * c / Math.max(1, run.total_cycles)).toFixed(0) + "%").join(" / "),
              {"data-compute": run.compute_cycles, "data-exchange": run.exchange_cycles, "data-sync": run.sync_cycles});
card("summary-static-cycles", "Static estimate (loop bodies once)", fmt(P.estimate.cycles),
     {"data-value": P.estimate.cycles});
const wide = P.estimate.emulated_64bit_cycles || 0;
if (wide) card("summary-emulated-64bit", "Emulated 64-bit types (f64, i64, u64: software)",
               (100 * wide / Math.max(1, P.estimate.cycles)).toFixed(1) + " % of the static estimate",
               {"data-value": wide}, "bad");

// Memory per tile: one stacked bar per tile, the tile limit as a line.
if (M) {
  const svg = document.getElementById("tile-memory-chart"), n = M.per_tile.bytes.length, H = 200;
  // Scaled to the fullest tile; the tile limit is in view once a tile is over half of it.
  const lim = M.bytes_per_tile_limit;
  const top = Math.max(1, M.worst_bytes > lim / 2 ? Math.max(lim, M.worst_bytes) * 1.05 : M.worst_bytes * 1.15);
  svg.setAttribute("viewBox", `0 0 ${n} ${H}`);
  const stack = ["variables", "not_always_live", "vertex_state", "code"];
  for (let t = 0; t < n; ++t) {
    const g = el("svg:g", {class: "tile-bar", "data-tile": t, "data-bytes": M.per_tile.bytes[t]}, null, svg);
    el("svg:title", null, `tile ${t}: ${fmt(M.per_tile.bytes[t])} bytes`, g);
    let y = H;
    for (const c of stack) {
      const h = H * M.per_tile[c][t] / top;
      if (h <= 0) continue;
      y -= h;
      el("svg:rect", {x: t, y: y, width: 1, height: h,
        fill: M.per_tile.bytes[t] > M.bytes_per_tile_limit ? "#b3261e" : COLORS[c],
                      "data-category": c, "data-bytes": M.per_tile[c][t]}, null, g);
    }
  }
  const ly = Math.max(0, H - H * M.bytes_per_tile_limit / top);
  if (M.bytes_per_tile_limit <= top) el("svg:line", {id: "tile-limit-line",
    x1: 0, x2: n, y1: ly, y2: ly, stroke: "#b3261e", "stroke-width": 1,
                  "vector-effect": "non-scaling-stroke", "stroke-dasharray": "4 3",
                    "data-bytes": M.bytes_per_tile_limit}, null, svg);
  const legend = document.getElementById("tile-legend");
  stack.forEach(c => { const s = el("span", null, null, legend); el("i", {style: "background:" + COLORS[c]}, null, s);
                       s.appendChild(document.createTextNode(CATEGORY_NAMES[c])); });
  document.getElementById("tile-chart-note").textContent =
    `${fmt(n)} tiles, ${fmt(M.tiles_used)} used; scale: 0 to ${fmt(Math.round(top))} bytes` +
    (M.bytes_per_tile_limit <= top ? `; dashed line: the ${fmt(M.bytes_per_tile_limit)} bytes of a tile` : "") +
    (M.overflowing_tiles.length ? `; over it (red): tiles ${M.overflowing_tiles.slice(0, 20).join(", ")}` +
     (M.overflowing_tiles.length > 20 ? ", ..." : "") : "");

  const cats = document.getElementById("memory-categories");
  const total = Object.keys(M.by_category).filter(c => c !== "exchange_buffers")
    .reduce((a, c) => a + M.by_category[c], 0);
  const body = table("memory-categories-table", [["Category", false], ["Bytes", true], ["% of used", true]], [], cats)
    .querySelector("tbody");
  for (const c of Object.keys(M.by_category)) {
    const tr = el("tr", {class: "category-row", "data-category": c, "data-bytes": M.by_category[c]}, null, body);
    const name = el("td", null, null, tr);
    if (COLORS[c]) el("i", {style: `display:inline-block;width:10px;height:10px;` +
      `margin-right:4px;background:${COLORS[c]}`}, null, name);
    name.appendChild(document.createTextNode(CATEGORY_NAMES[c] || c));
    el("td", {class: "n"}, fmt(M.by_category[c]), tr);
    el("td", {class: "n"}, (100 * M.by_category[c] / Math.max(1, total)).toFixed(1), tr);
  }
  table("worst-tiles", [["Tile", true], ["Bytes", true], ["Variables", true], ["Not always live", true],
                        ["Exchange buffers", true], ["Vertex state", true], ["Code", true]],
        M.worst_tiles.map(w => [{"data-tile": w.tile, "data-bytes": w.bytes},
          [w.tile, fmt(w.bytes), fmt(w.variables), fmt(w.not_always_live),
            fmt(w.exchange_buffers), fmt(w.vertex_state), fmt(w.code)]]));
} else {
  ["memory-section", "category-section", "liveness-section", "tree-section"].forEach(id =>
    document.getElementById(id).appendChild(el("div", {class: "muted"},
      "No graph profile (autoReport.outputGraphProfile is off).")));
}

// Liveness
if (P.liveness) {
  const L = P.liveness, svg = document.getElementById("liveness-chart"), n = L.bytes.length, H = 200;
  const top = Math.max(1, ...L.bytes);
  svg.setAttribute("viewBox", `0 0 ${Math.max(1, n)} ${H}`);
  L.bytes.forEach((b, i) => {
    const h = H * b / top;
    const r = el("svg:rect", {class: "live-bar", x: i, y: H - h, width: 1, height: h,
      fill: i === L.peak_step ? "#b3261e" : "#3d6fb6",
                              "data-step": i, "data-bytes": b, "data-max-tile": L.max_tile[i],
                                "data-max-tile-bytes": L.max_tile_bytes[i]}, null, svg);
    el("svg:title", null, `step ${i}: ${fmt(b)} bytes on all tiles; ` +
      `fullest tile ${L.max_tile[i]} with ${fmt(L.max_tile_bytes[i])}`, r);
  });
  document.getElementById("liveness-note").textContent =
    `${fmt(n)} steps in schedule order; peak (red) at step ${L.peak_step}: ${bytes(L.peak_bytes)} over all tiles`;
}

// Cycles per step and per op
const steps = run ? run.steps : (P.steps || []);
document.getElementById("steps-note").textContent = run
  ? `The last run on device ${run.device} (loop bodies count every iteration). Source lines link to the op table.`
  : "Static estimate: one execution of every step (no run recorded yet).";
const stepTotal = Math.max(1, steps.reduce((a, s) => a + s.cycles, 0));
const wideSteps = new Set((P.steps || []).filter(s => s.emulated_64bit).map(s => s.id));
table("step-table", [["Id", true], ["Type", false], ["Op", false], ["Source", false], ["Runs", true], ["Cycles", true],
                     ["%", true], ["Compute", true], ["Exchange", true], ["Sync", true]],
      steps.map(s => [{"data-step-id": s.id, "data-cycles": s.cycles, "data-loc": s.loc,
                       "data-emulated-64bit": wideSteps.has(s.id) ? "true" : "false"},
        [s.id, s.type, s.name + (wideSteps.has(s.id) ? " (64-bit, emulated)" : ""), s.loc || "-",
         fmt(s.executions || 1), fmt(s.cycles),
          (100 * s.cycles / stepTotal).toFixed(1),
         fmt(s.compute_cycles), fmt(s.exchange_cycles), fmt(s.sync_cycles)]]));
const ops = run ? run.ops : (P.ops || []);
table("op-table", [["Op", false], ["Source", false], ["Steps", true], ["Runs", true], ["Cycles", true], ["%", true],
                   ["Compute", true], ["Exchange", true], ["Sync", true]],
      ops.map((o, i) => [{"data-op": o.name, "data-loc": o.loc, "data-cycles": o.cycles, id: "op-" + i},
        [o.name, o.loc || "-", o.steps, fmt(o.executions), fmt(o.cycles), (100 * o.cycles / stepTotal).toFixed(1),
         fmt(o.compute_cycles), fmt(o.exchange_cycles), fmt(o.sync_cycles)]]));

// Program tree
function tree(node, parent) {
  const li = el("li", {"data-step-id": node.id, "data-type": node.type, "data-cycles": node.cycles}, null, parent);
  const label = node.type + (node.name && node.type !== "Sequence" ? " " + node.name : "") +
    (node.loc ? " (" + node.loc + ")" : "");
  if (node.children && node.children.length) {
    const d = el("details", {open: ""}, null, li);
    el("summary", null, `${label} \\u2014 ${fmt(node.cycles)} cycles`, d);
    const ul = el("ul", null, null, d);
    node.children.forEach(c => tree(c, ul));
  } else {
    li.textContent = `${node.id >= 0 ? "#" + node.id + " " : ""}${label} \\u2014 ${fmt(node.cycles)} cycles`;
  }
}
if (P.program_tree) tree(P.program_tree, el("ul", {style: "padding-left:0"}, null,
  document.getElementById("program-tree")));

// Host
const host = document.getElementById("host");
const io = (list) => list.map(t => `${t.dtype}[${t.shape.join(",")}]`).join(", ") || "none";
el("div", {id: "host-inputs", "data-bytes": P.host.inputs.reduce((a, t) => a + t.bytes, 0)},
   "Inputs per call: " + io(P.host.inputs), host);
el("div", {id: "host-outputs", "data-bytes": P.host.outputs.reduce((a, t) => a + t.bytes, 0)},
   "Outputs per call: " + io(P.host.outputs), host);
el("div", {id: "host-streams", "data-count": P.host.streams.length},
   `Stream copies (infeed/outfeed): ${P.host.streams.length}; host callbacks: ${P.host.callbacks.length}`, host);
if (P.host.transfers) {
  table("host-transfers", [["Device", true], ["Bytes to device", true],
    ["Bytes from device", true], ["Infeed bytes", true],
                           ["Outfeed bytes", true], ["Executions", true]],
        Object.keys(P.host.transfers).map(d => { const t = P.host.transfers[d];
          return [{"data-device": d}, [d, fmt(t.bytes_to_device), fmt(t.bytes_from_device),
            fmt(t.infeed_bytes), fmt(t.outfeed_bytes), fmt(t.executions)]]; }),
        host);
}
// Partitioning (a program over several IPUs)
const part = document.getElementById("partitioning");
if (P.partitioning) {
  const sharding = s => s && s.tile ? `split ${s.tile.join(" x ")}${s.replicate_last ? " (last: copies)" : ""} ` +
    `over devices ${s.devices.join(",")}`
      : "whole on every IPU";
  el("div", {id: "partitions", "data-count": P.partitioning.partitions},
     `${P.partitioning.partitions} IPUs, each running its partition on its own shards ` +
       `(memory and cycles above are one IPU's)`, part);
  table("partition-shardings", [["Value", false], ["Sharding", false]],
        P.partitioning.params.map((s, i) => [{}, [`input ${i}`, sharding(s)]]).concat(
        P.partitioning.results.map((s, i) => [{}, [`output ${i}`, sharding(s)]])), part);
  const warnings = el("ul", {id: "partition-warnings", "data-count": P.partitioning.warnings.length}, null, part);
  P.partitioning.warnings.forEach(w => el("li", null, "XLA's partitioner: " + w, warnings));
} else {
  document.getElementById("partitioning-section").style.display = "none";
}
document.body.setAttribute("data-rendered", "true");
</script>
</body>
</html>
"""


def render(profile: Dict[str, Any]) -> str:
    """The page for a ``jax-ipu-profile`` report."""
    # Inside <script>, "</" would end the element: JSON allows "<\\/" for it.
    data = json.dumps(profile, separators=(",", ":")).replace("</", "<\\/")
    title = str(profile.get("program", "program")).replace("&", "&amp;").replace("<", "&lt;")
    return _PAGE.replace("__TITLE__", title).replace("__DATA__", data)
