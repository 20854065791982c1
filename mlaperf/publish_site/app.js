// mlaperf static site: pages laid out in the browser from data/*.js (written by `mlaperf publish`).
// Every string shown (numbers, units, ratios, p-values, tables, axis labels) was made by `mlaperf publish` with
// the dashboard's own functions; this file only lays them out and scales the charts to the axes it was given,
// but for one: a History overlay whose values no published axis holds gets an axis over every machine drawn here
// (``covering``), labelled in the unit of this machine's axis.
// No server, no network: data files are <script>s (a browser loads those from file://, where it refuses
// fetch), charts are SVG drawn here. Routes live in the location hash, so every view is a link:
//   #/<machine folder>                      overview: alert groups, summary grid with search (?q=)
//   #/<machine folder>/history/<series id>  one series over commits (?at=<sha> marks a commit, ?vs=<folder>,<folder>
//                                           overlays the same series measured on other machines)
//   #/<machine folder>/throughput           tokens/s vs concurrency at the newest commit with the fullest grid (?suite=, ?filter=)
//   #/<machine folder>/alerts               alert groups (?show=open,suspect,fixed,closed or ?group=N; ?all=1: every
//                                           machine's, from the machines' own data files)
"use strict";

const MLAPERF = (window.MLAPERF = { data: {}, waiting: {} });
MLAPERF.put = (key, value) => {
  MLAPERF.data[key] = value;
  (MLAPERF.waiting[key] || []).forEach((resolve) => resolve(value));
  delete MLAPERF.waiting[key];
};

function load(key) {
  if (key in MLAPERF.data) return Promise.resolve(MLAPERF.data[key]);
  return new Promise((resolve, reject) => {
    (MLAPERF.waiting[key] = MLAPERF.waiting[key] || []).push(resolve);
    const el = document.createElement("script");
    el.src = `data/${key}.js`;
    el.onerror = () => reject(new Error(`data/${key}.js is missing: publish the site again`));
    document.head.appendChild(el);
  });
}

// -- DOM and SVG helpers ----------------------------------------------------------------------------
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) el.append(c.nodeType ? c : String(c));
  return el;
}

const SVGNS = "http://www.w3.org/2000/svg";
function s(tag, attrs = {}, text) {
  const el = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) el.setAttribute(k, v);
  if (text !== undefined) el.textContent = text;
  return el;
}

function tooltip() {
  let tip = document.getElementById("tip");
  if (!tip) { tip = h("div", { id: "tip", role: "tooltip" }); document.body.append(tip); }
  return tip;
}

function showTip(event, text) {
  const tip = tooltip();
  tip.textContent = text;
  tip.style.display = "block";
  tip.style.left = `${Math.min(event.clientX + 14, window.innerWidth - 440)}px`;
  tip.style.top = `${event.clientY + 14}px`;
}
const hideTip = () => { tooltip().style.display = "none"; };
function hover(el, text) {
  el.addEventListener("mousemove", (e) => showTip(e, text));
  el.addEventListener("mouseleave", hideTip);
  return el;
}

// A table cell as publish wrote it: text, or {text, href} (a page of this site, or a commit in the repository).
function cell(c) {
  // A link to another site (the repository) opens a new tab, as the dashboard's do; this site's pages in this one.
  if (c && typeof c === "object") {
    const away = !c.href.startsWith("#");
    return h("a", { href: c.href, rel: away ? "noopener" : null, target: away ? "_blank" : null }, c.text);
  }
  return c;
}

// A short cell (a status, a ratio, a p-value, a short SHA) never wraps: "suspec/t", "26.9/x" and "< 1e-/12" were
// broken across lines where a long series name took the row's room. Long ones (names, paths) still wrap.
const SHORT_CELL = 24;
function cellAttrs(c) {
  const text = c && typeof c === "object" ? c.text : String(c ?? "");
  return text.length <= SHORT_CELL ? { class: "nw" } : {};
}

