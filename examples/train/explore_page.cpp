// The attention explorer's page (explore.h): HTML, its styles and its script,
// with the marker EMBER_DATA where explore.cpp puts the JSON of one prompt.
// The script uses no library and asks for nothing over the network: the page
// opens from disk. It reads the data once, then draws each view on demand:
//   head view    lines from each query token (left) to the keys it attends to
//                (right), one colour per head, for weights above THRESHOLD
//   model view   every layer x head as a small matrix; one opens large
//   query view   one query of one head, step by step: q, each k, q.k, the
//                scale, the mask, softmax, and the weighted sum of v
//   predictions  the top-k next tokens at each position, softmax(logits / T)
//                for the temperature slider's T, and the prompt's losses
//   training     the loss curve with its evaluations, and the sample
// Tests: tests/explore_browser.py drives it in headless Chromium.
#include "explore.h"

namespace train {

const std::string& explore_template() {
    static const std::string page = R"html(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<title>ember attention explorer</title>
<style>
  body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; color: #222; margin: 0 auto; max-width: 1180px; padding: 0 16px 40px; }
  h1 { font-size: 22px; margin: 16px 0 4px; }
  h2 { font-size: 18px; margin: 12px 0 4px; }
  .about { color: #444; font-size: 13px; margin: 2px 0; }
  .what { color: #333; font-size: 14px; margin: 4px 0 10px; max-width: 900px; }
  nav { display: flex; gap: 4px; border-bottom: 2px solid #08306b; margin-top: 10px; flex-wrap: wrap; }
  nav button { font: inherit; font-size: 14px; padding: 6px 14px; border: 1px solid #bbb; border-bottom: none; background: #f3f3f3; cursor: pointer; border-radius: 4px 4px 0 0; }
  nav button[aria-selected="true"] { background: #08306b; color: #fff; border-color: #08306b; }
  button:focus-visible, select:focus-visible, input:focus-visible, [tabindex]:focus-visible { outline: 3px solid #ff7f0e; outline-offset: 1px; }
  .controls { display: flex; gap: 14px; align-items: center; flex-wrap: wrap; font-size: 14px; margin: 8px 0; }
  .chip { display: inline-flex; align-items: center; gap: 4px; }
  .swatch { display: inline-block; width: 14px; height: 14px; border-radius: 2px; }
  .mono, .tok { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; }
  svg text { font-size: 13px; }
  .desc { font-size: 14px; background: #f6f8fb; border-left: 4px solid #08306b; padding: 6px 10px; max-width: 900px; }
  .side { display: flex; gap: 16px; align-items: flex-start; }
  .side .desc { width: 360px; position: sticky; top: 8px; }
  .side .readout { width: auto; position: static; }
  .grid { display: grid; gap: 6px; align-items: center; justify-items: center; justify-content: start; margin: 8px 0; }
  .readout { min-height: 2.6em; max-width: 560px; }
  rect.mcell:hover { stroke: #ff7f0e; stroke-width: 2; }
  .grid .label { font-size: 13px; color: #444; }
  .cell { padding: 2px; border: 1px solid #ccc; background: #fff; cursor: pointer; line-height: 0; }
  .cell[aria-pressed="true"] { border: 2px solid #ff7f0e; }
  canvas { image-rendering: pixelated; }
  table { border-collapse: collapse; font-size: 13px; }
  th, td { padding: 2px 6px; border-bottom: 1px solid #e4e4e4; text-align: right; white-space: nowrap; }
  th { background: #f3f3f3; position: sticky; top: 0; }
  td.tok, th.tok { text-align: left; }
  tr.masked td { color: #999; }
  tr.current td { background: #fff4e0; }
  .bar { display: inline-block; height: 10px; background: #2171b5; vertical-align: middle; margin-left: 4px; }
  .vec { display: inline-flex; flex-wrap: wrap; gap: 1px; vertical-align: middle; max-width: 640px; }
  .vec span { display: inline-block; min-width: 12px; height: 14px; font-size: 10px; line-height: 14px; text-align: center; padding: 0 1px; }
  .vec.numbers span { min-width: 44px; font-size: 11px; }
  .formula { font-size: 15px; margin: 6px 0; }
  .cand { display: inline-block; min-width: 92px; text-align: left; }
  .cand .tok { background: #eef3fa; padding: 0 3px; border-radius: 2px; }
  .legend { font-size: 12px; color: #444; display: flex; align-items: center; gap: 6px; }
  .ramp { width: 120px; height: 12px; background: linear-gradient(to right, #ffffff, #08306b); border: 1px solid #aaa; }
  pre.sample { background: #f7f7f7; padding: 10px; white-space: pre-wrap; max-width: 900px; font-size: 13px; }
  footer { margin-top: 24px; font-size: 12px; color: #666; }
  .scroll { max-height: 640px; overflow: auto; display: inline-block; border: 1px solid #e4e4e4; }
</style>
</head>
<body>
<header>
  <h1>ember attention explorer</h1>
  <p class="about" id="about-title"></p>
  <p class="about" id="about-form"></p>
  <p class="about" id="about-sizes"></p>
</header>
<nav role="tablist" aria-label="Views">
  <button role="tab" id="tab-head" aria-controls="view-head">Head view</button>
  <button role="tab" id="tab-model" aria-controls="view-model">Model view</button>
  <button role="tab" id="tab-query" aria-controls="view-query">Query view</button>
  <button role="tab" id="tab-predictions" aria-controls="view-predictions">Predictions</button>
  <button role="tab" id="tab-training" aria-controls="view-training">Training</button>
</nav>
<main>
<section id="view-head" role="tabpanel" aria-labelledby="tab-head">
  <h2>Head view: who attends to whom</h2>
  <p class="what">Each line joins a token on the left (a query) to an earlier token on the right (a key it attends to); the darker the line, the larger the weight. Only weights above 0.02 are drawn. One colour per head. Hover over a token on the left, or click it (or focus it and press Enter), to see only its attention; click it again to see all.</p>
  <div class="controls">
    <label>Layer <select id="head-layer"></select></label>
    <span id="head-toggles" role="group" aria-label="Heads shown"></span>
  </div>
  <div class="side">
    <svg id="head-svg" role="img" aria-labelledby="head-desc"></svg>
    <p class="desc" id="head-desc" aria-live="polite"></p>
  </div>
</section>
<section id="view-model" role="tabpanel" aria-labelledby="tab-model">
  <h2>Model view: every layer and head</h2>
  <p class="what">One small attention matrix per layer (rows) and head (columns): row q is the query at position q, column k the key it attends to, darker is more weight; the upper triangle is empty because the model is causal. Click a matrix (or focus it and press Enter) to open it large; hover over a cell to read its weight.</p>
  <div class="legend"><span>weight 0</span><span class="ramp"></span><span>1</span></div>
  <div class="side">
    <div class="grid" id="model-grid"></div>
    <div id="matrix-panel">
      <h3 id="matrix-title"></h3>
      <p class="desc readout" id="matrix-readout" aria-live="polite"></p>
      <div class="scroll"><svg id="matrix-svg" role="img" aria-labelledby="matrix-title"></svg></div>
    </div>
  </div>
</section>
<section id="view-query" role="tabpanel" aria-labelledby="tab-query">
  <h2>Query view: one query, step by step</h2>
  <p class="what">The lecture's head for one query position t: its query vector q, every key k<sub>j</sub>, the scores q&middot;k<sub>j</sub>, scaled by hs<sup>-0.5</sup>, the causal mask (keys after t become &minus;inf), the softmax (weights that sum to 1), and the output, the weighted sum of the values v<sub>j</sub>. All numbers are ember's; vectors are drawn red (negative) to blue (positive), hover for their numbers.</p>
  <div class="controls">
    <label>Layer <select id="q-layer"></select></label>
    <label>Head <select id="q-head"></select></label>
    <label>Query position <select id="q-pos"></select></label>
    <button id="q-prev" type="button">&#9664; previous</button>
    <button id="q-next" type="button">next &#9654;</button>
  </div>
  <p class="desc" id="q-desc" aria-live="polite"></p>
  <p class="formula mono" id="q-formula"></p>
  <p class="formula">q<sub>t</sub> = <span id="q-vector" class="vec numbers"></span></p>
  <div class="scroll"><table id="q-table">
    <caption class="about" id="q-caption"></caption>
    <thead><tr><th>j</th><th class="tok">token</th><th class="tok">k<sub>j</sub></th><th>q&middot;k<sub>j</sub></th><th>&times; hs<sup>-0.5</sup></th><th>masked</th><th class="tok">softmax weight</th><th class="tok">v<sub>j</sub></th></tr></thead>
    <tbody></tbody>
    <tfoot><tr><td></td><td class="tok" colspan="5">sum of the weights</td><td class="tok" id="q-sum"></td><td></td></tr></tfoot>
  </table></div>
  <p class="formula">out<sub>t</sub> = &Sigma;<sub>j</sub> weight<sub>j</sub> v<sub>j</sub> = <span id="q-out" class="vec numbers"></span></p>
  <p class="about" id="q-check"></p>
</section>
<section id="view-predictions" role="tabpanel" aria-labelledby="tab-predictions">
  <h2>Predictions: the next token at each position</h2>
  <p class="what">After reading the prompt up to position t, the model gives every token a logit; softmax(logits / T) turns them into probabilities. Drag the temperature: below 1 the likeliest token takes more, above 1 the distribution flattens. The loss column is ember's cross-entropy of the prompt's actual next token at temperature 1, &minus;ln p.</p>
  <div class="controls">
    <label for="temp">Temperature T</label>
    <input type="range" id="temp" min="0.1" max="2" step="0.05" value="1" aria-describedby="temp-value">
    <output id="temp-value" for="temp">1.00</output>
  </div>
  <p class="desc" id="pred-desc" aria-live="polite"></p>
  <div class="scroll"><table id="pred-table">
    <thead><tr><th>t</th><th class="tok">reads up to</th><th class="tok">next in prompt</th><th>its p at T</th><th>loss at T=1</th><th class="tok" id="pred-top-head">top next tokens</th></tr></thead>
    <tbody></tbody>
  </table></div>
</section>
<section id="view-training" role="tabpanel" aria-labelledby="tab-training">
  <h2>Training: the loss curve and a sample</h2>
  <p class="what" id="train-what"></p>
  <svg id="train-svg" role="img" aria-labelledby="train-what"></svg>
  <div id="train-sample"></div>
</section>
</main>
<footer>Written by ember. Every number is a float32 that ember computed, printed with the shortest digits that read back as the same float. This page needs no network: its script, styles and data are all inside it.</footer>
<script type="application/json" id="ember-data">EMBER_DATA</script>
<script>
"use strict";
const D = JSON.parse(document.getElementById("ember-data").textContent);
const T = D.tokens.length, L = D.n_layer, NH = D.n_head, HS = D.head_size;
const THRESHOLD = 0.02; // the head view draws weights above this
// One colour per head: matplotlib's ten, then two more.
const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                "#bcbd22", "#17becf", "#393b79", "#637939"];
const SVGNS = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);

// A token as it can be seen: newline, space and tab drawn as symbols.
function show(text) {
  if (text === "") return "\u2205";
  return text.replace(/\n/g, "\u23ce").replace(/ /g, "\u2423").replace(/\t/g, "\u21e5");
}
function quoted(t) { return "\u201c" + show(D.tokens[t]) + "\u201d"; }
function weight(l, h, q, k) { return k <= q ? D.weights[l][h][q][k] : 0; }
function fixed(x, n) { return x === null ? "\u2212inf" : x.toFixed(n); }
function headColor(h) { return COLORS[h % COLORS.length]; }
// White (0) to dark blue (1), as attention.svg draws weights.
function blue(w) {
  const c = (a, b) => Math.round(a + (b - a) * Math.min(1, Math.max(0, w)));
  return "rgb(" + c(255, 8) + "," + c(255, 48) + "," + c(255, 107) + ")";
}
// Red (negative) to white to blue (positive), scaled by `top`.
function diverging(x, top) {
  const s = Math.min(1, Math.abs(x) / (top || 1));
  const c = (a) => Math.round(255 + (a - 255) * s);
  return x < 0 ? "rgb(" + c(203) + "," + c(24) + "," + c(29) + ")" : "rgb(" + c(33) + "," + c(113) + "," + c(181) + ")";
}
function svgEl(tag, attrs, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function htmlEl(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function fillSelect(select, labels) {
  select.textContent = "";
  labels.forEach(([value, label]) => select.appendChild(htmlEl("option", {value: value}, label)));
}

// ---- the header and the tabs ---------------------------------------------------------
$("about-title").textContent = D.title + (D.source ? " \u2014 " + D.source : "");
$("about-form").textContent = "Model: " + D.form + ".";
$("about-sizes").textContent = D.sizes + "; the prompt has " + T + " " + D.unit + (T === 1 ? "" : "s") +
                               " (positions 0 to " + (T - 1) + "). Layers and heads are counted from 1.";
const VIEWS = ["head", "model", "query", "predictions", "training"];
const drawn = {};
function openView(name) {
  for (const v of VIEWS) {
    $("view-" + v).hidden = v !== name;
    $("tab-" + v).setAttribute("aria-selected", v === name ? "true" : "false");
    $("tab-" + v).tabIndex = v === name ? 0 : -1;
  }
  if (!drawn[name]) { drawn[name] = true; DRAW[name](); }
}
VIEWS.forEach((v, i) => {
  $("tab-" + v).addEventListener("click", () => openView(v));
  $("tab-" + v).addEventListener("keydown", (e) => { // arrows move between tabs, as ARIA's tab pattern says
    const step = e.key === "ArrowRight" ? 1 : e.key === "ArrowLeft" ? -1 : 0;
    if (!step) return;
    const next = VIEWS[(i + step + VIEWS.length) % VIEWS.length];
    openView(next);
    $("tab-" + next).focus();
  });
});

// ---- head view --------------------------------------------------------------------------
const head = {layer: 0, shown: new Set([...Array(NH).keys()]), focus: null, hover: null};
function drawHeadView() {
  fillSelect($("head-layer"), [...Array(L).keys()].map((l) => [l, "layer " + (l + 1)]));
  $("head-layer").addEventListener("change", (e) => { head.layer = +e.target.value; redrawHead(); });
  for (let h = 0; h < NH; ++h) {
    const label = htmlEl("label", {class: "chip"});
    const box = htmlEl("input", {type: "checkbox", "data-head": h});
    box.checked = true;
    box.addEventListener("change", () => { box.checked ? head.shown.add(h) : head.shown.delete(h); redrawHead(); });
    label.append(box, htmlEl("span", {class: "swatch", style: "background:" + headColor(h)}), "head " + (h + 1));
    $("head-toggles").appendChild(label);
  }
  buildHeadSvg();
  redrawHead();
}
const HEAD_ROW = 20, HEAD_TOP = 34, HEAD_LEFT = 130, HEAD_RIGHT = 360, BARS = HEAD_RIGHT + 150, BAR = 36;
// The tokens, drawn once; redrawHead redraws the lines and marks the token shown.
function buildHeadSvg() {
  const svg = $("head-svg");
  svg.setAttribute("width", BARS + NH * (BAR + 4) + 10);
  svg.setAttribute("height", HEAD_TOP + T * HEAD_ROW + 10);
  svg.appendChild(svgEl("text", {x: HEAD_LEFT, y: 16, "text-anchor": "end", "font-weight": "bold"}, "query (attends)"));
  svg.appendChild(svgEl("text", {x: HEAD_RIGHT, y: 16, "font-weight": "bold"}, "key (attended to)"));
  svg.appendChild(svgEl("g", {id: "head-lines"}));
  svg.appendChild(svgEl("g", {id: "head-bars"}));
  for (let t = 0; t < T; ++t) {
    const y = HEAD_TOP + t * HEAD_ROW;
    const q = svgEl("text", {x: HEAD_LEFT, y: y, "text-anchor": "end", class: "tok tok-q", tabindex: 0, role: "button",
                             "data-t": t, "aria-pressed": "false", style: "cursor:pointer",
                             "aria-label": "query " + t + ", " + quoted(t) + ": show only its attention"},
                    show(D.tokens[t]) + "  " + t);
    q.addEventListener("mouseenter", () => { head.hover = t; redrawHead(); });
    q.addEventListener("mouseleave", () => { head.hover = null; redrawHead(); });
    const pick = () => { head.focus = head.focus === t ? null : t; head.hover = null; redrawHead(); };
    q.addEventListener("click", pick);
    q.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); pick(); } });
    svg.appendChild(q);
    svg.appendChild(svgEl("text", {x: HEAD_RIGHT, y: y, class: "tok tok-k", "data-t": t}, t + "  " + show(D.tokens[t])));
  }
}
function redrawHead() {
  const only = head.hover !== null ? head.hover : head.focus;
  const lines = $("head-lines");
  lines.textContent = "";
  let count = 0;
  for (const h of [...head.shown].sort((a, b) => a - b)) {
    for (let q = 0; q < T; ++q) {
      if (only !== null && q !== only) continue;
      for (let k = 0; k <= q; ++k) {
        const w = weight(head.layer, h, q, k);
        if (!(w > THRESHOLD)) continue;
        lines.appendChild(svgEl("line", {
          x1: HEAD_LEFT + 6, y1: HEAD_TOP + q * HEAD_ROW - 4, x2: HEAD_RIGHT - 6, y2: HEAD_TOP + k * HEAD_ROW - 4,
          stroke: headColor(h), "stroke-opacity": Math.min(1, 0.25 + 0.75 * w), "stroke-width": 0.75 + 3.5 * w,
          class: "attn-line", "data-head": h, "data-q": q, "data-k": k, "data-w": w}));
        ++count;
      }
    }
  }
  // For one query: each head's weight on every key, as a bar beside the key.
  const bars = $("head-bars");
  bars.textContent = "";
  if (only !== null) {
    bars.appendChild(svgEl("text", {x: BARS, y: 16, "font-weight": "bold"}, "weight per head"));
    for (const h of head.shown) {
      for (let k = 0; k <= only; ++k) {
        const w = weight(head.layer, h, only, k);
        bars.appendChild(svgEl("rect", {x: BARS + h * (BAR + 4), y: HEAD_TOP + k * HEAD_ROW - 13, width: BAR,
                                        height: 14, fill: "#f2f2f2"}));
        bars.appendChild(svgEl("rect", {x: BARS + h * (BAR + 4), y: HEAD_TOP + k * HEAD_ROW - 13, width: Math.max(0.5, BAR * w),
                                        height: 14, fill: headColor(h), class: "head-bar"}));
      }
    }
  }
  document.querySelectorAll("#head-svg .tok-q").forEach((e) => {
    const t = +e.dataset.t;
    e.setAttribute("aria-pressed", head.focus === t ? "true" : "false");
    e.setAttribute("font-weight", only === t ? "bold" : "normal");
    e.setAttribute("fill", only === t ? "#d35400" : "#222");
  });
  // The text alternative: what the lines show.
  const heads = [...head.shown].sort((a, b) => a - b);
  let text = "Layer " + (head.layer + 1) + ": " + count + " lines, weights above " + THRESHOLD + ", for " +
             (heads.length === NH ? "every head" : heads.length ? "heads " + heads.map((h) => h + 1).join(", ") : "no head") + ".";
  if (only !== null) {
    text = "Layer " + (head.layer + 1) + ", query " + only + " " + quoted(only) + " attends most to: " +
           heads.map((h) => {
             let best = 0;
             for (let k = 1; k <= only; ++k) if (weight(head.layer, h, only, k) > weight(head.layer, h, only, best)) best = k;
             return "head " + (h + 1) + " \u2192 " + best + " " + quoted(best) + " (" + weight(head.layer, h, only, best).toFixed(2) + ")";
           }).join("; ") + ". " + count + " lines.";
  } else {
    text += " Hover over or select a query token to see only its attention.";
  }
  $("head-desc").textContent = text;
}

// ---- model view --------------------------------------------------------------------------
function drawModelView() {
  const grid = $("model-grid");
  const px = Math.max(1, Math.min(6, Math.floor((L * NH > 16 ? 64 : 96) / T)));
  grid.style.gridTemplateColumns = "auto" + " auto".repeat(NH);
  grid.appendChild(htmlEl("span", {class: "label"}, ""));
  for (let h = 0; h < NH; ++h) grid.appendChild(htmlEl("span", {class: "label"}, "head " + (h + 1)));
  for (let l = 0; l < L; ++l) {
    grid.appendChild(htmlEl("span", {class: "label"}, "layer " + (l + 1)));
    for (let h = 0; h < NH; ++h) {
      const cell = htmlEl("button", {type: "button", class: "cell", "data-layer": l, "data-head": h, "aria-pressed": "false",
                                     "aria-label": "layer " + (l + 1) + ", head " + (h + 1) + ": open its matrix"});
      const canvas = htmlEl("canvas", {width: T * px, height: T * px});
      const g = canvas.getContext("2d");
      for (let q = 0; q < T; ++q)
        for (let k = 0; k <= q; ++k) { g.fillStyle = blue(weight(l, h, q, k)); g.fillRect(k * px, q * px, px, px); }
      cell.appendChild(canvas);
      cell.addEventListener("click", () => openMatrix(l, h));
      grid.appendChild(cell);
    }
  }
  openMatrix(0, 0);
}
function openMatrix(l, h) {
  document.querySelectorAll("#model-grid .cell").forEach((c) =>
    c.setAttribute("aria-pressed", +c.dataset.layer === l && +c.dataset.head === h ? "true" : "false"));
  $("matrix-title").textContent = "Layer " + (l + 1) + ", head " + (h + 1) + ": " + T + " queries (rows) by " + T + " keys (columns)";
  const svg = $("matrix-svg"), s = Math.max(6, Math.min(18, Math.floor(520 / T))), pad = 40;
  svg.textContent = "";
  svg.setAttribute("width", pad + T * s + 10);
  svg.setAttribute("height", pad + T * s + 10);
  svg.setAttribute("data-layer", l);
  svg.setAttribute("data-head", h);
  const font = Math.min(12, s);
  for (let t = 0; t < T; ++t) {
    svg.appendChild(svgEl("text", {x: pad - 4, y: pad + t * s + s * 0.75, "text-anchor": "end", class: "tok",
                                   style: "font-size:" + font + "px"}, show(D.tokens[t])));
    svg.appendChild(svgEl("text", {x: 0, y: 0, class: "tok", style: "font-size:" + font + "px",
                                   transform: "translate(" + (pad + t * s + s * 0.75) + "," + (pad - 4) + ") rotate(-90)"},
                          show(D.tokens[t])));
  }
  svg.appendChild(svgEl("rect", {x: pad, y: pad, width: T * s, height: T * s, fill: "none", stroke: "#bbb"}));
  let best = [0, 0, -1];
  for (let q = 0; q < T; ++q) {
    for (let k = 0; k <= q; ++k) {
      const w = weight(l, h, q, k);
      if (q > 0 && k < q && w > best[2]) best = [q, k, w];
      const rect = svgEl("rect", {x: pad + k * s, y: pad + q * s, width: s, height: s, fill: blue(w),
                                  class: "mcell", "data-q": q, "data-k": k});
      const label = "query " + q + " " + quoted(q) + " \u2192 key " + k + " " + quoted(k) + ": weight " + w.toFixed(7);
      rect.appendChild(svgEl("title", {}, label));
      rect.addEventListener("mouseenter", () => { $("matrix-readout").textContent = label; });
      svg.appendChild(rect);
    }
  }
  $("matrix-readout").textContent = "Hover over a cell to read its weight. The strongest look back: query " + best[0] + " " +
    quoted(best[0]) + " \u2192 key " + best[1] + " " + quoted(best[1]) + ", weight " + best[2].toFixed(4) + ".";
}

// ---- query view ------------------------------------------------------------------------------
const LAYERS_INSIDE = Object.keys(D.inside).map(Number).sort((a, b) => a - b);
const query = {layer: LAYERS_INSIDE[0], head: 0, t: Math.min(T - 1, Math.max(0, T - 1))};
function vectorSpans(target, values, numbers, label) {
  target.textContent = "";
  const top = Math.max(...values.map(Math.abs));
  values.forEach((x, i) => {
    const span = htmlEl("span", {title: label + "[" + i + "] = " + x, style: "background:" + diverging(x, top) +
                                 (Math.abs(x) / (top || 1) > 0.6 ? ";color:#fff" : "")}, numbers ? x.toFixed(3) : "");
    target.appendChild(span);
  });
  target.setAttribute("role", "img");
  target.setAttribute("aria-label", label + " = [" + values.map((x) => x.toFixed(4)).join(", ") + "]");
}
function drawQueryView() {
  fillSelect($("q-layer"), LAYERS_INSIDE.map((l) => [l, "layer " + (l + 1)]));
  fillSelect($("q-head"), [...Array(NH).keys()].map((h) => [h, "head " + (h + 1)]));
  fillSelect($("q-pos"), [...Array(T).keys()].map((t) => [t, t + ": " + show(D.tokens[t])]));
  $("q-pos").value = query.t;
  $("q-layer").addEventListener("change", (e) => { query.layer = +e.target.value; redrawQuery(); });
  $("q-head").addEventListener("change", (e) => { query.head = +e.target.value; redrawQuery(); });
  $("q-pos").addEventListener("change", (e) => { query.t = +e.target.value; redrawQuery(); });
  $("q-prev").addEventListener("click", () => { query.t = Math.max(0, query.t - 1); $("q-pos").value = query.t; redrawQuery(); });
  $("q-next").addEventListener("click", () => { query.t = Math.min(T - 1, query.t + 1); $("q-pos").value = query.t; redrawQuery(); });
  redrawQuery();
}
function redrawQuery() {
  const inside = D.inside[query.layer], h = query.head, t = query.t;
  const q = inside.q[h][t], scores = inside.scores[h][t];
  $("q-formula").textContent = "weight_j = softmax_j(q\u00b7k_j \u00d7 " + HS + "^-0.5, with j > " + t +
    " masked to -inf);  hs^-0.5 = " + D.scale.toPrecision(7);
  vectorSpans($("q-vector"), q, HS <= 16, "q");
  const body = document.querySelector("#q-table tbody");
  body.textContent = "";
  const topK = Math.max(...inside.k[h].flat().map(Math.abs)), topV = Math.max(...inside.v[h].flat().map(Math.abs));
  let sum = 0, worst = 0;
  // softmax over the scaled, masked scores, recomputed here only to check ember's weights
  const scaled = scores.map((s, j) => (j <= t ? s * D.scale : -Infinity));
  const m = Math.max(...scaled), e = scaled.map((x) => Math.exp(x - m)), z = e.reduce((a, b) => a + b, 0);
  for (let j = 0; j < T; ++j) {
    const w = weight(query.layer, h, t, j);
    sum += w;
    worst = Math.max(worst, Math.abs(e[j] / z - w));
    const tr = htmlEl("tr", {class: j > t ? "masked" : j === t ? "current" : ""});
    tr.appendChild(htmlEl("td", {}, String(j)));
    tr.appendChild(htmlEl("td", {class: "tok"}, show(D.tokens[j])));
    const k = htmlEl("td", {class: "tok"}), kv = htmlEl("span", {class: "vec"});
    vectorSpans(kv, inside.k[h][j], false, "k_" + j);
    k.appendChild(kv);
    [...kv.children].forEach((c, i) => { c.style.background = diverging(inside.k[h][j][i], topK); });
    tr.appendChild(k);
    tr.appendChild(htmlEl("td", {class: "score"}, scores[j].toFixed(4)));
    tr.appendChild(htmlEl("td", {class: "scaled"}, (scores[j] * D.scale).toFixed(4)));
    tr.appendChild(htmlEl("td", {class: "masked-score"}, j > t ? "\u2212inf" : (scores[j] * D.scale).toFixed(4)));
    const wc = htmlEl("td", {class: "tok weight", "data-j": j}, w.toFixed(7));
    wc.appendChild(htmlEl("span", {class: "bar", style: "width:" + Math.round(80 * w) + "px"}));
    tr.appendChild(wc);
    const v = htmlEl("td", {class: "tok"}), vv = htmlEl("span", {class: "vec"});
    vectorSpans(vv, inside.v[h][j], false, "v_" + j);
    [...vv.children].forEach((c, i) => { c.style.background = diverging(inside.v[h][j][i], topV); });
    v.appendChild(vv);
    tr.appendChild(v);
    body.appendChild(tr);
  }
  $("q-sum").textContent = sum.toFixed(7);
  $("q-caption").textContent = "Layer " + (query.layer + 1) + ", head " + (h + 1) + ", query " + t + " " + quoted(t) +
                               ": one row per key j.";
  vectorSpans($("q-out"), inside.out[h][t], HS <= 16, "out");
  let best = 0;
  for (let j = 1; j <= t; ++j) if (weight(query.layer, h, t, j) > weight(query.layer, h, t, best)) best = j;
  $("q-desc").textContent = "Layer " + (query.layer + 1) + ", head " + (h + 1) + ", query " + t + " " + quoted(t) + ": " +
    "the largest weight, " + weight(query.layer, h, t, best).toFixed(4) + ", is on key " + best + " " + quoted(best) +
    "; the " + (T - 1 - t) + " keys after position " + t + " are masked. The weights sum to " + sum.toFixed(7) + ".";
  $("q-check").textContent = "Check: softmax recomputed in this page from the scaled, masked scores differs from ember's weights " +
    "by at most " + worst.toExponential(1) + " (float32 rounding)." +
    (LAYERS_INSIDE.length < L ? " This page holds q, k and v of layer " + LAYERS_INSIDE.map((l) => l + 1).join(", ") +
     " only, to stay small (explore --layer picks another)." : "");
}

// ---- predictions ------------------------------------------------------------------------------
function probabilities(t, temperature) {
  const logits = D.next.logits[t], ids = D.next.ids ? D.next.ids[t] : logits.map((_, i) => i);
  const scaled = logits.map((x) => x / temperature), m = Math.max(...scaled);
  const e = scaled.map((x) => Math.exp(x - m)), z = e.reduce((a, b) => a + b, 0);
  return ids.map((id, i) => [id, e[i] / z]);
}
function drawPredictions() {
  $("pred-top-head").textContent = "top " + D.top_k + " next tokens, p at T";
  $("temp").addEventListener("input", redrawPredictions);
  redrawPredictions();
}
function redrawPredictions() {
  const temperature = +$("temp").value;
  $("temp-value").textContent = temperature.toFixed(2);
  const body = document.querySelector("#pred-table tbody");
  body.textContent = "";
  let total = 0;
  for (let t = 0; t < T; ++t) {
    const p = probabilities(t, temperature), byId = new Map(p);
    const tr = htmlEl("tr", {"data-t": t});
    tr.appendChild(htmlEl("td", {}, String(t)));
    tr.appendChild(htmlEl("td", {class: "tok"}, show(D.tokens[t])));
    const next = t + 1 < T ? D.ids[t + 1] : null;
    tr.appendChild(htmlEl("td", {class: "tok"}, next === null ? "(end of prompt)" : show(D.vocab[next])));
    tr.appendChild(htmlEl("td", {class: "target-p"}, next === null ? "" : (byId.get(next) || 0).toFixed(4)));
    tr.appendChild(htmlEl("td", {class: "loss"}, next === null ? "" : D.losses[t].toFixed(4)));
    if (next !== null) total += D.losses[t];
    const top = htmlEl("td", {class: "tok top"});
    p.sort((a, b) => b[1] - a[1]).slice(0, D.top_k).forEach(([id, prob]) => {
      const c = htmlEl("span", {class: "cand", "data-id": id, "data-p": prob});
      c.append(htmlEl("span", {class: "tok"}, show(D.vocab[id])), " ", htmlEl("span", {class: "p"}, prob.toFixed(4)),
               htmlEl("span", {class: "bar", style: "width:" + Math.round(30 * prob) + "px" + (id === next ? ";background:#2ca02c" : "")}));
      top.appendChild(c);
    });
    tr.appendChild(top);
    body.appendChild(tr);
  }
  $("pred-desc").textContent = "Temperature " + temperature.toFixed(2) + ". Mean loss of the prompt's " + (T - 1) +
    " next tokens (ember's, at T = 1): " + (T > 1 ? (total / (T - 1)).toFixed(4) : "none") + "." +
    (D.next.ids ? " The vocabulary is large: each position keeps its " + D.next.logits[0].length +
                  " largest logits, and the probabilities are renormalised over those." : "") +
    " A green bar marks the prompt's actual next token.";
}

// ---- training ------------------------------------------------------------------------------
// Ticks at the multiples of 1, 2 or 5 times a power of ten that give about five intervals.
function niceTicks(lo, hi) {
  const raw = (hi - lo) / 5 || 1, mag = Math.pow(10, Math.floor(Math.log10(raw))), r = raw / mag;
  const step = (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * mag, ticks = [];
  for (let i = Math.ceil(lo / step - 1e-9); i * step <= hi + 1e-9 * step; ++i) ticks.push(i * step);
  return ticks;
}
function drawTraining() {
  const tr = D.train, svg = $("train-svg");
  if (!tr) {
    $("train-what").textContent = "This page holds no training run.";
    svg.setAttribute("width", 0);
    svg.setAttribute("height", 0);
    return;
  }
  const last = tr.evals.length ? tr.evals[tr.evals.length - 1] : null;
  $("train-what").textContent = "Training on " + tr.data + ": the light line is every step's training loss (one batch), " +
    "the points the mean train and val loss of each evaluation." +
    (last ? " At step " + last[0] + ": train loss " + last[1].toFixed(4) + ", val loss " + last[2].toFixed(4) + "." : "");
  const W = 760, H = 380, x0 = 60, y0 = 20, w = W - x0 - 150, h = H - y0 - 50;
  svg.setAttribute("width", W);
  svg.setAttribute("height", H);
  const values = tr.steps.concat(tr.evals.flatMap((e) => [e[1], e[2]])).filter((v) => v !== null);
  const lo = Math.min(0, ...values), hi = Math.max(...values), n = Math.max(tr.steps.length, ...tr.evals.map((e) => e[0]), 1);
  const X = (s) => x0 + (s / n) * w, Y = (v) => y0 + h - ((v - lo) / (hi - lo || 1)) * h;
  svg.appendChild(svgEl("rect", {x: x0, y: y0, width: w, height: h, fill: "none", stroke: "#999"}));
  for (const v of niceTicks(lo, hi)) {
    svg.appendChild(svgEl("text", {x: x0 - 6, y: Y(v) + 4, "text-anchor": "end"}, String(+v.toFixed(6))));
    svg.appendChild(svgEl("line", {x1: x0, x2: x0 + w, y1: Y(v), y2: Y(v), stroke: "#eee"}));
  }
  for (const s of niceTicks(0, n)) svg.appendChild(svgEl("text", {x: X(s), y: y0 + h + 18, "text-anchor": "middle"}, String(s)));
  svg.appendChild(svgEl("text", {x: x0 + w / 2, y: H - 8, "text-anchor": "middle"}, "step"));
  svg.appendChild(svgEl("text", {x: 0, y: 0, transform: "translate(16," + (y0 + h / 2) + ") rotate(-90)", "text-anchor": "middle"}, "loss"));
  const points = tr.steps.map((v, s) => (v === null ? null : X(s).toFixed(1) + "," + Y(v).toFixed(1))).filter((p) => p);
  svg.appendChild(svgEl("polyline", {points: points.join(" "), fill: "none", stroke: "#9ecae1", "stroke-width": 1, class: "step-loss"}));
  // val first, so that train's points, drawn over them, show where the two meet
  [[2, "#ff7f0e", "val (evaluation)", 1], [1, "#1f77b4", "train (evaluation)", 0]].forEach(([i, color, name, row]) => {
    svg.appendChild(svgEl("polyline", {points: tr.evals.map((e) => X(e[0]) + "," + Y(e[i])).join(" "), fill: "none", stroke: color, "stroke-width": 2}));
    tr.evals.forEach((e) => svg.appendChild(svgEl("circle", {cx: X(e[0]), cy: Y(e[i]), r: 3.5, fill: color, class: "eval-point"})));
    svg.appendChild(svgEl("circle", {cx: x0 + w + 20, cy: y0 + 30 + row * 22, r: 4, fill: color}));
    svg.appendChild(svgEl("text", {x: x0 + w + 30, y: y0 + 34 + row * 22}, name));
  });
  svg.appendChild(svgEl("line", {x1: x0 + w + 12, x2: x0 + w + 28, y1: y0 + 8, y2: y0 + 8, stroke: "#9ecae1", "stroke-width": 2}));
  svg.appendChild(svgEl("text", {x: x0 + w + 30, y: y0 + 12}, "every step"));
  if (tr.sample) {
    $("train-sample").append(htmlEl("h3", {}, "A sample of the trained model"), htmlEl("pre", {class: "sample"}, tr.sample));
  }
}

const DRAW = {head: drawHeadView, model: drawModelView, query: drawQueryView, predictions: drawPredictions, training: drawTraining};
openView("head");
</script>
</body>
</html>
)html";
    return page;
}

} // namespace train
