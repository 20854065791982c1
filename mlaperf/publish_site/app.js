// mlaperf static site: pages drawn in the browser from data/*.js (written by `mlaperf publish`).
// No server, no network: data files are <script>s (a browser loads those from file://, where it refuses
// fetch), charts are SVG drawn here. Routes live in the location hash, so every view is a link:
//   #/<machine folder>                      overview: alert groups, summary grid with search (?q=)
//   #/<machine folder>/history/<series id>  one series over commits (?at=<sha> marks a commit)
//   #/<machine folder>/throughput           tokens/s vs concurrency at the newest commit (?suite=, ?filter=)
//   #/<machine folder>/alerts               alert groups of every status (?show=open,suspect,fixed,closed)
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

// -- formatting: the units people read (the dashboard's rules) -----------------------------------------
const TIME_SCALES = [[1e-9, "ns"], [1e-6, "µs"], [1e-3, "ms"], [1, "s"]];
const SI = [[1e9, "G"], [1e6, "M"], [1e3, "k"]];
const isTime = (unit) => unit === "seconds" || unit === "s";

function sig(v, digits = 3) {
  if (!isFinite(v)) return "–";
  if (v === 0) return "0";
  const d = Math.max(0, digits - 1 - Math.floor(Math.log10(Math.abs(v))));
  return v.toLocaleString("en-US", { maximumFractionDigits: Math.min(d, 12), minimumFractionDigits: 0 });
}

function timeScale(v) {
  const a = Math.abs(v);
  let best = TIME_SCALES[0];
  for (const s of TIME_SCALES) if (a >= s[0]) best = s;
  return best;
}

function fmtValue(v, unit) {
  if (v === null || v === undefined || !isFinite(v)) return "–";
  if (isTime(unit)) {
    const [f, name] = timeScale(v);
    return `${sig(v / f)} ${name}`;
  }
  const text = Math.abs(v) >= 1000 ? Math.round(v).toLocaleString("en-US") : sig(v);
  return unit && unit !== "unit" ? `${text} ${unit}` : text;
}

function fmtRatio(r) {
  if (r === null || r === undefined || !isFinite(r)) return "–";
  return `${r.toFixed(r >= 10 ? 1 : 2)}x`;
}

function fmtChange(worse) {
  if (worse === null || worse === undefined) return "";
  const pct = (worse - 1) * 100;
  return `${pct >= 0 ? "+" : "−"}${Math.abs(pct).toFixed(Math.abs(pct) < 10 ? 1 : 0)}%`;
}

// Axis ticks: 1-2-5 steps, labels with as many decimals as the step needs (never "2e+2", never "0M").
function niceStep(span, count) {
  const raw = span / Math.max(1, count);
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const m = raw / mag;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * mag;
}

function linearTicks(lo, hi, count = 6) {
  if (!(hi > lo)) { const pad = Math.abs(lo) * 0.1 || 1; lo -= pad; hi += pad; }
  const step = niceStep(hi - lo, count);
  const ticks = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push(Math.abs(t) < step * 1e-9 ? 0 : t);
  return { ticks, step, lo: Math.min(lo, ticks[0]), hi: Math.max(hi, ticks[ticks.length - 1]) };
}

function logTicks(lo, hi) {
  const out = [];
  for (let e = Math.floor(Math.log10(lo)) - 1; e <= Math.ceil(Math.log10(hi)) + 1; e++)
    for (const m of [1, 2, 5]) out.push(m * Math.pow(10, e));
  const inside = out.filter((t) => t >= lo / 1.25 && t <= hi * 1.25);
  return inside.length >= 2 ? inside : out.filter((t) => t >= lo / 10 && t <= hi * 10);
}

