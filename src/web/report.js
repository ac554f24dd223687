"use strict";
// Draws a replay report from DATA (report/report.h: BuildReportData).
(function () {
  const PALETTE = ["#4269d0", "#ef8a3a", "#3ca9a8", "#9c6ade", "#6f8f2f", "#c24e8c", "#8a6f4e", "#5b8fd9",
                   "#d1352b", "#2e9d4f", "#b8860b", "#555"];
  const PATH_COLOURS = { d2d: "#2e9d4f", partial: "#e69b00", h2d: "#d1352b" };
  const runs = DATA.runs;
  const label = (r) => r.label;
  const colour = (i) => PALETTE[i % PALETTE.length];
  const el = (tag, attrs, text) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  };

  document.title = DATA.title;
  document.getElementById("title").textContent = DATA.title;
  const traces = [...new Set(runs.map((r) => r.trace).filter(Boolean))];
  document.getElementById("sources").textContent =
    "summaries: " + DATA.sources.join(", ") + (DATA.records ? " · records: " + DATA.records : "") +
    (traces.length ? " · traces: " + traces.join(", ") : "");

  // The runs, one row each; lower is better in every numeric column but
  // "completed", coloured among the runs of the same trace, cluster and
  // load (a policy matrix combines several).
  const COLUMNS = [
    ["completed", (r) => r.calls_completed, false, 0],
    ["rejected", (r) => r.rejected || 0, true, 0],
    ["SCT p50 (s)", (r) => r.sct_p50_s, true, 1],
    ["SCT p95 (s)", (r) => r.sct_p95_s, true, 1],
    ["TTFT p50 (s)", (r) => r.ttft_p50_s, true, 2],
    ["TTFT p95 (s)", (r) => r.ttft_p95_s, true, 2],
    ["returning TTFT p95 (s)", (r) => r.returning_ttft_p95_s, true, 2],
    ["switch p50 (ms)", (r) => r.switch_p50_ms, true, 0],
    ["unused leases (%)", (r) => (r.unused_lease_proxy || 0) * 100, true, 1],
    ["avoidable opens", (r) => r.avoidable_opens || 0, true, 0],
  ];
  const table = document.getElementById("matrix");
  const head = el("tr");
  const multiTrace = new Set(runs.map((r) => r.trace)).size > 1;
  for (const h of (multiTrace ? ["trace"] : []).concat(["run", "router", "load", "tau (s)"])) {
    head.append(el("th", { class: "text" }, h));
  }
  for (const [h] of COLUMNS) head.append(el("th", {}, h));
  const thead = el("thead");
  thead.append(head);
  table.append(thead);
  const body = table.appendChild(el("tbody"));
  const peerKey = (r) => [r.trace, r.cluster, r.target, r.load].join("|");
  const peerGroups = {};
  runs.forEach((r, i) => (peerGroups[peerKey(r)] = peerGroups[peerKey(r)] || []).push(i));
  const shade = (value, values, lowerBetter) => {
    const lo = Math.min(...values), hi = Math.max(...values);
    if (!(hi > lo)) return "";
    let t = (value - lo) / (hi - lo);
    if (!lowerBetter) t = 1 - t;
    return "hsl(" + Math.round(120 * (1 - t)) + ", 65%, 85%)";
  };
  runs.forEach((r) => {
    const tr = el("tr", { "data-run": label(r) });
    if (multiTrace) tr.append(el("td", { class: "text" }, (r.trace || "").split("/").pop()));
    tr.append(el("td", { class: "text" }, label(r)), el("td", { class: "text" }, r.router || ""),
              el("td", { class: "text" }, r.load || ""), el("td", { class: "text" }, r.tau_s === undefined ? "" : String(r.tau_s)));
    const peers = peerGroups[peerKey(r)].map((i) => runs[i]);
    for (const [, get, lowerBetter, digits] of COLUMNS) {
      const v = get(r);
      const td = el("td", {}, v === undefined || v === null ? "" : Number(v).toFixed(digits));
      if (v !== undefined && peers.length > 1) td.style.background = shade(v, peers.map(get), lowerBetter);
      tr.append(td);
    }
    body.append(tr);
  });

  // CDFs from each run's percentiles, the paper's published points beside.
  function cdf(canvasId, field, paperKeys, title) {
    const datasets = runs.map((r, i) => ({
      label: label(r), type: "line", borderColor: colour(i), backgroundColor: colour(i), pointRadius: 0, borderWidth: 1.5,
      data: (r[field] || []).map((v, p) => ({ x: Math.max(v, 1e-3), y: p / 100 })),
    }));
    // Beside the runs of the paper's experiment only (report.h: ReportOptions::paper).
    const configs = new Set(runs.filter((r) => r.paper).map((r) => r.config));
    for (const [config, pts] of Object.entries(DATA.paper)) {
      if (!configs.has(config)) continue;
      const points = paperKeys.filter(([k]) => k in pts).map(([k, q]) => ({ x: pts[k], y: q }));
      if (!points.length) continue;
      const i = runs.findIndex((r) => r.paper && r.config === config);
      datasets.push({ label: "paper (TP=8 fixed replay): " + config, type: "scatter", data: points, pointStyle: "crossRot", pointRadius: 8,
                      borderWidth: 2, borderColor: colour(i), backgroundColor: colour(i) });
    }
    return new Chart(document.getElementById(canvasId), {
      data: { datasets },
      options: { animation: false, maintainAspectRatio: false, parsing: false,
        scales: { x: { type: "logarithmic", title: { display: true, text: title } },
                  y: { min: 0, max: 1, title: { display: true, text: "fraction" } } },
        plugins: { legend: { labels: { boxWidth: 12 } } } },
    });
  }
  cdf("sct-cdf", "sct_quantiles_s", [["sct_p50_s", 0.5], ["sct_p95_s", 0.95]], "SCT (s, log)");
  cdf("ttft-cdf", "ttft_quantiles_s", [["ttft_p50_s", 0.5]], "TTFT (s, log)");

  // The lease sweep: runs that differ only in tau.
  const groups = {};
  for (const r of runs) {
    if (r.tau_s === undefined) continue;
    const k = [r.config, r.router, r.load, r.trace, r.cluster].join(" / ");
    (groups[k] = groups[k] || []).push(r);
  }
  const sweeps = Object.entries(groups).filter(([, rs]) => new Set(rs.map((r) => r.tau_s)).size > 1);
  if (sweeps.length) {
    document.getElementById("sweep-card").hidden = false;
    const datasets = [];
    sweeps.forEach(([k, rs], i) => {
      rs.sort((a, b) => a.tau_s - b.tau_s);
      datasets.push({ label: k + ": returning TTFT p95 (s)", borderColor: colour(i), backgroundColor: colour(i), yAxisID: "y",
                      data: rs.map((r) => ({ x: r.tau_s, y: r.returning_ttft_p95_s })) });
      datasets.push({ label: k + ": unused leases (%)", borderColor: colour(i), backgroundColor: colour(i), borderDash: [5, 4], yAxisID: "y2",
                      data: rs.map((r) => ({ x: r.tau_s, y: 100 * (r.unused_lease_proxy || 0) })) });
    });
    new Chart(document.getElementById("sweep"), {
      type: "line", data: { datasets },
      options: { animation: false, maintainAspectRatio: false, parsing: false,
        scales: { x: { type: "linear", title: { display: true, text: "lease timeout tau (s)" } },
                  y: { title: { display: true, text: "returning TTFT p95 (s)" } },
                  y2: { position: "right", min: 0, max: 100, grid: { drawOnChartArea: false }, title: { display: true, text: "unused leases (%)" } } } },
    });
  }

  // Per run: the Gantt of instances and memory over time.
  const select = document.getElementById("run-select");
  const withTimeline = runs.filter((r) => r.timeline);
  for (const r of withTimeline) select.append(el("option", { value: label(r) }, label(r)));
  let gantt = null, memory = null;
  function drawRun(r) {
    const tl = r.timeline;
    const instances = Object.keys(tl.instances).sort();
    const modelColour = (m) => colour(m);
    const datasets = DATA.phases.map((phase, p) => ({
      label: phase, grouped: false, borderSkipped: false, barPercentage: phase === "decode" ? 0.9 : 0.6, categoryPercentage: 1,
      data: [], backgroundColor: [],
      parsing: { xAxisKey: "x", yAxisKey: "y" },
    }));
    let bars = 0;
    for (const inst of instances) {
      for (const [start, end, phase, model, path] of tl.instances[inst]) {
        const ds = datasets[phase];
        ds.data.push({ x: [start, end], y: inst, model: tl.models[model], path: path >= 0 ? DATA.paths[path] : "" });
        const name = DATA.phases[phase];
        ds.backgroundColor.push(name === "switch" ? PATH_COLOURS[DATA.paths[path]] || "#888"
                                : modelColour(model) + (name === "hold" ? "55" : name === "decode" ? "bb" : "ff"));
        bars++;
      }
    }
    document.getElementById("gantt-note").textContent =
      "Bars: P, SP and D coloured by model (" + tl.models.join(", ") + "), switches by path " +
      "(D2D green, partial amber, H2D red), holds faint. " +
      (tl.segments_shown < tl.segments_total ? "First " + tl.segments_shown + " of " + tl.segments_total + " segments shown." : tl.segments_total + " segments.");
    const box = document.getElementById("gantt-box");
    box.style.height = (80 + 60 * instances.length) + "px";
    if (gantt) gantt.destroy();
    gantt = new Chart(document.getElementById("gantt"), {
      type: "bar", data: { labels: instances, datasets },
      options: { indexAxis: "y", animation: false, maintainAspectRatio: false,
        scales: { x: { type: "linear", title: { display: true, text: "seconds since the replay began" } } },
        plugins: { tooltip: { callbacks: { label: (c) => c.dataset.label + " · " + c.raw.model + (c.raw.path ? " (" + c.raw.path + ")" : "") +
                                                     " · " + c.raw.x[0].toFixed(2) + "–" + c.raw.x[1].toFixed(2) + " s" } } } },
    });
    const memSets = [];
    Object.keys(tl.memory).sort().forEach((inst, i) => {
      memSets.push({ label: inst + " HBM KV %", borderColor: colour(i), pointRadius: 0, borderWidth: 1, stepped: true,
                     data: tl.memory[inst].map(([t, kv]) => ({ x: t, y: kv })) });
      memSets.push({ label: inst + " host KV %", borderColor: colour(i), borderDash: [5, 4], pointRadius: 0, borderWidth: 1, stepped: true,
                     data: tl.memory[inst].map(([t, , host]) => ({ x: t, y: host })) });
    });
    if (memory) memory.destroy();
    memory = new Chart(document.getElementById("memory"), {
      type: "line", data: { datasets: memSets },
      options: { animation: false, maintainAspectRatio: false, parsing: false,
        scales: { x: { type: "linear", title: { display: true, text: "seconds since the replay began" } }, y: { min: 0, max: 100 } } },
    });
    document.body.dataset.bars = String(bars);
  }
  if (withTimeline.length) {
    select.addEventListener("change", () => drawRun(withTimeline.find((r) => label(r) === select.value)));
    drawRun(withTimeline[0]);
  } else {
    document.getElementById("gantt-note").textContent =
      "No records: run the replay with --records DIR and pass --records DIR to talaria report for the Gantt and memory plots.";
  }
  document.body.dataset.runs = String(runs.length);
  document.body.dataset.ready = "1";
})();
