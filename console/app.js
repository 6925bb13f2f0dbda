// The Clearance operator console. Plain JavaScript, no framework and no
// build step; everything shown is read from this server's API with the
// org key the operator signed in with, kept in sessionStorage only.
"use strict";

(function () {
  const KEY_STORE = "clearance.console.key";
  const OUTCOMES = ["ALLOW", "ESCALATE", "REVIEW_REQUIRED", "BLOCK"];
  const MODES = ["SHADOW", "ENFORCEMENT"];
  const EXECUTIONS = ["COMMITTED", "FAILED", "INDETERMINATE", "CLAIMED", "ISSUED"];
  const COLORS = {
    ALLOW: "#1a7f37", ESCALATE: "#9a6700", REVIEW_REQUIRED: "#8250df", BLOCK: "#cf222e",
    SHADOW: "#57606a", ENFORCEMENT: "#0969da",
    COMMITTED: "#1a7f37", FAILED: "#cf222e", INDETERMINATE: "#9a6700", CLAIMED: "#0969da", ISSUED: "#57606a",
    p50_ms: "#0969da", p95_ms: "#8250df", p99_ms: "#cf222e",
  };
  const SVG = "http://www.w3.org/2000/svg";

  const $ = (id) => document.getElementById(id);
  let apiKey = sessionStorage.getItem(KEY_STORE) || "";
  // view is bumped on every navigation: answers for a view the operator
  // left are dropped, and retries for it stop.
  let view = 0;
  let decisionsLoaded = false;
  let activityLoaded = false;

  // ---- elements --------------------------------------------------------

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null) continue;
      if (k === "class") e.className = v; else e.setAttribute(k, v);
    }
    for (const c of children) e.append(c);
    return e;
  }
  function svg(tag, attrs, ...children) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const c of children) e.append(c);
    return e;
  }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); return e; }

  // ---- the API ---------------------------------------------------------

  class APIError extends Error {
    constructor(status, problem) {
      super((problem && (problem.detail || problem.title)) || "HTTP " + status);
      this.status = status;
      this.code = problem && problem.code;
    }
  }

  // call sends one request with the operator's key. 401 signs out.
  async function call(path, opts) {
    const headers = Object.assign({ Accept: "application/json" }, (opts && opts.headers) || {});
    if (!(opts && opts.anonymous)) headers.Authorization = "Bearer " + apiKey;
    const res = await fetch(path, { method: (opts && opts.method) || "GET", headers, body: opts && opts.body, credentials: "omit", cache: "no-store" });
    if (res.status === 401 && !(opts && opts.anonymous)) {
      signOut("The server refused the key (401). Sign in again.");
      throw new APIError(401, null);
    }
    return res;
  }
  async function getJSON(path) {
    const res = await call(path);
    const body = await res.json().catch(() => null);
    if (!res.ok) throw new APIError(res.status, body);
    return body;
  }
  function describe(err) {
    if (err instanceof APIError) return err.message + (err.code ? " (" + err.code + ", " + err.status + ")" : " (" + err.status + ")");
    return String(err && err.message || err);
  }

  // ---- sign-in ---------------------------------------------------------

  function signIn(ev) {
    ev.preventDefault();
    const key = $("apikey").value.trim();
    if (!/^clr_org_[A-Za-z0-9_-]+$/.test(key)) {
      $("signin-error").textContent = "That is not an org API key: it starts with clr_org_.";
      $("apikey").setAttribute("aria-invalid", "true");
      $("apikey").focus();
      return;
    }
    apiKey = key;
    sessionStorage.setItem(KEY_STORE, key);
    $("apikey").value = "";
    $("apikey").removeAttribute("aria-invalid");
    $("signin-error").textContent = "";
    decisionsLoaded = activityLoaded = false;
    if (location.hash === "" || location.hash === "#/signin") location.hash = "#/decisions"; else route();
  }

  function signOut(message) {
    apiKey = "";
    sessionStorage.removeItem(KEY_STORE);
    decisionsLoaded = activityLoaded = false;
    clear($("decisions-rows"));
    $("signin-error").textContent = typeof message === "string" ? message : "";
    view++;
    show("signin");
    $("apikey").focus();
  }

  // ---- views -----------------------------------------------------------

  // views maps a route to its section and loader. Escalations, policies
  // and the ledger join here in later increments.
  const views = {
    signin: { section: "view-signin" },
    decisions: { section: "view-decisions", nav: "decisions", load: () => { if (!decisionsLoaded) loadDecisions(); } },
    dossier: { section: "view-dossier", nav: "decisions", load: (id) => loadDossier(id) },
    activity: { section: "view-activity", nav: "activity", load: () => { if (!activityLoaded) loadActivity(); } },
  };

  function show(name, arg) {
    const v = views[name];
    for (const other of Object.values(views)) $(other.section).hidden = other !== v;
    const signedIn = name !== "signin";
    $("nav").hidden = !signedIn;
    $("who").hidden = !signedIn;
    $("who-key").textContent = signedIn ? "Signed in with " + apiKey.slice(0, 12) + "…" : "";
    for (const a of document.querySelectorAll("#nav a")) {
      if (a.dataset.view === v.nav) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
    }
    if (v.load) v.load(arg);
  }

  function route() {
    view++;
    if (!apiKey) { show("signin"); return; }
    const h = location.hash;
    let m;
    if ((m = /^#\/dossiers\/([0-9a-f-]{36})$/.exec(h))) show("dossier", m[1]);
    else if (h === "#/activity") show("activity");
    else show("decisions");
  }

  // ---- decisions -------------------------------------------------------

  // rfc3339 reads a datetime-local value as UTC ("" stays "").
  function rfc3339(v) {
    if (!v) return "";
    const d = new Date(v + (v.length === 16 ? ":00" : "") + "Z");
    return isNaN(d) ? "" : d.toISOString();
  }

  async function loadDecisions() {
    const mine = view;
    const q = new URLSearchParams();
    const outcome = $("f-outcome").value, mode = $("f-mode").value, workflow = $("f-workflow").value.trim();
    if (outcome) q.set("outcome", outcome);
    if (mode) q.set("mode", mode);
    if (workflow) q.set("workflow", workflow);
    const from = rfc3339($("f-from").value), to = rfc3339($("f-to").value);
    if (from) q.set("from", from);
    if (to) q.set("to", to);
    q.set("limit", $("f-limit").value || "50");
    const status = $("decisions-status");
    status.textContent = "Loading decisions…";
    status.dataset.state = "loading";
    try {
      const ans = await getJSON("/v1/console/decisions?" + q);
      if (mine !== view) return;
      const rows = clear($("decisions-rows"));
      for (const d of ans.decisions) {
        rows.append(el("tr", { "data-dossier-id": d.dossier_id, "data-outcome": d.outcome, "data-mode": d.mode, "data-workflow": d.workflow_key },
          el("td", {}, el("time", { datetime: d.created_at }, d.created_at)),
          el("td", {}, el("span", { class: "badge " + d.outcome.toLowerCase() }, d.outcome)),
          el("td", {}, d.mode),
          el("td", {}, d.workflow_key || "—"),
          el("td", {}, d.decision_type || "—"),
          el("td", {}, el("a", { href: "#/dossiers/" + d.dossier_id, "aria-label": "Open dossier " + d.dossier_id }, d.dossier_id.slice(0, 8) + "…"))));
      }
      decisionsLoaded = true;
      status.textContent = ans.decisions.length + " decision" + (ans.decisions.length === 1 ? "" : "s") +
        " from " + ans.from + " to " + ans.to + (ans.truncated ? "; more match: narrow the filters or raise the rows." : ".");
      status.dataset.state = "done";
    } catch (err) {
      if (mine !== view) return;
      status.textContent = "Could not load decisions: " + describe(err);
      status.dataset.state = "error";
    }
  }

  // ---- a dossier -------------------------------------------------------

  function fact(dl, term, value) {
    dl.append(el("dt", {}, term), el("dd", {}, value === undefined || value === null || value === "" ? "—" : String(value)));
  }

  async function loadDossier(id) {
    const mine = view;
    const status = $("dossier-status");
    for (const s of ["dossier-summary", "dossier-reasons", "dossier-chain", "dossier-overrides", "dossier-dispatches", "dossier-request"]) clear($(s));
    for (const box of ["verify-packet", "verify-capsule"]) {
      clear($(box).querySelector(".checks"));
      const v = $(box).querySelector(".verdict");
      v.textContent = "";
      v.dataset.state = "";
    }
    $("dossier-title").textContent = "Dossier " + id;
    status.textContent = "Loading the dossier…";
    let d;
    try {
      d = await getJSON("/v1/protocol/dossiers/" + id);
    } catch (err) {
      if (mine === view) status.textContent = "Could not load the dossier: " + describe(err);
      return;
    }
    if (mine !== view) return;
    status.textContent = "";
    const dl = $("dossier-summary");
    fact(dl, "Outcome", d.outcome);
    fact(dl, "Mode", d.mode);
    fact(dl, "Created", d.created_at);
    fact(dl, "Workflow", d.intent && d.intent.workflow_key);
    fact(dl, "Decision type", d.intent && d.intent.decision_type);
    fact(dl, "Decision", d.decision_id);
    fact(dl, "Route", d.route);
    const ps = d.policy_snapshot || {};
    fact(dl, "Policy", [ps.bundle_id, ps.policy_version].filter(Boolean).join(" ") + (d.bundle_mode ? " (" + d.bundle_mode + ")" : ""));
    fact(dl, "Policy digest", ps.bundle_digest);
    fact(dl, "Matched rules", (d.matched_rules || []).join(", "));
    fact(dl, "Ledger entry", d.ledger_seq);
    dl.dataset.outcome = d.outcome || "";
    for (const r of d.reason_codes || []) $("dossier-reasons").append(el("li", {}, el("code", {}, r)));
    $("dossier-request").textContent = d.intent_as_received || JSON.stringify(d.intent || {}, null, 2);

    const org = encodeURIComponent(d.org_id);
    verify(mine, $("verify-packet"), "/v1/protocol/dossiers/" + id + "/proof-packet?org_id=" + org);
    verify(mine, $("verify-capsule"), "/v1/protocol/dossiers/" + id + "/agent-action-capsule?org_id=" + org);
    listInto(mine, "dossier-chain", d.chain_id ? "/v1/protocol/decision-chains/" + d.chain_id + "?org_id=" + org : "", "members",
      (m) => [el("a", { href: "#/dossiers/" + m.dossier_id }, m.outcome + " " + m.mode), " " + (m.route || "") + " at " + m.created_at + (m.dossier_id === id ? " (this one)" : "")],
      "No chain.");
    listInto(mine, "dossier-overrides", "/v1/protocol/dossiers/" + id + "/overrides?org_id=" + org, "overrides",
      (o) => [o.resolution + " by " + (o.actor && o.actor.id) + " at " + o.created_at + (o.reason_code ? " (" + o.reason_code + ")" : "") + (o.note ? ": " + o.note : "")],
      "No overrides.");
    listInto(mine, "dossier-dispatches", "/v1/protocol/dossiers/" + id + "/dispatches?org_id=" + org, "dispatches",
      (x) => [(x.target || "") + " dispatched at " + x.dispatched_at],
      "No dispatches.", (ans) => ans.grant_state ? "Grant " + ans.grant_state + ". " : "");
  }

  async function listInto(mine, id, path, member, render, none, lead) {
    const list = $(id);
    if (!path) { list.append(el("li", { class: "none" }, none)); return; }
    try {
      const ans = await getJSON(path);
      if (mine !== view) return;
      const items = ans[member] || [];
      if (lead && lead(ans)) list.append(el("li", { class: "lead" }, lead(ans)));
      if (items.length === 0) list.append(el("li", { class: "none" }, none));
      for (const it of items) list.append(el("li", {}, ...render(it)));
    } catch (err) {
      if (mine !== view) return;
      list.append(el("li", { class: err.status === 404 ? "none" : "error" }, err.status === 404 ? none : "Could not load: " + describe(err)));
    }
  }

  function base64(buf) {
    const bytes = new Uint8Array(buf);
    let s = "";
    for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    return btoa(s);
  }

  // verify fetches an artifact with the operator's key and has the reader
  // check it; an entry the ledger has not sealed yet is fetched again
  // after the server's Retry-After.
  async function verify(mine, box, path) {
    const verdict = box.querySelector(".verdict"), checks = clear(box.querySelector(".checks"));
    const say = (state, text) => { verdict.dataset.state = state; verdict.textContent = text; };
    say("loading", "Fetching…");
    try {
      const res = await call(path, { headers: { Accept: "application/json" } });
      if (mine !== view) return;
      if (!res.ok) {
        const p = await res.json().catch(() => null);
        if (res.status === 409 && p && p.code === "ENTRY_NOT_YET_SEALED") {
          const after = Math.max(1, parseInt(res.headers.get("Retry-After"), 10) || 5);
          say("unsealed", "Not sealed yet: the ledger has not sealed this entry. Checking again in " + after + " s.");
          setTimeout(() => { if (mine === view) verify(mine, box, path); }, after * 1000);
          return;
        }
        throw new APIError(res.status, p);
      }
      const artifact = base64(await res.arrayBuffer());
      say("loading", "Verifying…");
      const vr = await call("/v1/reader/verify", { method: "POST", anonymous: true, headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ artifact_base64: artifact }) });
      const rep = await vr.json().catch(() => null);
      if (mine !== view) return;
      if (!vr.ok) throw new APIError(vr.status, rep);
      for (const c of rep.checks || []) {
        const li = el("li", { class: c.ok ? "pass" : "fail", "data-check": c.name, "data-ok": String(c.ok) },
          el("span", { class: "mark", "aria-hidden": "true" }, c.ok ? "✓" : "✗"),
          el("span", { class: "visually-hidden" }, c.ok ? "Passed: " : "Failed: "),
          el("span", { class: "name" }, c.name));
        if (!c.ok && c.reason) li.append(" ", el("code", { class: "reason" }, c.reason));
        if (c.detail) li.append(el("span", { class: "detail" }, c.detail));
        checks.append(li);
      }
      say(rep.valid ? "valid" : "invalid", rep.valid ? "Valid: every check passed." : "Not valid: see the failed checks.");
    } catch (err) {
      if (mine === view) say("error", "Could not verify: " + describe(err));
    }
  }

  // ---- activity --------------------------------------------------------

  // metric is a drawn number's text, with its exact value and its path in
  // the API's answer, so what is drawn can be checked against the API.
  function metric(path, value, text) {
    return el("span", { class: "num", "data-metric": path, "data-value": String(value) }, text === undefined ? String(value) : text);
  }

  function stackedBars(container, series) {
    const W = 900, H = 240, padL = 44, padB = 28, padT = 10;
    const totals = series.map((s) => OUTCOMES.reduce((n, o) => n + ((s.by_outcome || {})[o] || 0), 0));
    const max = Math.max(1, ...totals);
    const bw = (W - padL - 8) / Math.max(1, series.length);
    const chart = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img", class: "bars",
      "aria-label": "Decisions per bucket, stacked by outcome; the numbers are in the table below." });
    const y = (n) => padT + (H - padT - padB) * (1 - n / max);
    chart.append(svg("line", { x1: padL, y1: y(0), x2: W, y2: y(0), class: "axis" }));
    chart.append(svg("text", { x: padL - 6, y: y(max) + 4, "text-anchor": "end", class: "tick" }, String(max)));
    chart.append(svg("text", { x: padL - 6, y: y(0) + 4, "text-anchor": "end", class: "tick" }, "0"));
    series.forEach((s, i) => {
      let base = 0;
      const x = padL + i * bw + bw * 0.1;
      for (const o of OUTCOMES) {
        const n = (s.by_outcome || {})[o] || 0;
        if (n > 0) {
          chart.append(svg("rect", { x: x.toFixed(2), y: y(base + n).toFixed(2), width: (bw * 0.8).toFixed(2), height: (y(base) - y(base + n)).toFixed(2),
            fill: COLORS[o], "data-bucket": s.start, "data-outcome": o, "data-count": String(n) },
          svg("title", {}, s.start + ": " + n + " " + o)));
        }
        base += n;
      }
    });
    if (series.length > 0) {
      chart.append(svg("text", { x: padL, y: H - 8, class: "tick" }, series[0].start));
      chart.append(svg("text", { x: W, y: H - 8, "text-anchor": "end", class: "tick" }, series[series.length - 1].start));
    }
    clear(container).append(chart);
  }

  // hbars draws one horizontal bar per item: [{label, value, path, text}].
  function hbars(container, items, label) {
    const W = 420, row = 30, padL = 130, H = items.length * row + 6;
    const max = Math.max(1, ...items.map((i) => i.value));
    const chart = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img", class: "hbars", "aria-label": label });
    const list = el("ul", { class: "values" });
    items.forEach((it, i) => {
      const y = 4 + i * row, w = (W - padL - 70) * (it.value / max);
      chart.append(svg("text", { x: padL - 8, y: y + 17, "text-anchor": "end", class: "tick" }, it.label));
      chart.append(svg("rect", { x: padL, y: y + 4, width: Math.max(it.value > 0 ? 2 : 0, w).toFixed(2), height: 18, fill: COLORS[it.key] || "#0969da",
        "data-key": it.key, "data-count": String(it.value) }));
      chart.append(svg("text", { x: padL + w + 6, y: y + 17, class: "tick" }, it.text || String(it.value)));
      list.append(el("li", {}, it.label + ": ", metric(it.path, it.value, it.text)));
    });
    clear(container).append(chart, list);
  }

  function ms(v) { return (Math.round(v * 10) / 10) + " ms"; }

  async function loadActivity() {
    const mine = view;
    const q = new URLSearchParams();
    const from = rfc3339($("a-from").value), to = rfc3339($("a-to").value);
    if (from) q.set("from", from);
    if (to) q.set("to", to);
    q.set("bucket", $("a-bucket").value);
    const status = $("activity-status");
    status.textContent = "Loading activity…";
    status.dataset.state = "loading";
    try {
      const a = await getJSON("/v1/console/activity?" + q);
      if (mine !== view) return;
      const series = a.series || [];
      stackedBars($("chart-outcomes"), series);
      const legend = clear($("legend-outcomes"));
      for (const o of OUTCOMES) {
        legend.append(el("li", {}, el("span", { class: "swatch " + o.toLowerCase(), "aria-hidden": "true" }), o + ": ",
          metric("totals.by_outcome." + o, ((a.totals || {}).by_outcome || {})[o] || 0)));
      }
      hbars($("chart-modes"), MODES.map((m) => ({ key: m, label: m, value: ((a.totals || {}).by_mode || {})[m] || 0, path: "totals.by_mode." + m })),
        "Decisions in shadow and in enforcement mode");
      hbars($("chart-executions"), EXECUTIONS.map((x) => ({ key: x, label: x, value: (a.executions || {})[x] || 0, path: "executions." + x })),
        "Executions by outcome");
      const lat = a.latency || {};
      hbars($("chart-latency"), ["p50_ms", "p95_ms", "p99_ms"].map((p) => ({ key: p, label: p.replace("_ms", ""), value: lat[p] || 0, path: "latency." + p, text: ms(lat[p] || 0) })),
        "Latency percentiles in milliseconds");
      const req = $("latency-requests");
      req.dataset.value = String(lat.requests || 0);
      req.textContent = String(lat.requests || 0);
      const queue = $("reconciliation-queue");
      queue.dataset.value = String(a.reconciliation_queue || 0);
      queue.textContent = String(a.reconciliation_queue || 0);
      const rows = clear($("activity-rows"));
      series.forEach((s, i) => {
        const tr = el("tr", {}, el("th", { scope: "row" }, el("time", { datetime: s.start }, s.start)));
        for (const o of OUTCOMES) tr.append(el("td", {}, metric("series." + i + ".by_outcome." + o, (s.by_outcome || {})[o] || 0)));
        for (const m of MODES) tr.append(el("td", {}, metric("series." + i + ".by_mode." + m, (s.by_mode || {})[m] || 0)));
        rows.append(tr);
      });
      $("activity-charts").hidden = false;
      activityLoaded = true;
      status.textContent = "From " + a.from + " to " + a.to + ", by " + a.bucket + ".";
      status.dataset.state = "done";
    } catch (err) {
      if (mine !== view) return;
      status.textContent = "Could not load activity: " + describe(err);
      status.dataset.state = "error";
    }
  }

  // ---- start -----------------------------------------------------------

  document.addEventListener("DOMContentLoaded", () => {
    $("signin-form").addEventListener("submit", signIn);
    $("signout").addEventListener("click", () => { location.hash = ""; signOut(""); });
    $("decision-filters").addEventListener("submit", (ev) => { ev.preventDefault(); view++; loadDecisions(); });
    $("activity-filters").addEventListener("submit", (ev) => { ev.preventDefault(); view++; loadActivity(); });
    window.addEventListener("hashchange", () => { route(); $("main").focus({ preventScroll: true }); });
    route();
  });
})();