function table(t, attrs = {}) {
  return h("table", attrs, h("thead", {}, h("tr", {}, t.columns.map((c) => h("th", {}, c)))),
    h("tbody", {}, t.rows.map((row) => h("tr", {}, row.map((c) => h("td", cellAttrs(c), cell(c)))))));
}

const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#999999", "#F0E442"];

function sparkline(values) {
  const svg = s("svg", { class: "spark", width: 120, height: 24, viewBox: "0 0 120 24", "aria-hidden": "true" });
  if (values.length < 2) return svg;
  const lo = Math.min(...values), hi = Math.max(...values), n = values.length - 1;
  const y = (v) => (hi > lo ? 21 - ((v - lo) / (hi - lo)) * 18 : 12);
  svg.append(s("polyline", { points: values.map((v, i) => `${(i / n) * 116 + 2},${y(v).toFixed(1)}`).join(" ") }));
  svg.append(s("circle", { cx: 118, cy: y(values[n]).toFixed(1), r: 2 }));
  return svg;
}

// One chart: lines of [x, y, hover text] points on the axes publish computed ({domain, ticks, labels, title,
// log}); the x axis is commit positions or, with x.log2, concurrency. extras(svg, sx, sy, box) draws markers.
let chartCount = 0;
// The chart's width in CSS pixels: the page's, so its text keeps its 11 px (a 1,100-wide drawing scaled to an 800 px
// window drew it at 7.6 px; a review); the drawing still scales if the window changes after.
function plotWidth() {
  const main = document.getElementById("main");
  const inner = main ? main.clientWidth - 40 : 0;  // less main's padding
  return inner > 0 ? Math.max(360, Math.min(1460, inner)) : 1100;
}

function chart({ lines, x, y, extras, width = plotWidth(), height = 380 }) {
  const m = { l: 78, r: 40, t: 12, b: 46 };
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img" });
  const xd = x.domain || [x.ticks[0], x.ticks[x.ticks.length - 1]];
  const fx = x.log2 ? Math.log2 : (v) => v;
  const xspan = fx(xd[1]) - fx(xd[0]) || 1;
  const sx = (v) => m.l + ((fx(v) - fx(xd[0])) / xspan) * (width - m.l - m.r);
  const fy = y.log ? Math.log : (v) => v;
  const yspan = fy(y.domain[1]) - fy(y.domain[0]) || 1;
  const sy = (v) => height - m.b - ((fy(v) - fy(y.domain[0])) / yspan) * (height - m.t - m.b);
  const yAxis = s("g", { class: "axis y" });
  y.ticks.forEach((t, i) => {
    const g = s("g", { class: "tick" });
    g.append(s("line", { class: "grid", x1: m.l, x2: width - m.r, y1: sy(t), y2: sy(t) }));
    g.append(s("text", { x: m.l - 6, y: sy(t) + 4, "text-anchor": "end" }, y.labels[i]));
    yAxis.append(g);
  });
  yAxis.append(s("text", { transform: `translate(14 ${(height - m.b + m.t) / 2}) rotate(-90)`, "text-anchor": "middle" }, y.title));
  const xAxis = s("g", { class: "axis x" });
  let room = -Infinity;  // where the last label drawn ends: a narrow chart labels every other tick or fewer
  x.ticks.forEach((t, i) => {
    const g = s("g", { class: "tick" });
    g.append(s("line", { x1: sx(t), x2: sx(t), y1: height - m.b, y2: height - m.b + 4 }));
    const half = 3.5 * String(x.labels[i]).length + 6;  // about half a label at 11 px, and a gap
    if (sx(t) - half >= room) {
      g.append(s("text", { x: sx(t), y: height - m.b + 16, "text-anchor": "middle" }, x.labels[i]));
      room = sx(t) + half;
    }
    xAxis.append(g);
  });
  xAxis.append(s("text", { x: (width + m.l) / 2, y: height - 6, "text-anchor": "middle" }, x.title));
  xAxis.append(s("line", { x1: m.l, x2: width - m.r, y1: height - m.b, y2: height - m.b }));
  svg.append(yAxis, xAxis);
  // Lines stay inside the plot: an overlaid machine's values may reach past the axis drawn.
  const clip = `plot-${++chartCount}`, pad = 6;  // pad: whole dots at the axes' ends
  const clipPath = s("clipPath", { id: clip });
  clipPath.append(s("rect", { x: m.l - pad, y: m.t - pad, width: width - m.l - m.r + 2 * pad, height: height - m.t - m.b + 2 * pad }));
  svg.append(clipPath);
  const drawn = s("g", { class: "lines", "clip-path": `url(#${clip})` });
  lines.forEach((line, i) => {
    const color = PALETTE[i % PALETTE.length];
    let path = "", pen = false;
    for (const [px, py] of line.points) {
      if (py === null) { pen = false; continue; }
      path += `${pen ? "L" : "M"}${sx(px).toFixed(1)},${sy(py).toFixed(1)}`;
      pen = true;
    }
    drawn.append(s("path", { d: path, fill: "none", stroke: color, "stroke-width": 1.6 }));
    const dots = s("g", { class: "points" });
    const r = line.points.length > 300 ? 1.6 : 2.6;
    for (const [px, py, tip] of line.points) {
      if (py !== null) dots.append(hover(s("circle", { cx: sx(px).toFixed(1), cy: sy(py).toFixed(1), r, fill: color }), tip));
    }
    drawn.append(dots);
  });
  svg.append(drawn);
  if (extras) extras(svg, sx, sy, { top: m.t, bottom: height - m.b });
  return svg;
}

