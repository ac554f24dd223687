// Loads a Talaria page in headless Chromium (Debian's /usr/bin/chromium,
// driven by playwright-core), waits until the page says it drew, checks
// the elements a viewer needs are there and populated, fails on any
// JavaScript error or failed request, and saves a screenshot.
//
//   node browser_check.mjs report FILE.html SHOT.png
//   node browser_check.mjs dashboard http://HOST:PORT/dashboard SHOT.png [API_KEY]
//
// Prints "browser check: ok (...)" and exits 0, or names what failed and
// exits 1.
import { chromium } from "playwright-core";

const [kind, target, shot, key] = process.argv.slice(2);
if (!["report", "dashboard"].includes(kind) || !target || !shot) {
  console.error("usage: node browser_check.mjs report|dashboard FILE_OR_URL SHOT.png [API_KEY]");
  process.exit(2);
}
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const problems = [];
const fail = (what) => problems.push(what);

const browser = await chromium.launch({ executablePath, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.on("console", (m) => { if (m.type() === "error") fail("console error: " + m.text()); });
  page.on("pageerror", (e) => fail("page error: " + e.message));
  page.on("requestfailed", (r) => fail("request failed: " + r.url() + " " + (r.failure() || {}).errorText));
  // Nothing may come from the network: every request stays on the page's origin.
  const origin = kind === "report" ? "file://" : new URL(target).origin;
  page.on("request", (r) => { if (!r.url().startsWith(origin) && !r.url().startsWith("data:")) fail("request off the origin: " + r.url()); });

  if (kind === "report") {
    await page.goto("file://" + target, { waitUntil: "load" });
    await page.waitForFunction(() => document.body.dataset.ready === "1", null, { timeout: 20000 });
    const facts = await page.evaluate(() => {
      const charts = ["sct-cdf", "ttft-cdf", "gantt", "memory"].map((id) => {
        const c = window.Chart && Chart.getChart(id);
        return [id, c ? c.data.datasets.reduce((n, d) => n + d.data.length, 0) : -1];
      });
      return {
        runs: Number(document.body.dataset.runs),
        rows: document.querySelectorAll("#matrix tbody tr").length,
        coloured: [...document.querySelectorAll("#matrix tbody td")].filter((td) => td.style.background).length,
        bars: Number(document.body.dataset.bars || 0),
        options: document.querySelectorAll("#run-select option").length,
        paper: Chart.getChart("sct-cdf").data.datasets.filter((d) => d.label.startsWith("paper")).length,
        charts: Object.fromEntries(charts),
      };
    });
    if (!(facts.runs > 0) || facts.rows !== facts.runs) fail("runs table: " + facts.rows + " rows for " + facts.runs + " runs");
    if (facts.runs > 1 && facts.coloured === 0) fail("runs table: no cell coloured");
    for (const [id, n] of Object.entries(facts.charts)) if (!(n > 0)) fail("chart #" + id + " has no points (" + n + ")");
    if (!(facts.bars > 0)) fail("Gantt: no bars");
    if (process.env.EXPECT_PAPER && facts.paper === 0) fail("SCT CDF: the paper's points are missing");
    await page.screenshot({ path: shot, fullPage: true });
    if (!problems.length) console.log("browser check: ok (report: " + JSON.stringify(facts) + ")");
  } else {
    if (key) {
      await page.addInitScript((k) => sessionStorage.setItem("talaria-key", k), key);
    }
    await page.goto(target, { waitUntil: "load" });
    // Three polls: the timeline has had time to fill.
    await page.waitForFunction(() => Number(document.body.dataset.polls || 0) >= 3, null, { timeout: 20000 });
    const facts = await page.evaluate(() => ({
      tiles: document.querySelectorAll("#totals .tile").length,
      instances: [...document.querySelectorAll(".instance-card")].map((c) => ({
        name: c.dataset.instance,
        segments: Number(c.dataset.segments || 0),
        models: c.querySelectorAll("table.models tbody tr").length,
      })),
      leases: document.querySelectorAll("#leases tbody tr").length,
      // Each lease's Eq.5 units (the last column): 1, or an adaptive lease's chance of use.
      leaseUnits: [...document.querySelectorAll("#leases tbody tr td:last-child")].map((td) => Number(td.textContent)),
      running: Number(document.querySelector('[data-total="running"] .v').textContent) +
               Number(document.querySelector('[data-total="queued"] .v').textContent),
      calls: Chart.getChart("calls-chart").data.labels.length,
      status: document.getElementById("status").textContent,
    }));
    if (facts.tiles < 6) fail("totals: " + facts.tiles + " tiles");
    if (!facts.instances.length) fail("no instance cards");
    for (const i of facts.instances) {
      if (!(i.segments > 0)) fail("instance " + i.name + ": empty timeline");
      if (!(i.models > 0)) fail("instance " + i.name + ": no model rows");
    }
    if (!(facts.calls > 0)) fail("calls-by-model chart: no models");
    if (facts.status.startsWith("error")) fail("status: " + facts.status);
    if (process.env.EXPECT_LEASES && facts.leases === 0) fail("no live leases listed");
    if (!facts.leaseUnits.every((u) => u >= 0 && u <= 1)) fail("lease units out of [0, 1]: " + facts.leaseUnits);
    await page.screenshot({ path: shot, fullPage: true });
    if (!problems.length) console.log("browser check: ok (dashboard: " + JSON.stringify(facts) + ")");
  }
} catch (e) {
  fail(String(e && e.message ? e.message : e));
} finally {
  await browser.close();
}
if (problems.length) {
  console.error("browser check FAILED:\n  " + problems.join("\n  "));
  process.exit(1);
}