function axisFormatter(unit, ticks, step) {
  const top = Math.max(...ticks.map(Math.abs));
  const decimals = (s) => Math.max(0, Math.min(12, -Math.floor(Math.log10(s) + 1e-9)));
  const plain = (v, d) => v.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
  if (isTime(unit)) {
    const [f, name] = timeScale(top);
    const d = step ? decimals(step / f) : null;
    return (v) => (v === 0 ? "0" : `${d === null ? sig(v / f) : plain(v / f, d)} ${name}`);
  }
  const si = SI.find(([f]) => top >= f * 10);
  if (si) {
    const [f, name] = si;
    const d = step ? decimals(step / f) : null;
    return (v) => (v === 0 ? "0" : `${d === null ? sig(v / f) : plain(v / f, d)}${name}`);
  }
  const d = step ? decimals(step) : null;
  return (v) => (v === 0 ? "0" : d === null ? sig(v) : plain(v, d));
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

const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#999999", "#F0E442"];

function sparkline(values, direction) {
  const pts = values.map((v, i) => [i, v]).filter(([, v]) => v !== null && v > 0);
  const svg = s("svg", { class: "spark", width: 120, height: 24, viewBox: "0 0 120 24", "aria-hidden": "true" });
  if (pts.length < 2) return svg;
  const ys = pts.map(([, v]) => v);
  const lo = Math.min(...ys), hi = Math.max(...ys), n = values.length - 1 || 1;
  const y = (v) => (hi > lo ? 21 - ((v - lo) / (hi - lo)) * 18 : 12);
  svg.append(s("polyline", { points: pts.map(([i, v]) => `${(i / n) * 116 + 2},${y(v).toFixed(1)}`).join(" ") }));
  const [li, lv] = pts[pts.length - 1];
  svg.append(s("circle", { cx: (li / n) * 116 + 2, cy: y(lv).toFixed(1), r: 2 }));
  svg.dataset.direction = direction;
  return svg;
}

// One chart: series of [x, y, tooltip] points on a linear or log y axis; x is a commit position ("index")
// or a log2 concurrency. extras(layer, sx, sy) draws markers over the lines.
function chart({ series, unit, yTitle, xTitle, xLog2 = false, yLog = false, yZero = false, xTicks, xLabel,
                 extras, width = 1100, height = 380 }) {
  const m = { l: 78, r: 40, t: 12, b: 46 };
  const all = series.flatMap((d) => d.points.filter((p) => p[1] !== null && isFinite(p[1])));
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img" });
  if (!all.length) return svg;
  const xs = all.map((p) => p[0]), ys = all.map((p) => p[1]);
  let xlo = Math.min(...xs), xhi = Math.max(...xs);
  if (xhi === xlo) { xlo -= 1; xhi += 1; }
  const fx = xLog2 ? Math.log2 : (v) => v;
  const sx = (v) => m.l + ((fx(v) - fx(xlo)) / (fx(xhi) - fx(xlo))) * (width - m.l - m.r);
  let ticks, sy, fmt;
  if (yLog && Math.min(...ys) > 0) {
    ticks = logTicks(Math.min(...ys), Math.max(...ys));
    const lo = Math.min(ticks[0], Math.min(...ys)), hi = Math.max(ticks[ticks.length - 1], Math.max(...ys));
    sy = (v) => height - m.b - ((Math.log(v) - Math.log(lo)) / (Math.log(hi) - Math.log(lo))) * (height - m.t - m.b);
    fmt = axisFormatter(unit, ticks, null);
  } else {
    const lin = linearTicks(yZero ? Math.min(0, ...ys) : Math.min(...ys), Math.max(...ys));
    ticks = lin.ticks;
    sy = (v) => height - m.b - ((v - lin.lo) / (lin.hi - lin.lo)) * (height - m.t - m.b);
    fmt = axisFormatter(unit, ticks, lin.step);
  }
  const yAxis = s("g", { class: "axis y" });
  for (const t of ticks) {
    const g = s("g", { class: "tick" });
    g.append(s("line", { class: "grid", x1: m.l, x2: width - m.r, y1: sy(t), y2: sy(t) }));
    g.append(s("text", { x: m.l - 6, y: sy(t) + 4, "text-anchor": "end" }, fmt(t)));
    yAxis.append(g);
  }
  yAxis.append(s("text", { transform: `translate(14 ${(height - m.b + m.t) / 2}) rotate(-90)`, "text-anchor": "middle" },
                 yTitle));
  const xAxis = s("g", { class: "axis x" });
  for (const t of xTicks || linearTicks(xlo, xhi, 10).ticks.filter((t) => t >= xlo && t <= xhi && Number.isInteger(t))) {
    const g = s("g", { class: "tick" });
    g.append(s("line", { x1: sx(t), x2: sx(t), y1: height - m.b, y2: height - m.b + 4 }));
    g.append(s("text", { x: sx(t), y: height - m.b + 16, "text-anchor": "middle" }, xLabel ? xLabel(t) : String(t)));
    xAxis.append(g);
  }
  xAxis.append(s("text", { x: (width + m.l) / 2, y: height - 6, "text-anchor": "middle" }, xTitle));
  xAxis.append(s("line", { x1: m.l, x2: width - m.r, y1: height - m.b, y2: height - m.b }));
  svg.append(yAxis, xAxis);
  const lines = s("g", { class: "lines" });
  series.forEach((d, i) => {
    const color = d.color || PALETTE[i % PALETTE.length];
    let path = "", pen = false;
    for (const [x, y] of d.points) {
      if (y === null || !isFinite(y) || (yLog && y <= 0)) { pen = false; continue; }
      path += `${pen ? "L" : "M"}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`;
      pen = true;
    }
    lines.append(s("path", { d: path, fill: "none", stroke: color, "stroke-width": 1.6, "stroke-dasharray": d.dash }));
    const dots = s("g", { class: "points" });
    const r = d.points.length > 300 ? 1.6 : 2.6;
    for (const [x, y, tip] of d.points) {
      if (y === null || !isFinite(y) || (yLog && y <= 0)) continue;
      const c = s("circle", { cx: sx(x).toFixed(1), cy: sy(y).toFixed(1), r, fill: color });
      c.addEventListener("mousemove", (e) => showTip(e, tip));
      c.addEventListener("mouseleave", hideTip);
      dots.append(c);
    }
    lines.append(dots);
  });
  svg.append(lines);
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

const site = () => MLAPERF.data.site;
const shortSha = (sha) => (sha || "").slice(0, 8);
const subject = (msg, n = 70) => { const l = (msg || "").split("\n")[0]; return l.length > n ? l.slice(0, n - 1) + "…" : l; };

function commitLink(sha, text) {
  const repo = site().repo_url;
  const label = text || shortSha(sha);
  return repo ? h("a", { href: `${repo}/commit/${sha}`, class: "mono", rel: "noopener" }, label) : h("span", { class: "mono" }, label);
}

function commitTip(c, pos) {
  return `commit ${c.sha[pos].slice(0, 12)} · ${c.date[pos]}${c.author[pos] ? " · " + c.author[pos] : ""}\n${c.message[pos]}`;
}

function seriesName(row) {
  const parts = row.benchmark.split(".");
  return `${parts.slice(-2).join(".")}${row.params ? ` [${row.params}]` : ""}`;
}

async function render() {
  const r = route();
  const machines = site().machines;
  const main = document.getElementById("main");
  if (!machines.length) { main.replaceChildren(h("p", { class: "note" }, "The store held no results when this site was published.")); return; }
  const machine = machines.find((m) => m.folder === r.folder);
  if (!machine) { location.replace(link(machines[0].folder)); return; }
  const select = document.getElementById("machine");
  select.replaceChildren(...machines.map((m) => h("option", { value: m.folder, selected: m === machine },
    `${m.name}${m.gpu && m.gpu !== "none" ? ` (${m.gpu})` : ""}`)));
  select.onchange = () => { location.hash = link(select.value, r.page === "history" ? "overview" : r.page); };
  document.getElementById("nav").replaceChildren(...[["overview", "Overview"], ["alerts", "Alert groups"],
    ["throughput", "Throughput vs concurrency"]].map(([p, t]) =>
    h("a", { href: link(machine.folder, p), class: r.page === p ? "active" : null }, t)));
  document.getElementById("footer").textContent =
    `Published ${site().generated} by mlaperf ${site().version} · static: no server, no network`;
  const data = await load(`${machine.folder}/index`);
  const pages = { overview, history: historyPage, throughput, alerts };
  const page = pages[r.page];
  main.replaceChildren(...(page ? await page(data, machine, r) : [h("p", { class: "error" }, `No page named '${r.page}'.`)]));
}

// -- overview: alert groups that need a look, then every series in a searchable grid ------------------
function overview(data, machine, r) {
  const open = data.groups.filter((g) => g.category === "open" || g.category === "suspect");
  const out = [h("h1", {}, `${machine.name}: performance overview`),
    h("div", { class: "metrics" },
      [[open.length, "open or suspect alert groups"], [data.groups.length, "alert groups in all"],
       [data.commits.sha.length.toLocaleString("en-US"), "commits"],
       [data.series.length.toLocaleString("en-US"), "series"]].map(([v, t]) => h("div", { class: "metric" }, h("b", {}, v), h("span", {}, t)))),
    h("p", { class: "note" }, data.info.versions || "")];
  out.push(h("h2", {}, "Alert groups that need a look"));
  out.push(open.length ? groupTable(data, machine, open.slice(0, 10))
    : h("p", { class: "note" }, "No open or suspect alert group. ", h("a", { href: link(machine.folder, "alerts", null, { show: "fixed,closed" }) }, "Fixed and closed ones")));
  out.push(h("h2", {}, "Every series"));
  const q = r.q.get("q") || "";
  const input = h("input", { type: "search", class: "search", placeholder: "Search benchmark or parameters, e.g. mma 64",
                             value: q, "aria-label": "Search series" });
  const count = h("span", { class: "note" });
  const body = h("tbody");
  const table = h("table", { id: "grid" }, h("thead", {}, h("tr", {}, ["series", "latest", "newest values", "latest change", "last flagged"].map((c) => h("th", {}, c)))), body);
  const rows = data.series.map((row) => [row, `${row.benchmark} ${row.params}`.toLowerCase()]);
  const draw = () => {
    const words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
    const shown = rows.filter(([, text]) => words.every((w) => text.includes(w)));
    count.textContent = ` ${shown.length.toLocaleString("en-US")} of ${rows.length.toLocaleString("en-US")} series`;
    body.replaceChildren(...shown.slice(0, 600).map(([row]) => gridRow(data, machine, row)));
    if (shown.length > 600) body.append(h("tr", {}, h("td", { colspan: 5, class: "note" }, `${shown.length - 600} more: narrow the search`)));
  };
  input.addEventListener("input", () => { setQuery("q", input.value); draw(); });
  draw();
  out.push(h("div", {}, input, count), table);
  return out;
}

function gridRow(data, machine, row) {
  const change = row.change;
  const cls = change === null ? "" : change > 1 + row.threshold ? "worse" : change < 1 / (1 + row.threshold) ? "better" : "";
  const flag = row.flag ? h("a", { href: link(machine.folder, "alerts", null, { group: row.flag.group }) },
    `${row.flag.status} ${fmtRatio(row.flag.ratio)} @ ${shortSha(data.commits.sha[row.flag.pos])}`) : "";
  return h("tr", {},
    h("td", {}, h("a", { href: link(machine.folder, "history", row.id) }, seriesName(row))),
    h("td", { class: "num" }, fmtValue(row.last, row.unit)),
    h("td", {}, sparkline(row.spark, row.direction)),
    h("td", { class: `num ${cls}`, title: "newest value against the median of the five before it (+: worse)" }, fmtChange(change)),
    h("td", {}, flag));
}

function groupTable(data, machine, groups) {
  const c = data.commits;
  return h("table", { class: "groups" },
    h("thead", {}, h("tr", {}, ["group", "state", "commits", "culprit", "series", "worst", "fixed at"].map((t) => h("th", {}, t)))),
    h("tbody", {}, groups.map((g) => h("tr", {},
      h("td", {}, h("a", { href: link(machine.folder, "alerts", null, { group: g.group }) }, String(g.group))),
      h("td", {}, `${g.status}${g.machine_wide ? ", machine-wide" : ""}`),
      h("td", { class: "mono" }, g.parent_pos !== null ? `${shortSha(c.sha[g.parent_pos])}..${shortSha(c.sha[g.pos])}` : shortSha(c.sha[g.pos])),
      h("td", { title: c.message[g.pos] }, subject(c.message[g.pos], 60)),
      h("td", { class: "num" }, g.series), h("td", { class: "num" }, fmtRatio(g.worst)), h("td", { class: "mono" }, g.fixed_at)))));
}

// -- history of one series: values over commits, flagged steps and their fixes ------------------------
async function historyPage(data, machine, r) {
  const row = data.series[Number(r.arg)];
  if (!row) return [h("p", { class: "error" }, `No series ${r.arg} on ${machine.name}.`)];
  const hist = await load(`${machine.folder}/s${row.id}`).catch(() => ({ pos: [], value: [], failed: [], version_changes: [] }));
  const c = data.commits;
  const points = hist.pos.map((p, i) => [p, hist.value[i], `${fmtValue(hist.value[i], row.unit)}\n${commitTip(c, p)}`]);
  const regs = data.regressions.filter((g) => g.series === row.id);
  const at = r.q.get("at");
  const atPos = at ? c.sha.findIndex((sha) => sha.startsWith(at.toLowerCase())) : -1;
  const out = [h("h1", {}, seriesName(row)), h("p", { class: "note mono" }, `${row.benchmark} · ${machine.name}`)];
  if (at && atPos < 0) out.push(h("p", { class: "error" }, `No commit of ${machine.name} starts with '${at}'.`));
  const values = hist.value.filter((v) => v !== null);
  const logY = values.length && Math.max(...values) / Math.min(...values) > 20;
  out.push(chart({
    series: [{ name: row.params, points }], unit: row.unit, yTitle: row.unit || "value", xTitle: "commit (history order)",
    yLog: logY, xLabel: (p) => shortSha(c.sha[p]),
    extras: (svg, sx, sy, box) => {
      for (const p of hist.version_changes) svg.append(s("line", { class: "vline", x1: sx(p), x2: sx(p), y1: box.top, y2: box.bottom }));
      if (atPos >= 0) svg.append(s("line", { class: "event", x1: sx(atPos), x2: sx(atPos), y1: box.top, y2: box.bottom }));
      for (const p of hist.failed) { const x = sx(p), y = box.bottom - 6; svg.append(s("path", { class: "marker-fail", d: `M${x - 4},${y - 4}L${x + 4},${y + 4}M${x - 4},${y + 4}L${x + 4},${y - 4}` })); }
      for (const g of regs) {
        if (g.pos === null) continue;
        const tri = s("path", { class: "marker-reg", d: `M${sx(g.pos)},${sy(g.after) - 9}l6,10h-12z` });
        const text = `regression #${g.id} (${g.status}) ${fmtValue(g.before, row.unit)} → ${fmtValue(g.after, row.unit)} (${fmtRatio(g.ratio)})\n${commitTip(c, g.pos)}`;
        tri.addEventListener("mousemove", (e) => showTip(e, text)); tri.addEventListener("mouseleave", hideTip);
        svg.append(tri);
        if (g.fixed_pos !== null) {
          const star = s("path", { class: "marker-fix", d: `M${sx(g.fixed_pos)},${sy(g.before) - 8}l2,6h6l-5,4 2,6-5-4-5,4 2-6-5-4h6z` });
          const ftext = `#${g.id} fixed\n${commitTip(c, g.fixed_pos)}`;
          star.addEventListener("mousemove", (e) => showTip(e, ftext)); star.addEventListener("mouseleave", hideTip);
          svg.append(star);
        }
      }
    },
  }));
  out.push(h("p", { class: "note" }, `${points.length.toLocaleString("en-US")} ${points.length === 1 ? "commit" : "commits"} measured; ${row.direction === "up_is_worse" ? "lower" : "higher"} is better. ` +
    "Triangles: flagged regressions (first bad commit); stars: the commit that fixed them; dotted lines: the benchmark's asv version changed; ✕: failed runs. Hover a point for its commit." +
    (atPos >= 0 ? ` Dashed: commit ${shortSha(c.sha[atPos])}.` : "")));
  if (regs.length) {
    out.push(h("h2", {}, "Flagged regressions of this series"), h("table", {},
      h("thead", {}, h("tr", {}, ["#", "status", "commits", "before → after", "ratio", "fixed at", "note"].map((t) => h("th", {}, t)))),
      h("tbody", {}, regs.map((g) => h("tr", {}, h("td", {}, String(g.id)), h("td", {}, g.status),
        h("td", {}, g.parent_pos !== null ? commitLink(c.sha[g.parent_pos]) : "", "..", commitLink(c.sha[g.pos])),
        h("td", { class: "num" }, `${fmtValue(g.before, row.unit)} → ${fmtValue(g.after, row.unit)}`),
        h("td", { class: "num" }, fmtRatio(g.ratio)),
        h("td", {}, g.fixed_pos !== null ? commitLink(c.sha[g.fixed_pos]) : ""), h("td", {}, g.note))))));
  }
  return out;
}

// -- throughput vs concurrency at the newest commit ------------------------------------------------------
function throughput(data, machine, r) {
  const c = data.commits;
  const newest = c.sha.length - 1;
  const out = [h("h1", {}, "Throughput vs concurrency"),
    h("p", { class: "note" }, "At the newest commit ", commitLink(c.sha[newest]), ` · ${subject(c.message[newest])}`)];
  if (!data.throughput.length) return [...out, h("p", { class: "note" }, "No sparse-MLA suite (bench_decode, bench_indexer, bench_step) on this machine.")];
  const suite = data.throughput.find((t) => t.key === r.q.get("suite")) || data.throughput[0];
  const filters = [...new Set(suite.rows.map((x) => x.filter))].sort((a, b) => Number(a) - Number(b));
  const pick = filters.includes(r.q.get("filter")) ? r.q.get("filter") : (filters.includes("512") ? "512" : filters[filters.length - 1]);
  const chips = (label, values, current, key) => h("div", { class: "chips" }, h("span", { class: "note" }, label),
    values.map((v) => h("button", { class: "chip", "aria-pressed": String(v === current),
      onclick: () => { location.hash = link(machine.folder, "throughput", null, { suite: suite.key, filter: pick, [key]: v }); } }, String(v))));
  out.push(chips("suite", data.throughput.map((t) => t.key), suite.key, "suite"));
  if (filters.length > 1 || filters[0] !== null) out.push(chips(suite.filter_param, filters, pick, "filter"));
  const rows = suite.rows.filter((x) => x.filter === pick);
  const lines = [...new Set(rows.map((x) => x.line))];
  const conc = [...new Set(rows.map((x) => x.concurrency))].sort((a, b) => a - b);
  out.push(h("h2", {}, `${suite.title} · ${machine.name}${pick !== null ? ` · ${suite.filter_param}=${pick}` : ""}`));
  out.push(chart({
    series: lines.map((l) => ({ name: l, points: rows.filter((x) => x.line === l).map((x) => [x.concurrency, x.value, `${l} · concurrency ${x.concurrency}\n${fmtValue(x.value, "tokens/s")}`]) })),
    unit: "tokens/s", yTitle: "throughput (tokens/s)", xTitle: "concurrency (requests, log2)", xLog2: true, yZero: true,
    xTicks: conc, xLabel: (v) => String(v), height: 360,
  }), legend(lines));
  const ref = rows.filter((x) => x.line === suite.reference);
  if (ref.length) {
    out.push(h("h2", {}, `Speed-up over ${suite.reference}`), h("table", {},
      h("thead", {}, h("tr", {}, h("th", {}, suite.line_param), conc.map((x) => h("th", { class: "num" }, `c=${x}`)))),
      h("tbody", {}, lines.filter((l) => l !== suite.reference).map((l) => h("tr", {}, h("td", {}, l), conc.map((x) => {
        const a = rows.find((y) => y.line === l && y.concurrency === x), b = ref.find((y) => y.concurrency === x);
        return h("td", { class: "num" }, a && b ? fmtRatio(a.value / b.value) : "–");
      }))))));
  }
  return out;
}

// -- alert groups of every status -----------------------------------------------------------------------
const CATEGORIES = ["open", "suspect", "fixed", "closed"];
function alerts(data, machine, r) {
  const group = r.q.get("group");
  const show = (r.q.get("show") || "open,suspect,fixed").split(",").filter((x) => CATEGORIES.includes(x));
  const chips = h("div", { class: "chips" }, h("span", { class: "note" }, "show"), CATEGORIES.map((cat) => {
    const n = data.groups.filter((g) => g.category === cat).length;
    const on = show.includes(cat);
    return h("button", { class: "chip", "aria-pressed": String(on), onclick: () => {
      const next = on ? show.filter((x) => x !== cat) : [...show, cat];
      location.hash = link(machine.folder, "alerts", null, { show: next.join(",") });
    } }, `${cat} ${n}`);
  }));
  const groups = group ? data.groups.filter((g) => String(g.group) === group) : data.groups.filter((g) => show.includes(g.category));
  const out = [h("h1", {}, "Alert groups"), chips,
    h("p", { class: "note" }, "open: new or acknowledged · suspect: seen in the newest run only · fixed: came back later · closed: ignored, transient or retired. A group holds the regressions found together at one commit range.")];
  if (group && !groups.length) out.push(h("p", { class: "error" }, `No alert group ${group} on ${machine.name}.`));
  const byId = Object.fromEntries(data.regressions.map((x) => [x.id, x]));
  const c = data.commits;
  for (const g of groups) {
    const members = g.members.map((id) => byId[id]).filter(Boolean);
    out.push(h("div", { class: "group", id: `group-${g.group}` },
      h("h3", {}, `Group ${g.group}: ${g.status}${g.machine_wide ? ", machine-wide" : ""} · ${g.series} series · worst ${fmtRatio(g.worst)}`),
      h("div", {}, "culprit in ", g.parent_pos !== null ? commitLink(c.sha[g.parent_pos]) : "(first measured)", "..", commitLink(c.sha[g.pos]),
        g.fixed_at ? ` · fixed at ${g.fixed_at}` : ""),
      h("div", { class: "msg" }, c.message[g.pos]),
      h("table", {}, h("thead", {}, h("tr", {}, ["series", "status", "before → after", "ratio", "fixed at", "note"].map((t) => h("th", {}, t)))),
        h("tbody", {}, members.map((x) => {
          const row = data.series[x.series];
          return h("tr", {}, h("td", {}, h("a", { href: link(machine.folder, "history", x.series) }, seriesName(row))),
            h("td", {}, x.status), h("td", { class: "num" }, `${fmtValue(x.before, row.unit)} → ${fmtValue(x.after, row.unit)}`),
            h("td", { class: "num" }, fmtRatio(x.ratio)), h("td", {}, x.fixed_pos !== null ? commitLink(c.sha[x.fixed_pos]) : ""), h("td", {}, x.note));
        })))));
  }
  if (!groups.length && !group) out.push(h("p", { class: "note" }, "No alert group with the states picked."));
  return out;
}

window.addEventListener("hashchange", () => { render().catch(showError); });
window.addEventListener("DOMContentLoaded", () => { render().catch(showError); });
function showError(err) {
  document.getElementById("main").replaceChildren(h("p", { class: "error" }, String(err && err.message || err)));
}
