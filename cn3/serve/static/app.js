// cn3 serve: the page. Plain JavaScript, no framework, no build step, nothing loaded from elsewhere.
// Every string from the server goes into the page as text (textContent, createTextNode, setAttribute).
"use strict";
(function () {
  const SVGNS = "http://www.w3.org/2000/svg";
  const PALETTE = ["#2b5797", "#d9480f", "#2b8a3e", "#862e9c", "#c2255c", "#e67700", "#0b7285", "#495057"];
  const state = {
    runs: [], maxWords: 0, grid: null, views: [], difference: null, differenceReason: null,
    layer: 0, head: -1, decoderLayer: 0, topk: 1, threshold: 0, urls: [], renders: 0, avail: 0, itemText: null,
  };
  const $ = (id) => document.getElementById(id);

  // ---- DOM helpers: text only, never markup from data ----
  function setAttrs(node, attrs) {
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") node.textContent = String(value);
      else node.setAttribute(key, String(value));
    }
    return node;
  }
  function add(node, kids) {
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined || kid === false) continue;
      node.appendChild(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return node;
  }
  const el = (tag, attrs, ...kids) => add(setAttrs(document.createElement(tag), attrs), kids);
  const sv = (tag, attrs, ...kids) => add(setAttrs(document.createElementNS(SVGNS, tag), attrs), kids);
  const clear = (node) => { while (node.firstChild) node.removeChild(node.firstChild); return node; };
  const score = (x) => fmt(x, Math.abs(x) >= 1 ? 1 : 3);
  const fmt = (x, digits = 2) => (typeof x === "number" && isFinite(x) ? x.toFixed(digits) : "–");

  let measureContext = null;
  function textWidth(text, px) {
    if (!measureContext) measureContext = document.createElement("canvas").getContext("2d");
    measureContext.font = `${px}px system-ui, sans-serif`;
    return measureContext.measureText(text).width;
  }

  // ---- talking to the server ----
  async function api(path, body) {
    const init = body === undefined ? {} : {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
    let response;
    try { response = await fetch(path, init); } catch (err) {
      throw new Error(`The server cannot be reached (${err.message}).`);
    }
    let data = null;
    try { data = await response.json(); } catch (err) {
      throw new Error(`${path}: the server answered ${response.status} without JSON.`);
    }
    if (data && typeof data === "object" && data.error) throw new Error(String(data.error));
    if (!response.ok) throw new Error(`${path}: the server answered ${response.status}.`);
    return data;
  }
  function showError(message) { const box = $("error"); box.textContent = message; box.hidden = false; }
  function clearError() { const box = $("error"); box.textContent = ""; box.hidden = true; }
  // an event handler whose failures land in the error area, never in the console
  const guarded = (fn) => (...args) => Promise.resolve().then(() => fn(...args)).catch((err) => {
    showError(err && err.message ? err.message : String(err));
    setStatus("");
  });
  const setStatus = (text) => { $("status").textContent = text; };
  const currentRun = () => state.runs.find((run) => run.id === $("run").value);
  const runById = (id) => state.runs.find((run) => run.id === id);

  // ---- colours ----
  function ramp(t) {  // white -> blue
    const c = Math.max(0, Math.min(1, t));
    const mix = (a, b) => Math.round(a + (b - a) * c);
    return `rgb(${mix(255, 43)},${mix(255, 87)},${mix(255, 151)})`;
  }
  function diverging(t) {  // red (-1) - white (0) - blue (+1)
    const c = Math.max(-1, Math.min(1, t));
    const mix = (a, b, s) => Math.round(a + (b - a) * s);
    return c >= 0 ? `rgb(${mix(255, 43, c)},${mix(255, 87, c)},${mix(255, 151, c)})`
      : `rgb(${mix(255, 192, -c)},${mix(255, 57, -c)},${mix(255, 43, -c)})`;
  }
  function gateColour(t) {  // white -> green
    const c = Math.max(0, Math.min(1, t));
    const mix = (a, b) => Math.round(a + (b - a) * c);
    return `rgb(${mix(255, 47)},${mix(255, 158)},${mix(255, 68)})`;
  }

  // ---- the learned graph: arcs over the words, POS and gate under them, trees below (displaCy's layout) ----
  // Columns: natural word widths when the sentence fits the view; narrower columns with slanted words
  // when it does not; scaled to the view's width past that (never a sideways scroll up to ~70 words).
  const MIN_PITCH = 16;       // px: the narrowest column of a slanted word
  const SIDE_BY_SIDE = 24;    // words: longer sentences put two compared runs one above the other
  const SLANT = 50;           // degrees: slanted words run down to the right
  const clip = (t, n) => (t.length > n ? `${t.slice(0, n - 1)}…` : t);
  function layoutWords(tokens, pos, avail) {
    const natural = tokens.map((t, i) => Math.max(26, Math.min(180, Math.max(textWidth(t, 13),
      pos ? textWidth(pos[i] || "", 9) : 0) + 14)));
    const room = Math.max(300, avail || 0);
    const sum = natural.reduce((a, b) => a + b, 0);
    if (!avail || sum + 24 <= room) {
      const centres = [];
      let x = 12;
      for (const w of natural) { centres.push(x + w / 2); x += w; }
      return { centres, widths: natural, total: x + 12, slanted: false, band: pos ? 30 : 18 };
    }
    const longest = Math.max(...tokens.map((t, i) => textWidth(clip(t, 16), 12) +
      (pos ? textWidth(` ${pos[i] || ""}`, 9) : 0)));
    const cos = Math.cos(SLANT * Math.PI / 180), sin = Math.sin(SLANT * Math.PI / 180);
    const right = longest * cos + 8;
    const pitch = Math.max(MIN_PITCH, Math.min(60, (room - 24 - right) / tokens.length));
    const centres = tokens.map((_, i) => 12 + pitch * (i + 0.5));
    return { centres, widths: tokens.map(() => pitch), total: 12 + pitch * tokens.length + right,
      slanted: true, band: longest * sin + 16 };
  }

  function headMatrix(layer, head) {
    const heads = layer.heads || [];
    if (heads.length === 0) return [];
    if (head >= 0 && head < heads.length) return heads[head];
    return heads[0].map((row, i) => row.map((_, k) => heads.reduce((s, h) => s + h[i][k], 0) / heads.length));
  }
  // a head's own statistics and tree marks, or the mean's ("all heads")
  const headStats = (layer, head) => (head >= 0 && (layer.per_head || [])[head]) || layer;

  // (i, k, w) for each row's top-k keys at or above the threshold, weakest first (strongest on top);
  // exact zeros (sparse weights: sparsemax, entmax, a tree) are never drawn
  function chooseArcs(matrix, topk, threshold) {
    const arcs = [];
    matrix.forEach((row, i) => {
      const order = row.map((w, k) => [k, w]).sort((a, b) => b[1] - a[1]).slice(0, Math.max(1, topk));
      for (const [k, w] of order) if (w >= threshold && w > 0) arcs.push([i, k, w]);
    });
    return arcs.sort((a, b) => a[2] - b[2]);
  }

  // displaCy's stacking: spans from the shortest up, each one level above every placed span whose extent
  // (its words, and its label's box) it overlaps; so nested arcs sit inside, and no two labels at a level meet
  function stackLevels(spans) {
    const order = spans.map((s, j) => j).sort((a, b) => (spans[a].hi - spans[a].lo) - (spans[b].hi - spans[b].lo));
    const levels = new Array(spans.length).fill(1);
    const placed = [];
    for (const j of order) {
      const s = spans[j];
      let level = 1;
      for (const p of placed) if (s.lo < p.hi - 0.5 && p.lo < s.hi - 0.5) level = Math.max(level, levels[p.j] + 1);
      levels[j] = level;
      placed.push({ lo: s.lo, hi: s.hi, j });
    }
    return levels;
  }

  let svgCount = 0;  // unique marker ids, so one SVG copied out alone keeps its arrowheads
  function arrowDefs(svg) {
    const id = `cn3-arrow-${++svgCount}`;
    svg.appendChild(sv("defs", {}, sv("marker", { id, viewBox: "0 0 8 8", refX: 7, refY: 4, markerWidth: 7,
      markerHeight: 7, markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" },
    sv("path", { d: "M0 0 L8 4 L0 8 z", class: "arrowhead" }))));
    return `url(#${id})`;
  }

  // a squared arc from x1 to x2 at height h over (dir -1) or under (dir +1) the line y, corners rounded
  function arcPath(x1, x2, y, h, dir) {
    const r = Math.min(5, Math.abs(x2 - x1) / 2, h), s = Math.sign(x2 - x1) || 1, top = y + dir * h;
    return `M${fmt(x1, 1)} ${fmt(y, 1)} L${fmt(x1, 1)} ${fmt(top - dir * r, 1)} Q${fmt(x1, 1)} ${fmt(top, 1)} ` +
      `${fmt(x1 + s * r, 1)} ${fmt(top, 1)} L${fmt(x2 - s * r, 1)} ${fmt(top, 1)} Q${fmt(x2, 1)} ${fmt(top, 1)} ` +
      `${fmt(x2, 1)} ${fmt(top - dir * r, 1)} L${fmt(x2, 1)} ${fmt(y, 1)}`;
  }
  // where an arc leaves word i for word k: off the word's centre, towards the other end
  const foot = (centres, pitch, i, k) => centres[i] + Math.sign(k - i) * Math.min(4, pitch / 5);

  // a tree (a parse, or a layer's best tree): ``heads[i]`` the head of word i (-1 the root), arcs under the
  // line y from head to dependent, stacked by nesting, each relation label on its arc's floor
  function treeLayout(heads, relations, centres, pitch) {
    const spans = heads.map((h, i) => {
      const label = relations ? relations[i] || (h < 0 ? "root" : "") : "";
      const half = label ? textWidth(label, 9) / 2 + 3 : 0;
      const a = h < 0 ? centres[i] : foot(centres, pitch, h, i), b = h < 0 ? centres[i] : foot(centres, pitch, i, h);
      const mid = (a + b) / 2;
      return { h, i, a, b, label, mid, lo: Math.min(a, b, mid - half), hi: Math.max(a, b, mid + half) };
    });
    const levels = stackLevels(spans);
    return { spans, levels, deepest: Math.max(0, ...levels) };
  }
  const TREE_STEP = 14;  // px between the floors of two tree levels: a label's height and a gap
  function drawTree(svg, tree, y, cls, tokens, marked) {
    tree.spans.forEach((s, j) => {
      const depth = tree.levels[j] * TREE_STEP;
      const what = s.h < 0 ? `${tokens[s.i]} is the root` : `${tokens[s.h]} → ${tokens[s.i]}${s.label ? ` (${s.label})` : ""}`;
      if (s.h < 0) {
        svg.appendChild(sv("line", { class: cls, x1: fmt(s.a, 1), y1: y, x2: fmt(s.a, 1), y2: fmt(y + depth, 1) },
          sv("title", { text: what })));
      } else {
        svg.appendChild(sv("path", { class: `${cls}${marked && marked.has(s.i) ? " marked" : ""}`, "data-dep": s.i,
          "data-head": s.h, d: arcPath(s.a, s.b, y, depth, 1) }, sv("title", { text: what })));
        svg.appendChild(sv("circle", { cx: fmt(s.b, 1), cy: y + 1.5, r: 1.8, class: `${cls}-foot` }));
      }
      if (s.label) {
        const w = textWidth(s.label, 9) + 4;
        svg.appendChild(sv("rect", { class: "rel-box", x: fmt(s.mid - w / 2, 1), y: fmt(y + depth - 5.5, 1),
          width: fmt(w, 1), height: 11 }));
        svg.appendChild(sv("text", { class: "rel", x: fmt(s.mid, 1), y: fmt(y + depth + 3, 1) }, s.label));
      }
    });
  }

  function arcsSvg(side, layer, matrix, stats) {
    const tokens = side.tokens, pos = side.pos || null;
    const L = layoutWords(tokens, pos, state.avail);
    const { centres, widths } = L;
    const pitch = L.slanted ? widths[0] : 26;
    const arcs = chooseArcs(matrix, state.topk, state.threshold);
    const spans = arcs.map(([i, k]) => ({ lo: Math.min(foot(centres, pitch, i, k), foot(centres, pitch, k, i)),
      hi: Math.max(foot(centres, pitch, i, k), foot(centres, pitch, k, i)) }));
    const levels = stackLevels(spans.map((s, j) => (arcs[j][0] === arcs[j][1] ? { lo: 0, hi: 0 } : s)));
    const top = Math.max(1, ...levels.filter((_, j) => arcs[j][0] !== arcs[j][1]));
    const step = Math.max(4, Math.min(14, 220 / top));
    const base = 14 + top * step + 4;
    const wordY = base + 16;
    const gateY = wordY + L.band - 8;
    const parse = side.parse;
    const treeY = gateY + (layer.gate ? 20 : 6);
    const marks = new Map((stats.tree_marks || []).map(([i, k, kind]) => [`${i},${k}`, kind]));
    const parseTree = parse ? treeLayout(parse.heads, parse.relations, centres, pitch) : null;
    const best = Array.isArray(layer.best_tree) && layer.best_tree.length === tokens.length
      ? treeLayout(layer.best_tree, null, centres, pitch) : null;
    const parseH = parseTree ? (parseTree.deepest + 1) * TREE_STEP : 0;
    const bestY = treeY + parseH + (best ? 14 : 0);
    const height = Math.ceil(bestY + (best ? (best.deepest + 1) * TREE_STEP : 0) + 6);
    const total = Math.ceil(L.total);
    const scale = state.avail && total > state.avail ? state.avail / total : 1;
    const svg = sv("svg", { xmlns: SVGNS, width: Math.floor(total * scale), height: Math.ceil(height * scale),
      viewBox: `0 0 ${total} ${height}`, class: "arcs", role: "img", "data-scale": fmt(scale, 3) });
    svg.appendChild(sv("rect", { x: 0, y: 0, width: total, height, fill: "#fff" }));
    const arrow = arrowDefs(svg);
    arcs.forEach(([i, k, w], j) => {
      const s = Math.sqrt(Math.max(0, Math.min(1, w)));  // absolute: a near-uniform row stays faint
      const kind = marks.get(`${i},${k}`);
      const title = sv("title", { text: `${tokens[i]} reads ${tokens[k]}: ${fmt(w, 3)}${kind ? ` (${kind} in the parse)` : ""}` });
      const common = { "data-i": i, "data-k": k, "stroke-width": fmt(0.6 + 2.6 * s, 2),
        "stroke-opacity": fmt(0.25 + 0.75 * s, 2) };
      if (i === k) {
        svg.appendChild(sv("circle", { ...common, class: `ring${kind ? ` tree-${kind}` : ""}`,
          cx: fmt(centres[i], 1), cy: base - 5, r: fmt(2 + 3 * s, 1) }, title));
        return;
      }
      svg.appendChild(sv("path", { ...common, class: `arc${kind ? ` tree-${kind}` : ""}`, "marker-end": arrow,
        d: arcPath(foot(centres, pitch, i, k), foot(centres, pitch, k, i), base, levels[j] * step, -1) }, title));
    });
    tokens.forEach((token, i) => {
      const tag = pos ? pos[i] || "" : "";
      if (L.slanted) {
        const x = centres[i] - 3, y = wordY - 8;
        svg.appendChild(sv("text", { class: "word slanted", x: fmt(x, 1), y: fmt(y, 1), "data-i": i,
          transform: `rotate(${SLANT} ${fmt(x, 1)} ${fmt(y, 1)})` }, clip(token, 16),
        tag ? sv("tspan", { class: "pos" }, ` ${tag}`) : null, sv("title", { text: `${i + 1}: ${token}${tag ? ` (${tag})` : ""}` })));
      } else {
        svg.appendChild(sv("text", { class: "word", x: fmt(centres[i], 1), y: wordY, "data-i": i },
          clip(token, 24), sv("title", { text: `${i + 1}: ${token}${tag ? ` (${tag})` : ""}` })));
        if (tag) svg.appendChild(sv("text", { class: "pos", x: fmt(centres[i], 1), y: wordY + 12 }, tag));
      }
      if (layer.gate) {
        const g = layer.gate[i];
        svg.appendChild(sv("rect", { class: "gate-cell", x: fmt(centres[i] - widths[i] / 2 + 1, 1), y: gateY,
          width: fmt(widths[i] - 2, 1), height: 13, fill: gateColour(g) },
        sv("title", { text: `update gate of ${token}: ${fmt(g, 3)}` })));
        if (!L.slanted) svg.appendChild(sv("text", { class: "gate-text", x: fmt(centres[i], 1), y: gateY + 10 }, fmt(g, 2)));
      }
    });
    if (parseTree) {
      const marked = new Set();
      for (const [key, kind] of marks) {
        const [i, k] = key.split(",").map(Number);
        marked.add(kind === "head" ? i : k);  // the dependent of the parse arc the learned arc matches
      }
      drawTree(svg, parseTree, treeY, "dep", tokens, marked);
    }
    if (best) {
      svg.appendChild(sv("text", { class: "band-label", x: 4, y: bestY - 3 }, "best tree of this layer"));
      drawTree(svg, best, bestY, "best", tokens, null);
    }
    return svg;
  }

  // ---- heatmaps: a layer's matrix, a difference, a translation's source attention ----
  function heatmapSvg(rowTokens, colTokens, matrix, options = {}) {
    const n = rowTokens.length, m = colTokens.length;
    const cell = Math.max(n, m) <= 14 ? 26 : Math.max(n, m) <= 40 ? 16 : 11;
    const label = (t) => (t.length > 16 ? `${t.slice(0, 15)}…` : t);
    const px = Math.min(11, cell - 2);  // labels no taller than a cell: long sentences stay legible
    const angle = cell >= 26 ? -55 : -90;  // narrow columns: upright labels, which cannot overlap
    const longest = Math.max(20, ...colTokens.map((t) => textWidth(label(t), px)));
    const left = 8 + Math.max(20, ...rowTokens.map((t) => textWidth(label(t), px)));
    const head = 8 + longest * (angle === -90 ? 1 : 0.82);
    const right = angle === -90 ? 6 : 0.6 * longest;  // slanted labels lean right
    const width = Math.ceil(left + m * cell + right), height = Math.ceil(head + n * cell + 6);
    const fit = state.avail && width > state.avail ? state.avail / width : 1;  // no sideways scroll
    const svg = sv("svg", { xmlns: SVGNS, width: Math.floor(width * fit), height: Math.ceil(height * fit),
      viewBox: `0 0 ${width} ${height}`, class: "heatmap", "data-scale": fmt(fit, 3) });
    svg.appendChild(sv("rect", { x: 0, y: 0, width, height, fill: "#fff" }));
    // weights on an absolute square-root scale (a uniform row is pale however long the sentence);
    // differences scaled to the largest, but never below 0.05 (noise stays pale)
    const scale = options.diverging ? Math.max(0.05, ...matrix.flat().map(Math.abs)) : 1;
    const shade = (v) => (options.diverging ? Math.abs(v) / scale : Math.sqrt(Math.max(0, v)));
    matrix.forEach((row, i) => row.forEach((v, k) => {
      const fill = options.diverging ? diverging(v / scale) : ramp(shade(v));
      svg.appendChild(sv("rect", { class: "cell", "data-i": i, "data-k": k, x: fmt(left + k * cell, 1),
        y: fmt(head + i * cell, 1), width: cell, height: cell, fill },
      sv("title", { text: `${rowTokens[i]} → ${colTokens[k]}: ${fmt(v, 4)}` })));
      if (cell >= 26) {
        svg.appendChild(sv("text", { class: "tick", x: fmt(left + k * cell + cell / 2, 1), y: fmt(head + i * cell + 17, 1),
          "text-anchor": "middle",
          style: `fill:${shade(v) > 0.6 ? "#fff" : "#222"}` }, fmt(v, 2).replace(/^(-?)0\./, "$1.")));
      }
    }));
    rowTokens.forEach((t, i) => svg.appendChild(sv("text", { class: "lab row-lab", "data-i": i, x: left - 4,
      y: fmt(head + i * cell + cell / 2 + px / 3, 1), "text-anchor": "end", style: `font-size:${px}px` }, label(t))));
    colTokens.forEach((t, k) => {
      const x = left + k * cell + cell / 2 + px / 3, y = head - 4;
      svg.appendChild(sv("text", { class: "lab col-lab", "data-k": k, x: fmt(x, 1), y: fmt(y, 1),
        style: `font-size:${px}px`, transform: `rotate(${angle} ${fmt(x, 1)} ${fmt(y, 1)})` }, label(t)));
    });
    return svg;
  }

  function gateStripSvg(tokens, gate, caption) {
    const { centres, widths, total } = layoutWords(tokens);
    const svg = sv("svg", { xmlns: SVGNS, width: Math.ceil(total), height: 42, viewBox: `0 0 ${Math.ceil(total)} 42`,
      class: "gate-strip" });
    svg.appendChild(sv("rect", { x: 0, y: 0, width: Math.ceil(total), height: 42, fill: "#fff" }));
    tokens.forEach((t, i) => {
      svg.appendChild(sv("text", { class: "word", x: fmt(centres[i], 1), y: 14 }, t));
      svg.appendChild(sv("rect", { class: "gate-cell", x: fmt(centres[i] - widths[i] / 2 + 2, 1), y: 20,
        width: fmt(widths[i] - 4, 1), height: 14, fill: gateColour(gate[i]) },
      sv("title", { text: `${caption} of ${t}: ${fmt(gate[i], 3)}` })));
      svg.appendChild(sv("text", { class: "gate-text", x: fmt(centres[i], 1), y: 31 }, fmt(gate[i], 2)));
    });
    return svg;
  }

  // ---- hover: a word's row (what it reads) and column (what reads it), in arcs and heatmap ----
  function wireHover(container) {
    const arcSvg = container.querySelector("svg.arcs");
    if (!arcSvg) return;
    const marked = (i, on) => {
      arcSvg.classList.toggle("hovering", on);
      for (const node of container.querySelectorAll("[data-i], [data-k]")) {
        const isRow = node.getAttribute("data-i") === String(i);
        const isCol = node.getAttribute("data-k") === String(i);
        const arc = node.classList.contains("arc") || node.classList.contains("ring");
        node.classList.toggle("row", on && arc && isRow);
        node.classList.toggle("col", on && arc && isCol && !isRow);
        node.classList.toggle("focus", on && node.classList.contains("word") && isRow);
        node.classList.toggle("hl", on && !arc && (isRow || isCol) &&
          (node.classList.contains("cell") || node.classList.contains("lab")));
      }
    };
    for (const word of arcSvg.querySelectorAll("text.word")) {
      const i = word.getAttribute("data-i");
      word.addEventListener("mouseenter", () => marked(i, true));
      word.addEventListener("mouseleave", () => marked(i, false));
    }
  }

  // ---- the prediction ----
  function probsBlock(probs) {
    const entries = Object.entries(probs || {}).sort((a, b) => b[1] - a[1]);
    return el("div", { class: "probs" }, entries.map(([label, p]) => [
      el("span", { text: label }), el("div", { class: "bar", style: `width:${fmt(100 * p, 1)}%` }),
      el("span", { text: fmt(p, 3) })]));
  }

  function predictionBlock(view) {
    const p = view.prediction || {};
    if (p.tags) {
      const tokens = view.sides[0] ? view.sides[0].tokens : p.tags.map(() => "");
      const best = (i) => (p.marginals && p.marginals[i] ? p.marginals[i][p.tags[i]] : undefined);
      const tip = (i) => Object.entries((p.marginals || [])[i] || {}).sort((a, b) => b[1] - a[1]).slice(0, 4)
        .map(([t, v]) => `${t} ${fmt(v, 3)}`).join(", ");
      return el("div", { class: "scroll prediction-tags" }, el("table", { class: "tags" },
        el("tr", {}, el("th", { text: "word" }), tokens.map((t) => el("td", {}, el("bdi", { text: t })))),
        el("tr", {}, el("th", { text: "tag" }), p.tags.map((t, i) => el("td", { title: tip(i) }, el("b", { text: t })))),
        el("tr", {}, el("th", { text: "marginal" }), p.tags.map((t, i) => el("td", { text: fmt(best(i), 2) })))));
    }
    if (p.translation !== undefined) {
      return el("div", { class: "prediction" }, el("span", { class: "muted", text: "translation" }),
        el("bdi", { class: "translation", text: p.translation }), p.translation.trim() ? null
          : el("span", { class: "note", text: "(the model produced no words)" }));
    }
    return el("div", { class: "prediction" }, el("span", { class: "muted", text: "prediction" }),
      el("bdi", { class: "label", text: p.label }), probsBlock(p.probs));
  }

  // ---- one run's view ----
  // BertViz's model view: every layer x head (and the heads' mean) as a small heatmap; a click opens it
  function modelView(side) {
    const layers = side.layers;
    const heads = Math.max(...layers.map((l) => (l.heads || []).length));
    const n = side.tokens.length;
    const size = Math.max(40, Math.min(90, Math.floor(560 / (heads + (heads > 1 ? 1 : 0)))));
    const grid = el("div", { class: "model-grid", style: `grid-template-columns: 3.5em repeat(${heads + (heads > 1 ? 1 : 0)}, ${size + 6}px)` });
    grid.appendChild(el("span"));
    for (let h = 0; h < heads; h++) grid.appendChild(el("span", { class: "model-head", text: heads > 1 ? `head ${h + 1}` : "" }));
    if (heads > 1) grid.appendChild(el("span", { class: "model-head", text: "all heads" }));
    layers.forEach((layer, l) => {
      grid.appendChild(el("span", { class: "model-layer", text: `layer ${layer.layer + 1}` }));
      const choices = [...(layer.heads || []).keys()];
      if (heads > 1) choices.push(-1);
      for (const h of choices) {
        const canvas = el("canvas", { width: n, height: n, class: "thumb", style: `width:${size}px;height:${size}px` });
        const context = canvas.getContext("2d");
        const image = context.createImageData(n, n);
        const matrix = headMatrix(layer, h);
        matrix.forEach((row, i) => row.forEach((v, k) => {
          const t = Math.sqrt(Math.max(0, Math.min(1, v)));
          const at = 4 * (i * n + k);
          image.data[at] = 255 + (43 - 255) * t;
          image.data[at + 1] = 255 + (87 - 255) * t;
          image.data[at + 2] = 255 + (151 - 255) * t;
          image.data[at + 3] = 255;
        }));
        context.putImageData(image, 0, 0);
        const stats = headStats(layer, h);
        const current = l === Math.min(state.layer, layers.length - 1) && h === state.head;
        const cell = el("button", { type: "button", class: `thumb-cell${current ? " current" : ""}`, "data-layer": l,
          "data-head": h, title: `layer ${layer.layer + 1}, ${h < 0 ? "all heads (mean)" : `head ${h + 1}`}: hub share ` +
            `${fmt(stats.hub_share)}, row entropy ${fmt(stats.row_entropy)}; click to open` }, canvas);
        cell.addEventListener("click", guarded(() => {
          state.layer = l;
          state.head = h;
          setupControls();
          render();
          const arcs = document.querySelector("#views svg.arcs");
          if (arcs && arcs.scrollIntoView) arcs.scrollIntoView({ block: "nearest" });
        }));
        grid.appendChild(cell);
      }
      for (let h = choices.length - (heads > 1 ? 1 : 0); h < heads; h++) grid.appendChild(el("span"));
    });
    return el("details", { class: "model-view", open: "open" },
      el("summary", { text: `model view: every layer × head (${layers.length} × ${heads}); click one to open it` }), grid);
  }

  function sideBlock(side, view) {
    const block = el("div", { class: "side" });
    block.appendChild(el("h3", {}, `${side.name}: `, el("bdi", { text: side.tokens.join(" ") })));
    if (!side.layers || side.layers.length === 0) {
      block.appendChild(el("p", { class: "note", text: "This encoder has no word-to-word graph to show." }));
      return block;
    }
    if (state.layer >= side.layers.length) {
      const run = runById(view.run);
      block.appendChild(el("p", { class: "note depth-note", text: `${run ? run.name : view.run} has ` +
        `${side.layers.length} layer(s): layer ${state.layer + 1} is not in it.` }));
      return block;
    }
    const layer = side.layers[state.layer];
    const heads = (layer.heads || []).length;
    const head = state.head < heads ? state.head : -1;
    const stats = headStats(layer, head);
    const headName = heads <= 1 ? "" : head >= 0 ? `, head ${head + 1}` : ", all heads (mean)";
    block.appendChild(el("div", { class: "metrics", "data-layer": state.layer, "data-head": head },
      `layer ${layer.layer + 1}${headName} · hub share ${fmt(stats.hub_share)} · row entropy ${fmt(stats.row_entropy)}` +
      (layer.gate ? "" : " · no update gate")));
    const matrix = headMatrix(layer, head);
    block.appendChild(el("div", { class: "scroll" }, arcsSvg(side, layer, matrix, stats)));
    block.appendChild(el("div", { class: "scroll" }, heatmapSvg(side.tokens, side.tokens, matrix)));
    if (side.layers.length * heads > 1 && side.rows === "words") block.appendChild(modelView(side));
    wireHover(block);
    return block;
  }

  function translationBlock(t) {
    const block = el("div", { class: "translation-block" }, el("h3", { text: "translation: source attention" }));
    const maps = t.source_attention || [];
    if (maps.length) {
      const index = Math.min(state.decoderLayer, maps.length - 1);
      const pick = el("select", { class: "decoder-layer" }, maps.map((_, j) =>
        el("option", { value: j, selected: j === index ? "selected" : null, text: maps.length > 1 ? `decoder layer ${j + 1}` : "head-averaged" })));
      pick.addEventListener("change", guarded(() => { state.decoderLayer = Number(pick.value); render(); }));
      block.appendChild(el("div", { class: "line" }, el("span", { text: "target words (rows) × source words (columns)" }), pick));
      block.appendChild(el("div", { class: "scroll" }, heatmapSvg(t.target_tokens, t.source_tokens, maps[index])));
    }
    if (t.local_gate) {
      block.appendChild(el("div", { class: "muted", text: "local gate per source token (hybrid)" }));
      block.appendChild(el("div", { class: "scroll" }, gateStripSvg(t.source_tokens, t.local_gate, "local gate")));
    }
    return block;
  }

  function viewBlock(view) {
    const run = runById(view.run);
    const title = run ? `${run.name} (${run.encoder}, ${run.task})` : view.run;
    return el("div", { class: "view", "data-run": view.run }, el("h2", {}, el("bdi", { text: title })),
      predictionBlock(view), (view.sides || []).map((side) => sideBlock(side, view)),
      view.translation ? translationBlock(view.translation) : null);
  }

  function differenceBlock() {
    const box = clear($("difference"));
    if (state.views.length < 2) return;
    const [a, b] = state.views.map((v) => (runById(v.run) || { name: v.run }).name);
    box.appendChild(el("h2", {}, "difference (", el("bdi", { text: b }), " − ", el("bdi", { text: a }), "), head-averaged"));
    const entries = (state.difference || []).filter((d) => d.layer === state.layer);
    if (state.differenceReason) box.appendChild(el("p", { class: "note difference-note", text: state.differenceReason }));
    if (!entries.length) {
      if (state.difference) {
        box.appendChild(el("p", { class: "note difference-note", text:
          `No difference for layer ${state.layer + 1}: one of the runs has fewer layers.` }));
      }
      return;
    }
    for (const d of entries) {
      const side = state.views[0].sides.find((s) => s.name === d.side) || state.views[0].sides[0];
      box.appendChild(el("h3", { text: `${d.side}, layer ${d.layer + 1} (blue: the second reads more, red: less)` }));
      box.appendChild(el("div", { class: "scroll" }, heatmapSvg(side.tokens, side.tokens, d.matrix, { diverging: true })));
    }
  }

  function render() {
    const views = clear($("views"));
    // two runs side by side while their sentences are short; one above the other past SIDE_BY_SIDE words,
    // so that a long sentence keeps the page's width (its words legible) rather than half of it
    const longest = Math.max(0, ...state.views.flatMap((v) => (v.sides || []).map((sd) => sd.tokens.length)));
    const beside = state.views.length > 1 && longest <= SIDE_BY_SIDE;
    views.classList.toggle("compare", beside);
    // the width a view's graph may take (less the boxes' padding)
    state.avail = Math.max(300, Math.floor((views.clientWidth || document.documentElement.clientWidth) /
      (beside ? state.views.length : 1)) - 40);
    for (const view of state.views) views.appendChild(viewBlock(view));
    differenceBlock();
    $("legend").hidden = !state.views.some((v) => (v.sides || []).some((s) => (s.layers || []).length));
    document.body.setAttribute("data-renders", String(++state.renders));  // lets a test wait for a new view
  }

  function setupControls() {
    const layers = Math.max(0, ...state.views.flatMap((v) => (v.sides || []).map((s) => (s.layers || []).length)));
    const heads = Math.max(0, ...state.views.flatMap((v) => (v.sides || []).flatMap((s) =>
      (s.layers || []).map((l) => (l.heads || []).length))));
    if (state.layer >= layers) state.layer = 0;
    if (state.head >= heads) state.head = -1;
    const layer = clear($("layer"));
    for (let l = 0; l < layers; l++) layer.appendChild(el("option", { value: l, text: `layer ${l + 1}` }));
    layer.value = String(state.layer);
    const head = clear($("head"));
    head.appendChild(el("option", { value: -1, text: heads > 1 ? "all heads (mean)" : "(one head)" }));
    for (let h = 0; heads > 1 && h < heads; h++) head.appendChild(el("option", { value: h, text: `head ${h + 1}` }));
    head.value = String(state.head);
    head.disabled = heads <= 1;
    $("controls").hidden = state.views.length === 0;
  }

  // ---- asking for a view ----
  function queryText(run) {
    const first = $("text").value;
    return run.level === "pair" ? [first, $("text2").value] : first;
  }

  async function show() {
    clearError();
    const run = currentRun();
    if (!run) throw new Error("No run is loaded.");
    const text = queryText(run);
    const pair = run.level === "pair";
    if (!(pair ? text[0] : text).trim()) throw new Error(pair ? "Type a premise first." : "Type a sentence first.");
    if (pair && !text[1].trim()) throw new Error("Type a hypothesis too: this run reads sentence pairs.");
    const other = $("other").value;
    // an item's text is sent as its tokens while it stays untouched; the box is not ticked for what comes next
    const pretokenized = $("pretokenized").checked || (state.itemText !== null && $("text").value === state.itemText);
    setStatus("working…");
    if (other) {
      const data = await api("/api/compare", { runs: [run.id, other], text, pretokenized });
      state.views = data.views;
      state.difference = data.difference;
      state.differenceReason = data.difference_reason;
    } else {
      state.views = [await api("/api/view", { run: run.id, text, pretokenized })];
      state.difference = null;
      state.differenceReason = null;
    }
    setupControls();
    render();
    setStatus("");
  }

  function onRunChange() {
    const run = currentRun();
    if (!run) return;
    const pair = run.level === "pair";
    $("text2-line").hidden = !pair;
    $("text-label").textContent = pair ? "premise" : run.level === "tagging" ? "tokens" :
      run.kind === "translation" ? "source" : "sentence";
    $("pretokenized").checked = run.level === "tagging";  // tagging takes tokens as given
    state.itemText = null;
    state.layer = 0;
    state.head = -1;
    state.topk = 1;
    state.threshold = 0;
    $("topk").value = "1";
    $("threshold").value = "0";
    $("threshold-value").textContent = fmt(0);
    const scores = run.scores || {};
    $("run-info").textContent = `${run.kind}, ${run.task}, ${run.encoder}, ${run.layers} layer(s) × ${run.heads} head(s); ` +
      `${scores.metric || "score"} dev ${score(scores.dev)}, test ${score(scores.test)}; at most ${state.maxWords} words per sentence`;
    for (const option of $("other").options) option.disabled = option.value === run.id;
    if ($("other").value === run.id) $("other").value = "";
    state.views = [];
    clear($("views")); clear($("difference")); clear($("items"));
    $("controls").hidden = true;
    if (!$("run-panel").hidden) return loadRunPage();
  }

  // ---- dev/test items ----
  async function loadItems() {
    clearError();
    const run = currentRun();
    const other = $("other").value;
    const order = $("items-order").value;
    if (order === "disagree" && !other) throw new Error("Pick a run to compare with to list where the two disagree.");
    const query = new URLSearchParams({ run: run.id, split: $("items-split").value, order,
      limit: $("items-limit").value || "20", errors: $("items-errors").checked ? "1" : "0" });
    if (other) query.set("other", other);
    const data = await api(`/api/items?${query}`);
    const box = clear($("items"));
    const show = (x) => (Array.isArray(x) ? x.join(run.level === "pair" ? " ‖ " : " ") : x === null || x === undefined ? "–" : String(x));
    const rows = (data.items || []).map((item) => {
      const row = el("tr", { "data-index": item.index, title: "click to load this item" },
        el("td", { text: item.index }), el("td", {}, el("bdi", { text: show(item.text) })),
        el("td", { text: show(item.gold) }), el("td", { text: show(item.pred) }),
        other ? el("td", { text: show(item.other_pred) }) : null, el("td", { class: item.correct ? "right" : "wrong",
          text: item.correct ? "✓" : "✗" }), el("td", { text: fmt(item.hub_share) }), el("td", { text: fmt(item.row_entropy) }));
      row.addEventListener("click", guarded(() => loadItem(item)));
      return row;
    });
    if (!rows.length) { box.appendChild(el("p", { class: "note", text: "No items." })); return; }
    box.appendChild(el("table", { class: "items" }, el("thead", {}, el("tr", {}, ["#", "text", "gold", "prediction",
      other ? "other prediction" : null, "right", "hub share", "row entropy"].filter((h) => h)
      .map((h) => el("th", { text: h })))),
    el("tbody", {}, rows)));
  }

  function loadItem(item) {
    const text = item.text;
    if (Array.isArray(text) && currentRun().level === "pair") {
      $("text").value = text[0];
      $("text2").value = text[1] || "";
    } else {
      $("text").value = Array.isArray(text) ? text.join(" ") : text;
    }
    state.itemText = item.tokens_pretokenized ? $("text").value : null;  // show() sends it as tokens
    return show();
  }

  // ---- run page ----
  function flatRows(object, prefix = "") {
    const rows = [];
    for (const [key, value] of Object.entries(object || {})) {
      const name = prefix ? `${prefix}.${key}` : key;
      if (value && typeof value === "object" && !Array.isArray(value)) rows.push(...flatRows(value, name));
      else rows.push([name, typeof value === "number" ? String(Math.round(value * 1e4) / 1e4) : JSON.stringify(value)]);
    }
    return rows;
  }

  // one metric's curves (a line per split) as an inline SVG line plot
  function linePlot(metric, curves) {
    const series = new Map();
    for (const c of curves) {
      if (!series.has(c.split)) series.set(c.split, []);
      series.get(c.split).push(c);
    }
    const W = 460, H = 250, L = 58, R = 14, T = 24, B = 34;
    const xs = curves.map((c) => c.step), ys = curves.map((c) => c.value);
    const [x0, x1] = [Math.min(...xs), Math.max(...xs)], [y0, y1] = [Math.min(...ys), Math.max(...ys)];
    const px = (x) => L + (x1 === x0 ? 0.5 : (x - x0) / (x1 - x0)) * (W - L - R);
    const py = (y) => T + (1 - (y1 === y0 ? 0.5 : (y - y0) / (y1 - y0))) * (H - T - B);
    const svg = sv("svg", { xmlns: SVGNS, width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: "curves" });
    svg.appendChild(sv("rect", { x: 0, y: 0, width: W, height: H, fill: "#fff" }));
    svg.appendChild(sv("text", { class: "legend-text", x: L, y: 14, "font-weight": "bold" }, metric));
    svg.appendChild(sv("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
    svg.appendChild(sv("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
    const ticks = (a, b) => (a === b ? [a] : [0, 1, 2, 3, 4].map((j) => a + (b - a) * j / 4));
    for (const xv of ticks(x0, x1)) {
      svg.appendChild(sv("text", { class: "tick", x: fmt(px(xv), 1), y: H - B + 14, "text-anchor": "middle" }, String(Math.round(xv))));
    }
    for (const yv of ticks(y0, y1)) {
      svg.appendChild(sv("text", { class: "tick", x: L - 5, y: fmt(py(yv) + 3, 1), "text-anchor": "end" },
        fmt(yv, Math.abs(y1 - y0) >= 10 || Math.abs(yv) >= 100 ? 1 : 3)));
    }
    svg.appendChild(sv("text", { class: "tick", x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" }, "step"));
    [...series.entries()].forEach(([split, points], j) => {
      const colour = PALETTE[j % PALETTE.length];
      points.sort((a, b) => a.step - b.step);
      svg.appendChild(sv("polyline", { class: "curve", stroke: colour,
        points: points.map((p) => `${fmt(px(p.step), 1)},${fmt(py(p.value), 1)}`).join(" ") }, sv("title", { text: split })));
      for (const p of points) {
        svg.appendChild(sv("circle", { cx: fmt(px(p.step), 1), cy: fmt(py(p.value), 1), r: 2.6, fill: colour },
          sv("title", { text: `${split} ${metric} at step ${p.step}: ${fmt(p.value, 4)}` })));
      }
      const lx = W - R - 90;
      svg.appendChild(sv("rect", { x: lx, y: 6 + j * 14, width: 12, height: 3, fill: colour }));
      svg.appendChild(sv("text", { class: "legend-text", x: lx + 16, y: 11 + j * 14 }, split));
    });
    return svg;
  }

  async function loadRunPage() {
    clearError();
    const run = currentRun();
    const page = clear($("run-page"));
    const data = await api(`/api/run?run=${encodeURIComponent(run.id)}`);
    page.appendChild(el("h2", {}, "run ", el("bdi", { text: data.name })));
    page.appendChild(el("h3", { text: "learning curves" }));
    const curves = (data.curves || []).filter((c) => typeof c.value === "number" && typeof c.step === "number");
    const metrics = [...new Set(curves.map((c) => c.metric))];
    page.appendChild(curves.length ? el("div", { class: "plots" }, metrics.map((m) =>
      linePlot(m, curves.filter((c) => c.metric === m))))
      : el("p", { class: "note", text: "This run recorded no evaluations." }));
    page.appendChild(el("details", { open: "open" }, el("summary", { text: "results" }),
      el("table", { class: "kv" }, flatRows(data.results).map(([k, v]) =>
        el("tr", {}, el("th", { text: k }), el("td", { text: v }))))));
    page.appendChild(el("details", {}, el("summary", { text: "config" }),
      el("pre", { class: "config", text: JSON.stringify(data.config, null, 2) })));
  }

  // ---- the grid's report: minimal markdown (headings, tables, code, images), all as text ----
  function inline(text) {
    const parts = [];
    const pattern = /(`[^`]+`)|!\[([^\]]*)\]\(([^)\s]+)\)|\[([^\]]+)\]\(([^)\s]+)\)|\*\*([^*]+)\*\*/g;
    let last = 0, m;
    while ((m = pattern.exec(text)) !== null) {
      if (m.index > last) parts.push(text.slice(last, m.index));
      if (m[1]) parts.push(el("code", { text: m[1].slice(1, -1) }));
      else if (m[3] !== undefined) parts.push(reportImage(m[3], m[2]));
      else if (m[4] !== undefined) parts.push(el("span", { class: "link", title: m[5], text: m[4] }));
      else parts.push(el("strong", { text: m[6] }));
      last = pattern.lastIndex;
    }
    if (last < text.length) parts.push(text.slice(last));
    return parts;
  }

  const shownImages = new Set();
  function reportImage(path, alt) {
    const name = path.split("/").pop();
    shownImages.add(name);
    return el("img", { src: `/api/grid/image?name=${encodeURIComponent(name)}`, alt: alt || name });
  }

  const cells = (line) => line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
  function markdown(text) {
    const out = el("div", { class: "report" });
    const lines = String(text).split("\n");
    let paragraph = [];
    const flush = () => { if (paragraph.length) out.appendChild(el("p", {}, inline(paragraph.join(" ")))); paragraph = []; };
    for (let j = 0; j < lines.length; j++) {
      const line = lines[j];
      const heading = /^(#{1,6})\s+(.*)$/.exec(line);
      if (/^```/.test(line)) {
        flush();
        const code = [];
        for (j++; j < lines.length && !/^```/.test(lines[j]); j++) code.push(lines[j]);
        out.appendChild(el("pre", {}, el("code", { text: code.join("\n") })));
      } else if (heading) {
        flush();
        out.appendChild(el(`h${Math.min(6, heading[1].length + 1)}`, {}, inline(heading[2])));
      } else if (/^\s*\|/.test(line) && j + 1 < lines.length && /^\s*\|?\s*:?-{2,}/.test(lines[j + 1])) {
        flush();
        const table = el("table", {}, el("thead", {}, el("tr", {}, cells(line).map((c) => el("th", {}, inline(c))))));
        const body = el("tbody");
        for (j += 2; j < lines.length && /^\s*\|/.test(lines[j]); j++) {
          body.appendChild(el("tr", {}, cells(lines[j]).map((c) => el("td", {}, inline(c)))));
        }
        j--;
        out.appendChild(add(table, [body]));
      } else if (!line.trim()) {
        flush();
      } else {
        paragraph.push(line.trim());
      }
    }
    flush();
    return out;
  }

  async function loadGridPage() {
    clearError();
    const page = clear($("grid-page"));
    const data = await api("/api/grid");
    shownImages.clear();
    page.appendChild(el("h2", {}, "grid ", el("bdi", { text: data.name })));
    page.appendChild(markdown(data.markdown || ""));
    const rest = (data.images || []).filter((name) => !shownImages.has(name));
    if (rest.length) {
      page.appendChild(el("h3", { text: "figures" }));
      page.appendChild(el("div", { class: "report" }, rest.map((name) => el("figure", {}, reportImage(name, name),
        el("figcaption", { class: "muted", text: name })))));
    }
  }

  // ---- export the current view: self-contained HTML, SVG, PNG ----
  function styleText() {
    const rules = [];
    for (const sheet of document.styleSheets) {
      try { for (const rule of sheet.cssRules) rules.push(rule.cssText); } catch (err) { /* not ours */ }
    }
    return rules.join("\n");
  }

  function exportNodes() {
    if (!state.views.length) throw new Error("Show a sentence first: there is no view to export.");
    return [$("views"), $("difference")];
  }

  // what an exported figure says about itself: runs, sentence, layer and head, prediction, legend
  function exportCaption() {
    const lines = [];
    const name = (id) => { const run = runById(id); return run ? `${run.name} (${run.encoder}, ${run.task})` : id; };
    lines.push(`cn3 serve: ${state.views.map((v) => name(v.run)).join(" vs ")}`);
    const first = state.views[0];
    for (const side of first.sides || []) lines.push(`${side.name}: ${side.tokens.join(" ")}`);
    if (!(first.sides || []).length && first.translation) lines.push(`source: ${first.translation.source_tokens.join(" ")}`);
    for (const view of state.views) {
      const p = view.prediction || {};
      const said = p.label !== undefined ? `${p.label} (${fmt((p.probs || {})[p.label], 3)})`
        : p.translation !== undefined ? p.translation : p.tags ? p.tags.join(" ") : "";
      lines.push(`${state.views.length > 1 ? `${name(view.run)}: ` : ""}prediction: ${said}`);
    }
    const graphs = state.views.some((v) => (v.sides || []).some((sd) => (sd.layers || []).length));
    if (graphs) {
      lines.push(`layer ${state.layer + 1}, ${state.head >= 0 ? `head ${state.head + 1}` : "all heads (mean)"}; ` +
        `top-k ${state.topk}, threshold ${fmt(state.threshold)}`);
      lines.push("arcs above the words: word i reads word k (thicker, darker = stronger; a ring: a word reading itself);");
      lines.push("under the words: part of speech, update gate, dependency parse (head → dependent); green: a learned");
      lines.push("strongest key that is the word's parse head or dependent. Heatmap: row i = what word i reads.");
    } else {
      lines.push("this run's encoder has no word-to-word graph: the prediction only");
    }
    const wrapped = lines.flatMap((line) => line.match(/.{1,150}(\s|$)|.{150}/g) || [line]);
    const width = Math.ceil(Math.max(...wrapped.map((line) => textWidth(line, 12))) + 16);
    const height = 18 * wrapped.length + 10;
    const svg = sv("svg", { xmlns: SVGNS, width, height, viewBox: `0 0 ${width} ${height}`, class: "caption" });
    svg.appendChild(sv("rect", { x: 0, y: 0, width, height, fill: "#fff" }));
    wrapped.forEach((line, j) => svg.appendChild(sv("text", { class: j === 0 ? "caption-title" : "caption-line",
      x: 8, y: 18 + 18 * j }, line.trim())));
    return svg;
  }

  function offer(blob, name) {
    const url = URL.createObjectURL(blob);
    state.urls.push(url);
    const link = el("a", { href: url, download: name, class: `download-${name.split(".").pop()}`, text: name });
    const box = $("downloads");
    for (const old of box.querySelectorAll(`a.download-${name.split(".").pop()}`)) old.remove();
    box.appendChild(link);
    link.click();
    return link;
  }

  function exportHtml() {
    const nodes = exportNodes();
    const doc = document.implementation.createHTMLDocument("cn3 view");
    const meta = doc.createElement("meta");
    meta.setAttribute("charset", "utf-8");
    doc.head.prepend(meta);
    const style = doc.createElement("style");
    style.textContent = `${styleText()}\nbody { margin: 1em; }`;
    doc.head.appendChild(style);
    const main = doc.createElement("main");
    main.appendChild(doc.importNode(exportCaption(), true));
    for (const node of nodes) {
      const copy = doc.importNode(node, true);
      // the model view is the page's way to pick a head (its canvases hold no picture once copied)
      for (const control of copy.querySelectorAll(".model-view, select, button, input")) control.remove();
      main.appendChild(copy);
    }
    doc.body.appendChild(main);
    const html = `<!DOCTYPE html>\n${doc.documentElement.outerHTML}\n`;
    return offer(new Blob([html], { type: "text/html;charset=utf-8" }), "cn3-view.html");
  }

  // every SVG of the view stacked into one document, with the page's styles inlined
  function combinedSvg() {
    const parts = [exportCaption(), ...exportNodes().flatMap((node) => [...node.querySelectorAll("svg")])];
    let y = 0, width = 0;
    const root = sv("svg", { xmlns: SVGNS, version: "1.1" });
    root.appendChild(sv("style", { text: styleText() }));
    const body = sv("g");
    for (const part of parts) {
      const box = (part.getAttribute("viewBox") || "").split(" ").map(Number);  // full size, not the page's scaling
      const w = box.length === 4 ? box[2] : Number(part.getAttribute("width"));
      const h = box.length === 4 ? box[3] : Number(part.getAttribute("height"));
      const copy = part.cloneNode(true);
      copy.classList.remove("hovering");
      copy.setAttribute("x", "0");
      copy.setAttribute("y", String(y));
      copy.setAttribute("width", String(w));
      copy.setAttribute("height", String(h));
      body.appendChild(copy);
      y += h + 12;
      width = Math.max(width, w);
    }
    setAttrs(root, { width: Math.ceil(width), height: Math.ceil(y), viewBox: `0 0 ${Math.ceil(width)} ${Math.ceil(y)}` });
    root.appendChild(sv("rect", { x: 0, y: 0, width: Math.ceil(width), height: Math.ceil(y), fill: "#fff" }));
    root.appendChild(body);
    return { text: new XMLSerializer().serializeToString(root), width: Math.ceil(width), height: Math.ceil(y) };
  }

  function exportSvg() {
    return offer(new Blob([combinedSvg().text], { type: "image/svg+xml" }), "cn3-view.svg");
  }

  function exportPng() {
    const { text, width, height } = combinedSvg();
    const url = URL.createObjectURL(new Blob([text], { type: "image/svg+xml" }));
    return new Promise((resolve, reject) => {
      const image = new Image();
      image.onload = () => {
        const scale = width * height > 16e6 || Math.max(width, height) > 16000 ? 1 : 2;
        const canvas = document.createElement("canvas");
        canvas.width = width * scale;
        canvas.height = height * scale;
        const context = canvas.getContext("2d");
        context.fillStyle = "#fff";
        context.fillRect(0, 0, canvas.width, canvas.height);
        context.scale(scale, scale);
        context.drawImage(image, 0, 0);
        URL.revokeObjectURL(url);
        canvas.toBlob((blob) => (blob ? resolve(offer(blob, "cn3-view.png"))
          : reject(new Error("The browser could not draw the PNG (the view may be too large)."))), "image/png");
      };
      image.onerror = () => { URL.revokeObjectURL(url); reject(new Error("The browser could not draw the SVG.")); };
      image.src = url;
    });
  }

  // ---- tabs and start-up ----
  function selectTab(button) {
    for (const tab of document.querySelectorAll("nav .tab")) {
      tab.classList.toggle("active", tab === button);
      $(tab.dataset.panel).hidden = tab !== button;
    }
    if (button.id === "tab-run") return loadRunPage();
    if (button.id === "tab-grid") return loadGridPage();
    return undefined;
  }

  function wire() {
    $("query").addEventListener("submit", (event) => { event.preventDefault(); guarded(show)(); });
    $("run").addEventListener("change", guarded(onRunChange));
    $("other").addEventListener("change", () => { $("items-order").value = $("other").value ? "disagree" : "entropy"; });
    $("layer").addEventListener("change", guarded(() => { state.layer = Number($("layer").value); render(); }));
    $("head").addEventListener("change", guarded(() => { state.head = Number($("head").value); render(); }));
    $("topk").addEventListener("input", guarded(() => { state.topk = Math.max(1, Number($("topk").value) || 1); render(); }));
    $("threshold").addEventListener("input", guarded(() => {
      state.threshold = Number($("threshold").value);
      $("threshold-value").textContent = fmt(state.threshold);
      render();
    }));
    $("items-load").addEventListener("click", guarded(loadItems));
    $("export-html").addEventListener("click", guarded(exportHtml));
    $("export-svg").addEventListener("click", guarded(exportSvg));
    $("export-png").addEventListener("click", guarded(exportPng));
    for (const tab of document.querySelectorAll("nav .tab")) tab.addEventListener("click", guarded(() => selectTab(tab)));
  }

  async function start() {
    wire();
    const data = await api("/api/runs");
    state.runs = data.runs || [];
    state.maxWords = data.max_words;
    $("word-cap").textContent = String(data.max_words);
    state.grid = data.grid;
    for (const run of state.runs) {
      const label = `${run.name} (${run.encoder}, ${run.task})`;
      $("run").appendChild(el("option", { value: run.id, text: label }));
      $("other").appendChild(el("option", { value: run.id, text: label }));
    }
    $("tab-grid").hidden = !state.grid;
    $("items-box").hidden = state.runs.length === 0;
    if (!state.runs.length) throw new Error("The server was started without runs.");
    onRunChange();
    document.body.setAttribute("data-ready", "1");
  }

  document.addEventListener("DOMContentLoaded", guarded(start));
})();