function legend(names) {
  return h("div", { class: "legend" }, names.map((n, i) => {
    const swatch = h("i");
    swatch.style.background = PALETTE[i % PALETTE.length];
    return h("span", {}, swatch, n);
  }));
}

// -- routes ------------------------------------------------------------------------------------------
function route() {
  const [path, query] = location.hash.replace(/^#\/?/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { folder: parts[0], page: parts[1] || "overview", arg: parts[2], q: new URLSearchParams(query || "") };
}

function link(folder, page, arg, params) {
  let out = `#/${folder}`;
  if (page && page !== "overview") out += `/${page}`;
  if (arg !== undefined && arg !== null) out += `/${encodeURIComponent(arg)}`;
  const q = new URLSearchParams(Object.entries(params || {}).filter(([, v]) => v !== "" && v != null)).toString();
  return q ? `${out}?${q}` : out;
}

function setQuery(key, value) {
  const r = route();
  if (value) r.q.set(key, value); else r.q.delete(key);
  history.replaceState(null, "", link(r.folder, r.page, r.arg, Object.fromEntries(r.q)));
}

async function render() {
  const r = route();
  const site = MLAPERF.data.site;
  const main = document.getElementById("main");
  if (!site.machines.length) { main.replaceChildren(h("p", { class: "note" }, site.empty)); return; }
  const machine = site.machines.find((m) => m.folder === r.folder);
  if (!machine && !r.folder) { location.replace(link(site.machines[0].folder)); return; }
  const select = document.getElementById("machine");
  select.replaceChildren(...(machine ? [] : [h("option", { value: "", selected: true, disabled: true }, "pick a machine")]),
    ...site.machines.map((m) => h("option", { value: m.folder, selected: m === machine }, m.label)));
  // The same page on the other machine: a series' History too (its id is the series' on every machine).
  select.onchange = () => { location.hash = link(select.value, r.page, r.page === "history" ? r.arg : null); };
  document.getElementById("footer").textContent = site.footer;
  if (!machine) {  // a mistyped or stale link: say so (as the dashboard does), never show another machine
    document.getElementById("nav").replaceChildren();
    const known = site.machines.map((m) => m.folder).join(", ");
    main.replaceChildren(h("p", { class: "error" }, `No machine '${r.folder}' on this site (known: ${known}).`),
      h("p", {}, h("a", { href: link(site.machines[0].folder) }, `${site.machines[0].label}: overview`)));
    return;
  }
  document.getElementById("nav").replaceChildren(...[["overview", "Overview"], ["alerts", "Alert groups"],
    ["throughput", "Throughput vs concurrency"]].map(([p, t]) =>
    h("a", { href: link(machine.folder, p), class: r.page === p ? "active" : null }, t)));
  const data = await load(`${machine.folder}/index`);
  const pages = { overview, history: historyPage, throughput, alerts };
  const page = pages[r.page];
  main.replaceChildren(...(page ? await page(data, machine, r) : [h("p", { class: "error" }, `No page named '${r.page}'.`)]));
}

// -- overview: alert groups that need a look, then every series in a searchable grid ------------------
const GRID_ROWS = 600;
const GRID_COLUMNS = ["series", "latest", "newest values", "latest change", "last flagged"];
function overview(data, machine, r) {
  const out = [h("h1", {}, data.title),
    h("div", { class: "metrics" }, data.metrics.map(([v, t]) => h("div", { class: "metric" }, h("b", {}, v), h("span", {}, t)))),
    h("p", { class: "note" }, data.versions)];
  out.push(h("h2", {}, "Alert groups"));
  out.push(data.alerts.rows.length ? table(data.alerts, { class: "groups" })
    : h("p", { class: "note" }, data.alerts_note, " ", h("a", { href: link(machine.folder, "alerts", null, { show: "closed" }) }, "Closed ones")));
  // The dashboard Overview's rows: failing first, then the largest latest changes (the grid below is by name).
  const byId = new Map(data.grid.map((row) => [row.id, row]));
  const largest = data.largest.map((id) => byId.get(id)).filter(Boolean);
  if (largest.length) {
    out.push(h("h2", {}, "Failing and largest latest changes"));
    out.push(h("table", { id: "largest" }, h("thead", {}, h("tr", {}, GRID_COLUMNS.map((c) => h("th", {}, c)))),
      h("tbody", {}, ...largest.map((row) => gridRow(machine, row)))));
  }
  out.push(h("h2", {}, "Every series"));
  const input = h("input", { type: "search", class: "search", placeholder: "Search benchmark or parameters, e.g. mma 64",
                             value: r.q.get("q") || "", "aria-label": "Search series" });
  const count = h("span", { class: "note" });
  const body = h("tbody");
  const grid = h("table", { id: "grid" }, h("thead", {}, h("tr", {}, GRID_COLUMNS.map((c) => h("th", {}, c)))), body);
  const draw = () => {
    // The dashboard's search rule (dashboard.summary.matches): every word, anywhere, any case.
    const words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
    const shown = data.grid.filter((row) => words.every((w) => row.search.includes(w)));
    count.textContent = ` ${shown.length.toLocaleString("en-US")} of ${data.grid_total}`;
    body.replaceChildren(...shown.slice(0, GRID_ROWS).map((row) => gridRow(machine, row)));
    if (shown.length > GRID_ROWS) body.append(h("tr", {}, h("td", { colspan: 5, class: "note" }, `${(shown.length - GRID_ROWS).toLocaleString("en-US")} more: narrow the search`)));
  };
  input.addEventListener("input", () => { setQuery("q", input.value); draw(); });
  draw();
  out.push(h("div", {}, input, count), grid);
  return out;
}

function gridRow(machine, row) {
  const hist = link(machine.folder, "history", row.id);
  return h("tr", {},
    h("td", {}, h("a", { href: hist }, row.name)),
    h("td", { class: row.failing ? "num worse" : "num" }, row.latest),
    h("td", {}, sparkline(row.spark)),
    h("td", { class: `num ${row.tone}`, title: "the newest value against the median of the five before it of the same benchmark version, direction-aware" }, row.change),
    h("td", {}, row.flag ? h("a", { href: hist }, row.flag) : ""));
}

// -- history of one series: values over commits, flagged steps and their fixes ------------------------
async function historyPage(data, machine, r) {
  const sid = r.arg || "";
  const hist = /^[0-9a-f]{12}$/.test(sid) ? await load(`${machine.folder}/s${sid}`).catch(() => null) : null;
  if (!hist) {
    return [h("p", { class: "error" }, `No series ${r.arg} on ${machine.label}.`),
      h("p", {}, h("a", { href: link(machine.folder) }, `${machine.label}: overview`))];
  }
  const c = data.commits;
  // As the dashboard reads a commit: a prefix of at least min_prefix characters that names one commit only.
  const at = (r.q.get("at") || "").toLowerCase();
  const least = MLAPERF.data.site.min_prefix;
  const hits = at.length >= least ? c.sha.flatMap((sha, i) => (sha.startsWith(at) ? [i] : [])) : [];
  const atPos = hits.length === 1 ? hits[0] : -1;
  const out = [h("h1", {}, hist.title), h("p", { class: "note mono" }, hist.subtitle)];
  if (at && atPos < 0) {
    const why = at.length < least ? `is shorter than ${least} characters` : hits.length ? `starts ${hits.length} commits of this machine` : "starts no commit of this machine";
    out.push(h("p", { class: "error" }, `The marked commit '${r.q.get("at")}' ${why}: nothing marked.`));
  }
  const overlays = await overlay(hist, sid, r);
  if (hist.elsewhere.length) out.push(overlayPicker(hist, machine, sid, r));
  for (const o of overlays.filter((o) => o.error)) out.push(h("p", { class: "error" }, o.error));
  const drawn = overlays.filter((o) => o.line);
  const axis = commitAxis(c, drawn);
  const X = axis.at;  // this machine's commit position -> its place on the chart
  const points = hist.pos.map((p, i) => [X(p), hist.value[i], `${hist.text[i]}\n${c.tip[p]}`]);
  for (const o of drawn) o.line.points = o.line.points.map(([ord, v, tip]) => [axis.of(ord), v, tip]);
  const lines = [{ points }, ...drawn.map((o) => o.line)];
  out.push(chart({
    lines, x: drawn.length ? overlaidX(hist.x, X, lines) : hist.x,
    y: drawn.length ? covering([hist.y, ...drawn.map((o) => o.y)], lines) : hist.y,
    extras: (svg, sxAt, sy, box) => {
      const sx = (p) => sxAt(X(p));
      for (const p of hist.versions) svg.append(s("line", { class: "vline", x1: sx(p), x2: sx(p), y1: box.top, y2: box.bottom }));
      if (atPos >= 0) svg.append(hover(s("line", { class: "event", x1: sx(atPos), x2: sx(atPos), y1: box.top, y2: box.bottom }), c.tip[atPos]));
      const cross = (x, y) => `M${x - 4},${y - 4}L${x + 4},${y + 4}M${x - 4},${y + 4}L${x + 4},${y - 4}`;
      for (const p of hist.failed) svg.append(s("path", { class: "marker-fail", d: cross(sx(p), box.bottom - 6) }));
      // An overlaid machine's failed runs in its line's colour, a row higher (one that only failed drew nothing).
      drawn.forEach((o, i) => {
        for (const ord of o.failed) {
          const mark = s("path", { class: "marker-fail", d: cross(sxAt(axis.of(ord)), box.bottom - 16) });
          mark.style.stroke = PALETTE[(i + 1) % PALETTE.length];
          svg.append(hover(mark, `failed · ${o.label}`));
        }
      });
      for (const g of hist.markers) {
        if (g.y !== null) svg.append(hover(s("path", { class: "marker-reg", d: `M${sx(g.pos)},${sy(g.y) - 9}l6,10h-12z` }), g.text));
        if (g.fixed_pos !== null && g.fixed_y !== null) {
          svg.append(hover(s("path", { class: "marker-fix", d: `M${sx(g.fixed_pos)},${sy(g.fixed_y) - 8}l2,6h6l-5,4 2,6-5-4-5,4 2-6-5-4h6z` }), g.fixed_text));
        }
      }
    },
  }));
  if (drawn.length) out.push(legend([machine.label, ...drawn.map((o) => o.label)]));
  out.push(h("p", { class: "note" }, hist.caption + (atPos >= 0 ? ` Dashed: commit ${c.short[atPos]}.` : "")));
  if (hist.table) out.push(h("h2", {}, "Flagged regressions of this series"), table(hist.table));
  return out;
}

// The same series on other machines (?vs=a,b), as the dashboard's hist_vs: each one at its own commits (asv's graphs
// draw every machine so), read from that machine's own files; its points carry each commit's place in history
// (``commits.order``, the same on every machine) until commitAxis puts them on the chart.
function overlaid(r) {
  return (r.q.get("vs") || "").split(",").filter((v) => v);
}

async function overlay(hist, sid, r) {
  return Promise.all(overlaid(r).map((vs) => overlayOne(hist, sid, vs)));
}

async function overlayOne(hist, sid, vs) {
  const other = MLAPERF.data.site.machines.find((m) => m.folder === vs);
  if (!other || !hist.elsewhere.includes(vs)) return { error: `No machine '${vs}' with this series: not drawn.` };
  const [index, theirs] = await Promise.all([load(`${vs}/index`), load(`${vs}/s${sid}`)]);
  const ic = index.commits;
  const order = places(ic);
  const points = theirs.pos.map((p, i) => [order[p], theirs.value[i], `${theirs.text[i]} · ${other.label}\n${ic.tip[p]}`]);
  return { line: { points }, label: other.label, y: theirs.y, failed: theirs.failed.map((p) => order[p]) };
}

// The chart's commits: this machine's and every overlaid machine's, in history order, one slot each. ``at``: a
// position of this machine's -> its slot; ``of``: a commit's place in history -> its slot.
function commitAxis(c, drawn) {
  const mine = places(c);
  const all = new Set(mine);
  for (const o of drawn) for (const [ord] of o.line.points) all.add(ord);
  const slot = new Map([...all].sort((a, b) => a - b).map((ord, i) => [ord, i]));
  return { at: (p) => slot.get(mine[p]), of: (ord) => slot.get(ord) };
}

// Each commit's place in history; a machine's own order where its index predates ``order`` (a page cached from an
// older publish: its History pages drew nothing, a review).
function places(commits) {
  return commits.order || commits.sha.map((_, i) => i);
}

// This machine's commit ticks moved to their slots, over every slot a line draws.
function overlaidX(x, at, lines) {
  const slots = lines.flatMap((l) => l.points.map((p) => p[0]));
  const lo = Math.min(...slots), hi = Math.max(...slots);
  return { ...x, domain: lo < hi ? [lo, hi] : [lo - 1, hi + 1], ticks: x.ticks.map(at) };
}

// A chip per machine that measured the series: each one toggles its line (several at once, as asv's graphs).
function overlayPicker(hist, machine, sid, r) {
  const machines = MLAPERF.data.site.machines.filter((m) => hist.elsewhere.includes(m.folder));
  const picked = overlaid(r);
  return h("div", { class: "chips", id: "vs", "aria-label": "Overlay other machines" },
    h("span", { class: "note" }, "overlay the same series on"), machines.map((m) => {
      const on = picked.includes(m.folder);
      const next = on ? picked.filter((v) => v !== m.folder) : [...picked, m.folder];
      return h("button", { class: "chip", "aria-pressed": String(on), onclick: () => {
        location.hash = link(machine.folder, "history", sid, { ...Object.fromEntries(r.q), vs: next.join(",") });
      } }, m.label);
    }));
}

// Of the axes publish made (this machine's, the other's), the first that holds every value drawn; else one made
// here over both machines' values (a machine's values left off the chart, or cut at its edge, read as the same as
// this machine's): linear, labelled in the first axis's unit; on a log axis the wider of the two.
function covering(axes, lines) {
  const ys = lines.flatMap((l) => l.points.map((p) => p[1])).filter((v) => v !== null);
  const lo = Math.min(...ys), hi = Math.max(...ys);
  const widest = (some) => some.reduce((a, b) => (b.domain[1] - b.domain[0] > a.domain[1] - a.domain[0] ? b : a));
  const drawn = axes.filter((a) => a.ticks.length);  // an axis without ticks: every value of its machine failed
  if (!drawn.length) return axes[0];
  return drawn.find((a) => a.domain[0] <= lo && a.domain[1] >= hi)
    || (drawn[0].log ? logUnion(drawn, widest(drawn)) : spanning(drawn[0], lo, hi));
}

// Log axes in one unit (the same title): one over both domains with both axes' ticks; else ``otherwise``.
function logUnion(axes, otherwise) {
  if (!axes.every((a) => a.log && a.title === axes[0].title)) return otherwise;
  const label = new Map(axes.flatMap((a) => a.ticks.map((t, i) => [t, a.labels[i]])));
  const ticks = [...label.keys()].sort((x, y) => x - y);
  return { ...axes[0], domain: [Math.min(...axes.map((a) => a.domain[0])), Math.max(...axes.map((a) => a.domain[1]))],
           ticks, labels: ticks.map((t) => label.get(t)) };
}

// A linear axis over lo..hi with at most 8 round ticks (1, 2, 2.5 or 5 times a power of ten), its labels in the
// unit of ``like``'s (its title kept: the scale of its labels to its tick values, 31 for 0.031 in "time (ms)", a
// k/M/G suffix read as such) with the decimals the step needs, as publish_axes labels its own axes.
function spanning(like, lo, hi) {
  const SUFFIX = { k: 1e3, M: 1e6, G: 1e9 };
  const at = like.ticks.findIndex((t) => t !== 0);
  const m = at < 0 ? null : /^(-?[\d,]*\.?\d+)([kMG]?)$/.exec(like.labels[at]);
  const scale = m ? (Number(m[1].replace(/,/g, "")) * (SUFFIX[m[2]] || 1)) / like.ticks[at] : NaN;
  if (!Number.isFinite(scale) || !(hi >= lo)) return like;
  const span = hi - lo || Math.abs(hi) || 1;
  for (let mag = 10 ** Math.floor(Math.log10(span / 8)); ; mag *= 10) {
    for (const f of [1, 2, 2.5, 5]) {
      const step = f * mag, d0 = Math.floor(lo / step) * step, d1 = Math.ceil(hi / step) * step;
      const n = Math.round((d1 - d0) / step) + 1;
      if (n > 8) continue;
      const ticks = Array.from({ length: n }, (_, i) => Number((d0 + i * step).toPrecision(12)));
      const digits = Math.max(0, -Math.round(Math.log10(mag * scale)) + (f === 2.5 ? 1 : 0));
      const fmt = new Intl.NumberFormat("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
      return { ...like, domain: [d0, d1], ticks, labels: ticks.map((t) => fmt.format(t * scale)) };
    }
  }
}

// -- throughput vs concurrency, at the newest commit with the fullest grid---------------------------------------------------
function chips(label, options, current, href) {
  return h("div", { class: "chips" }, h("span", { class: "note" }, label), options.map(([value, text]) =>
    h("button", { class: "chip", "aria-pressed": String(value === current), onclick: () => { location.hash = href(value); } }, text)));
}

function throughput(data, machine, r) {
  const out = [h("h1", {}, "Throughput vs concurrency"), h("p", { class: "note" }, "At ", cell(data.throughput_at), ": ", data.throughput_note)];
  if (!data.throughput.length) return [...out, h("p", { class: "note" }, "No sparse-MLA suite (bench_decode, bench_indexer, bench_step) on this machine.")];
  const suite = data.throughput.find((t) => t.key === r.q.get("suite")) || data.throughput[0];
  const pick = suite.filters.find((f) => f.value === r.q.get("filter")) || suite.filters.find((f) => f.value === suite.default);
  const go = (params) => link(machine.folder, "throughput", null, { suite: suite.key, filter: pick.value, ...params });
  out.push(chips("suite", data.throughput.map((t) => [t.key, t.key]), suite.key, (v) => go({ suite: v, filter: "" })));
  if (pick.value) out.push(chips(suite.filter_param, suite.filters.map((f) => [f.value, f.value]), pick.value, (v) => go({ filter: v })));
  out.push(h("h2", {}, pick.title));
  out.push(chart({ lines: pick.lines, x: { ...pick.x, log2: true }, y: pick.y, height: 360 }), legend(pick.lines.map((l) => l.name)));
  out.push(h("p", { class: "note" }, pick.caption));
  if (pick.speedup) out.push(h("h2", {}, pick.speedup.title), table(pick.speedup.table));
  return out;
}

// -- alert groups: this machine's, or (?all=1) every machine's, read from each machine's own data file ---------------
async function alerts(data, machine, r) {
  const all = MLAPERF.data.site.link_on.includes((r.q.get("all") || "").toLowerCase());  // as the dashboard reads
  const group = all ? null : r.q.get("group");
  const fallback = ["open", "suspect", "fixed"];
  const asked = (r.q.get("show") || fallback.join(",")).split(",").filter((x) => x);
  const known = data.categories.map(([cat]) => cat);
  const unknown = asked.filter((x) => !known.includes(x));
  const good = asked.filter((x) => known.includes(x));
  const show = good.length ? good : fallback;  // none good: the default, as the dashboard
  const go = (params) => link(machine.folder, "alerts", null, { show: show.join(","), all: all ? "1" : "", ...params });
  const scope = h("div", { class: "chips" }, h("span", { class: "note" }, "machines"), [["", machine.label], ["1", "all machines"]].map(([v, text]) =>
    h("button", { class: "chip", "aria-pressed": String((v === "1") === all), onclick: () => { location.hash = go({ all: v, group: "" }); } }, text)));
  // Every machine's counts differ: the all-machines chips name the states only.
  const toggles = h("div", { class: "chips" }, h("span", { class: "note" }, "show groups"), data.categories.map(([cat, text]) => {
    const on = show.includes(cat);
    const next = on ? show.filter((x) => x !== cat) : [...show, cat];
    return h("button", { class: "chip", "aria-pressed": String(on), onclick: () => { location.hash = go({ show: next.join(",") }); } }, all ? cat : text);
  }));
  const site = MLAPERF.data.site;
  const machines = all ? site.machines : [machine];
  const indexes = all ? await Promise.all(machines.map((m) => load(`${m.folder}/index`))) : [data];
  const listed = machines.flatMap((m, i) => indexes[i].groups.map((g) => ({ g, m })));
  const groups = group ? listed.filter(({ g }) => g.group === group) : listed.filter(({ g }) => show.includes(g.category));
  const out = [h("h1", {}, all ? "Alert groups of every machine" : "Alert groups"), scope, toggles,
    h("p", { class: "note" }, "open: new or acknowledged · suspect: seen in the newest run only · fixed: came back later · closed: ignored, transient or retired. A group holds the regressions found together at one commit range.")];
  if (group && !groups.length) out.push(h("p", { class: "error" }, `No alert group ${group} on this machine.`));
  if (unknown.length) out.push(h("p", { class: "error" }, `No state ${unknown.map((x) => `'${x}'`).join(", ")} (known: ${known.join(", ")}): showing ${good.length ? "the others" : "the default"}.`));
  for (const { g, m } of groups) {
    out.push(h("div", { class: "group", id: `group-${m.folder}-${g.group}`, "data-machine": m.folder },
      h("h3", {}, all ? `${m.label} · ${g.title}` : g.title),
      h("div", {}, "parent (good) ", cell(g.parent), " · first bad ", cell(g.head)),
      h("div", { class: "msg" }, g.message), table(g.table)));
  }
  if (!groups.length && !group) out.push(h("p", { class: "note" }, all ? "No alert group with the states picked on any machine." : "No alert group with the states picked."));
  return out;
}

window.addEventListener("hashchange", () => { render().catch(showError); });
window.addEventListener("DOMContentLoaded", () => { render().catch(showError); });
function showError(err) {
  document.getElementById("main").replaceChildren(h("p", { class: "error" }, String(err && err.message || err)));
}
