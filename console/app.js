// The Clearance operator console. Plain JavaScript, no framework and no
// build step; everything shown is read from this server's API with an org
// key kept in sessionStorage only: one the operator pasted, or a console
// key the owner's account session was traded for (renewed while the
// session lasts, revoked when it signs out).
"use strict";

(function () {
  const KEY_STORE = "clearance.console.key";
  // ACCOUNT_STORE is the workspace (org id) of a console key issued to the
  // account session, and LABEL_STORE what the header says about it.
  const ACCOUNT_STORE = "clearance.console.workspace";
  const LABEL_STORE = "clearance.console.label";
  const CSRF = "X-Clearance-CSRF";
  // MESSAGE_STORE carries why the operator was signed out across the reload.
  const MESSAGE_STORE = "clearance.console.signout";
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
  let workspace = sessionStorage.getItem(ACCOUNT_STORE) || "";
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

  // call sends one request with the operator's key. A 401 on a console
  // key (its hour may be over while the session lasts) renews it once and
  // sends again; a request that raced a renewal just uses the new key. A
  // renewal the session refuses signs out; one that fails otherwise (the
  // server unavailable) is thrown to the view, signing nothing out.
  async function call(path, opts) {
    const anonymous = opts && opts.anonymous;
    const send = (key) => {
      const headers = Object.assign({ Accept: "application/json" }, (opts && opts.headers) || {});
      if (!anonymous) headers.Authorization = "Bearer " + key;
      return fetch(path, { method: (opts && opts.method) || "GET", headers, body: opts && opts.body, credentials: "omit", cache: "no-store" });
    };
    let sent = apiKey;
    let res = await send(sent);
    if (res.status === 401 && !anonymous && workspace && !signingOut) {
      if (apiKey === sent) {
        const renewed = await renewConsoleKey();
        if (renewed !== true) {
          if (renewed.status === 401) signOut("Your session ended. Sign in again.", false, "account");
          else if (renewed.status === 409) signOut(renewed.message, true, "account");
          throw renewed;
        }
      }
      sent = apiKey;
      res = await send(sent);
    }
    if (res.status === 401 && !anonymous) {
      if (workspace) signOut("The server refused the console key (401). Sign in again.", true, "account");
      else signOut("The server refused the key (401). Sign in again.", false, "key");
      throw new APIError(401, null);
    }
    return res;
  }

  // accountCall sends one request of the account routes: the session
  // cookie rides along (same origin only) and a change carries the CSRF
  // header. It answers the decoded body, or throws an APIError.
  async function accountCall(method, path, body) {
    const headers = { Accept: "application/json" };
    if (method !== "GET") headers[CSRF] = "1";
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin", cache: "no-store" });
    const out = res.status === 204 ? null : await res.json().catch(() => null);
    if (!res.ok) throw new APIError(res.status, out);
    return out;
  }

  // renewing is the one renewal under way, shared by concurrent requests;
  // it settles to true, or to the APIError that refused it (status 0: the
  // server could not be reached).
  let renewing = null;
  function renewConsoleKey() {
    if (!renewing) {
      const asked = apiKey;
      renewing = accountCall("POST", "/v1/public/auth/workspaces/" + encodeURIComponent(workspace) + "/console-key")
        .then((k) => { if (apiKey === asked && !signingOut) useKey(k.api_key); return true; },
          (err) => err instanceof APIError ? err : new APIError(0, { detail: "The server could not be reached: " + String(err && err.message || err) }))
        .finally(() => { renewing = null; });
    }
    return renewing;
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
    useKey(key);
    $("apikey").value = "";
    $("apikey").removeAttribute("aria-invalid");
    $("signin-error").textContent = "";
    decisionsLoaded = activityLoaded = false;
    if (location.hash === "" || location.hash === "#/signin") location.hash = "#/decisions"; else route();
  }

  function useKey(key) {
    apiKey = key;
    sessionStorage.setItem(KEY_STORE, key);
  }

  // signOut forgets the key and reloads the page; endSession (the Sign
  // out button, a console key refused) first ends the account session,
  // which revokes its console keys on the server. If that fails the page
  // stays signed in and says so: signing out again finishes it. where
  // ("account" or "key") is the form that shows message after the reload.
  let signingOut = false;
  async function signOut(message, endSession, where) {
    if (signingOut) return;
    signingOut = true;
    stopLive();
    if (endSession && workspace) {
      try {
        await accountCall("DELETE", "/v1/public/auth/session");
      } catch (err) {
        if (!(err instanceof APIError && err.status === 401)) {
          signingOut = false;
          const e = $("signout-error");
          e.textContent = "Signing out failed: " + describe(err) + ". Sign out again to end the session and revoke its console key.";
          e.focus();
          return;
        }
      }
    }
    apiKey = workspace = "";
    for (const k of [KEY_STORE, ACCOUNT_STORE, LABEL_STORE]) sessionStorage.removeItem(k);
    if (typeof message === "string" && message) sessionStorage.setItem(MESSAGE_STORE, JSON.stringify({ text: message, where: where || "key" }));
    // A fresh page keeps nothing of the org's data (rows, charts, a ledger
    // entry) for whoever uses the tab next.
    location.replace(location.pathname);
  }

  // ---- sign-in with an account -------------------------------------------

  function accountStatus(text) { $("account-status").textContent = text; }

  async function accountSubmit(ev) {
    ev.preventDefault();
    const email = $("account-email").value.trim();
    if (!/^[^@\s]+@[^@\s]+$/.test(email)) {
      accountStatus("Enter the e-mail address of your account.");
      $("account-email").setAttribute("aria-invalid", "true");
      $("account-email").focus();
      return;
    }
    $("account-email").removeAttribute("aria-invalid");
    try {
      if ($("account-code-step").hidden) {
        await accountCall("POST", "/v1/public/auth/login/start", { email });
        $("account-code-step").hidden = false;
        $("account-send").hidden = true;
        $("account-email").readOnly = true;
        accountStatus("");
        $("account-code").focus();
        return;
      }
      const code = $("account-code").value.trim();
      if (!/^[0-9]{6}$/.test(code)) {
        accountStatus("The code is the six digits of the e-mail.");
        $("account-code").setAttribute("aria-invalid", "true");
        $("account-code").focus();
        return;
      }
      $("account-code").removeAttribute("aria-invalid");
      const acct = await accountCall("POST", "/v1/public/auth/login/verify", { email, otp_code: code });
      $("account-code").value = "";
      showWorkspaces(acct);
    } catch (err) {
      accountStatus(describe(err));
    }
  }

  // showWorkspaces offers the signed-in account's workspaces.
  function showWorkspaces(acct, focus = true) {
    $("account-form").hidden = true;
    $("workspace-form").hidden = false;
    $("account-who").textContent = "Signed in as " + acct.email + ".";
    const sel = clear($("account-workspace"));
    for (const w of acct.workspaces || []) sel.append(el("option", { value: w.org_id }, w.name || w.org_id));
    $("account-open").disabled = sel.options.length === 0;
    accountStatus(sel.options.length === 0 ? "This account owns no workspace." : "");
    if (focus) sel.focus();
  }

  async function openWorkspace(ev) {
    ev.preventDefault();
    const sel = $("account-workspace");
    const org = sel.value;
    if (!org) return;
    try {
      const k = await accountCall("POST", "/v1/public/auth/workspaces/" + encodeURIComponent(org) + "/console-key");
      workspace = org;
      sessionStorage.setItem(ACCOUNT_STORE, org);
      sessionStorage.setItem(LABEL_STORE, ($("account-who").textContent.replace(/^Signed in as |\.$/g, "")) + " · " + sel.selectedOptions[0].textContent);
      useKey(k.api_key);
      accountStatus("");
      decisionsLoaded = activityLoaded = false;
      if (location.hash === "" || location.hash === "#/signin") location.hash = "#/decisions"; else route();
    } catch (err) {
      accountStatus(describe(err));
    }
  }

  // leaveAccount signs the account out from the sign-in page.
  async function leaveAccount() {
    try {
      await accountCall("DELETE", "/v1/public/auth/session");
    } catch (err) {
      if (!(err instanceof APIError && err.status === 401)) { accountStatus(describe(err)); return; }
    }
    location.replace(location.pathname);
  }

  // probeSession shows the workspaces of an account signed in already,
  // taking focus only if the operator is not typing elsewhere.
  async function probeSession() {
    let acct;
    try {
      acct = await accountCall("GET", "/v1/public/auth/session");
    } catch (err) {
      return; // 401: no session, the forms stay as they are
    }
    const a = document.activeElement;
    showWorkspaces(acct, !a || a === document.body || a.id === "account-email" || a.id === "main");
  }

  // accountBack returns to the e-mail step: another address, or a new code.
  function accountBack() {
    $("account-code-step").hidden = true;
    $("account-send").hidden = false;
    $("account-email").readOnly = false;
    $("account-code").value = "";
    accountStatus("");
    $("account-email").focus();
  }

  // ---- views -----------------------------------------------------------

  // views maps a route to its section and loader.
  const views = {
    signin: { section: "view-signin" },
    decisions: { section: "view-decisions", nav: "decisions", load: () => { if (!decisionsLoaded) loadDecisions(); } },
    dossier: { section: "view-dossier", nav: "decisions", load: (id) => loadDossier(id) },
    activity: { section: "view-activity", nav: "activity", load: () => { if (!activityLoaded) loadActivity(); } },
    escalations: { section: "view-escalations", nav: "escalations", load: () => loadEscalations() },
    policies: { section: "view-policies", nav: "policies", load: () => loadPolicies() },
    ledger: { section: "view-ledger", nav: "ledger", load: () => loadLedger() },
  };

  function show(name, arg) {
    const v = views[name];
    for (const other of Object.values(views)) $(other.section).hidden = other !== v;
    const signedIn = name !== "signin";
    $("nav").hidden = !signedIn;
    $("who").hidden = !signedIn;
    $("who-key").textContent = !signedIn ? "" : workspace ? "Signed in as " + (sessionStorage.getItem(LABEL_STORE) || workspace)
      : "Signed in with " + apiKey.slice(0, 12) + "…";
    for (const a of document.querySelectorAll("#nav a")) {
      if (a.dataset.view === v.nav) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
    }
    if (v.load) v.load(arg);
  }

  function route() {
    // The skip link's #main moves focus to the content; it is not a view.
    if (location.hash === "#main") return;
    view++;
    if (!apiKey) { show("signin"); return; }
    const h = location.hash;
    let m;
    if ((m = /^#\/dossiers\/([0-9a-f-]{36})$/.exec(h))) show("dossier", m[1]);
    else if (h === "#/activity") show("activity");
    else if (h === "#/escalations") show("escalations");
    else if (h === "#/policies") show("policies");
    else if (h === "#/ledger") show("ledger");
    else show("decisions");
  }

  // ---- decisions -------------------------------------------------------

  // rfc3339 reads a datetime-local value as UTC ("" stays "").
  function rfc3339(v) {
    if (!v) return "";
    const d = new Date(v + (v.length === 16 ? ":00" : "") + "Z");
    return isNaN(d) ? "" : d.toISOString();
  }

  // The live list re-runs the last query shown (not filters being edited)
  // every LIVE_MS, one request at a time.
  const LIVE_MS = 10000;
  let liveTimer = 0, liveBusy = false, lastDecisionsQuery = null;

  function setLive() {
    clearInterval(liveTimer);
    liveTimer = 0;
    const on = $("f-live").checked;
    if (on) liveTimer = setInterval(refreshLive, LIVE_MS);
    $("decisions-live").textContent = on ? "The list refreshes every 10 seconds." : "The list no longer refreshes.";
  }

  async function refreshLive() {
    if (liveBusy || !apiKey || $("view-decisions").hidden || !lastDecisionsQuery) return;
    liveBusy = true;
    try { await loadDecisions(true); } finally { liveBusy = false; }
  }

  function stopLive() {
    clearInterval(liveTimer);
    liveTimer = 0;
    $("f-live").checked = false;
    $("decisions-live").textContent = "";
  }

  async function loadDecisions(live) {
    const mine = view;
    const status = $("decisions-status");
    if (live === true) {
      // Quietly: only new rows are announced, in the live region.
      try {
        const ans = await getJSON("/v1/console/decisions?" + lastDecisionsQuery);
        if (mine !== view || !$("f-live").checked) return;
        const fresh = showDecisions(ans, true);
        status.dataset.state = "done";
        if (fresh > 0) $("decisions-live").textContent = fresh + " new decision" + (fresh === 1 ? "" : "s") + " at " + new Date().toISOString().slice(11, 19) + " UTC.";
      } catch (err) {
        if (mine !== view) return;
        status.textContent = "Could not refresh decisions: " + describe(err);
        status.dataset.state = "error";
      }
      return;
    }
    const q = new URLSearchParams();
    const outcome = $("f-outcome").value, mode = $("f-mode").value, workflow = $("f-workflow").value.trim();
    if (outcome) q.set("outcome", outcome);
    if (mode) q.set("mode", mode);
    if (workflow) q.set("workflow", workflow);
    const from = rfc3339($("f-from").value), to = rfc3339($("f-to").value);
    if (from) q.set("from", from);
    if (to) q.set("to", to);
    q.set("limit", $("f-limit").value || "50");
    status.textContent = "Loading decisions…";
    status.dataset.state = "loading";
    try {
      const ans = await getJSON("/v1/console/decisions?" + q);
      if (mine !== view) return;
      lastDecisionsQuery = q.toString();
      showDecisions(ans, false);
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

  // showDecisions draws the rows and returns how many are new since the
  // last drawing (when marking them). Focus on a row's link stays on it.
  function showDecisions(ans, markNew) {
    const rows = $("decisions-rows");
    const before = new Set(Array.from(rows.children, (r) => r.dataset.dossierId));
    const focused = document.activeElement && rows.contains(document.activeElement) ? document.activeElement.closest("tr").dataset.dossierId : "";
    clear(rows);
    let fresh = 0;
    for (const d of ans.decisions) {
      const isNew = markNew && !before.has(d.dossier_id);
      if (isNew) fresh++;
      rows.append(el("tr", { "data-dossier-id": d.dossier_id, "data-outcome": d.outcome, "data-mode": d.mode, "data-workflow": d.workflow_key, "data-new": isNew ? "true" : null },
        el("td", {}, el("time", { datetime: d.created_at }, d.created_at)),
        el("td", {}, el("span", { class: "badge " + d.outcome.toLowerCase() }, d.outcome)),
        el("td", {}, d.mode),
        el("td", {}, d.workflow_key || "—"),
        el("td", {}, d.decision_type || "—"),
        el("td", {}, el("a", { href: "#/dossiers/" + d.dossier_id, "aria-label": "Open dossier " + d.dossier_id }, d.dossier_id.slice(0, 8) + "…"))));
    }
    if (focused) {
      const again = rows.querySelector('tr[data-dossier-id="' + CSS.escape(focused) + '"] a');
      if (again) again.focus({ preventScroll: true });
    }
    return fresh;
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
      for (const c of rep.checks || []) checks.append(checkItem(c.name, c.ok, c.reason, c.detail));
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

  // hbars draws one horizontal bar per item: [{label, value, path, text}];
  // mark writes each number into the page (metric, or num outside the
  // activity answer).
  function hbars(container, items, label, mark) {
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
      list.append(el("li", {}, it.label + ": ", (mark || metric)(it.path, it.value, it.text)));
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
      loadShadowReport(mine, a.from, a.to);
      status.textContent = "From " + a.from + " to " + a.to + ", by " + a.bucket + ".";
      status.dataset.state = "done";
    } catch (err) {
      if (mine !== view) return;
      status.textContent = "Could not load activity: " + describe(err);
      status.dataset.state = "error";
    }
  }

  // loadShadowReport shows what the org's SHADOW decisions in the activity
  // window would have been under enforcement. Its numbers carry data-field
  // "shadow.<path in the report>", apart from the activity's data-metric.
  async function loadShadowReport(mine, from, to) {
    const status = $("shadow-status");
    status.textContent = "Loading the shadow report…";
    status.dataset.state = "loading";
    clear($("chart-shadow"));
    clear($("shadow-rows"));
    const total = clear($("shadow-total"));
    try {
      const r = await getJSON("/v1/protocol/shadow-reports?" + new URLSearchParams({ from, to }));
      if (mine !== view) return;
      const shadowNum = (field, value, text) => num("shadow." + field, value, text);
      total.dataset.field = "shadow.total";
      total.dataset.value = String(r.total);
      total.textContent = String(r.total);
      hbars($("chart-shadow"), OUTCOMES.map((o) => ({ key: o, label: o, value: (r.by_outcome || {})[o] || 0, path: "by_outcome." + o })),
        "Shadow decisions by the outcome enforcement would have given", shadowNum);
      const rows = $("shadow-rows");
      (r.by_workflow || []).forEach((w, i) => {
        const tr = el("tr", { "data-workflow": w.workflow_key }, el("th", { scope: "row" }, w.workflow_key || "(none)"),
          el("td", {}, num("shadow.by_workflow." + i + ".total", w.total)));
        for (const o of OUTCOMES) tr.append(el("td", {}, num("shadow.by_workflow." + i + ".by_outcome." + o, (w.by_outcome || {})[o] || 0)));
        rows.append(tr);
      });
      if ((r.by_workflow || []).length === 0) rows.append(el("tr", {}, el("td", { colspan: "6" }, "No shadow decisions in this window.")));
      const blocked = (r.by_outcome || {}).BLOCK || 0;
      status.textContent = blocked + " of " + r.total + " shadow decision" + (r.total === 1 ? "" : "s") + " would have been blocked, from " + r.from + " to " + r.to + ".";
      status.dataset.state = "done";
    } catch (err) {
      if (mine !== view) return;
      status.textContent = "Could not load the shadow report: " + describe(err);
      status.dataset.state = "error";
    }
  }

  // ---- checks shown as ticks and crosses --------------------------------

  function checkItem(name, ok, reason, detail) {
    const li = el("li", { class: ok ? "pass" : "fail", "data-check": name, "data-ok": String(ok) },
      el("span", { class: "mark", "aria-hidden": "true" }, ok ? "✓" : "✗"),
      el("span", { class: "visually-hidden" }, ok ? "Passed: " : "Failed: "),
      el("span", { class: "name" }, name));
    if (!ok && reason) li.append(" ", el("code", { class: "reason" }, reason));
    if (detail) li.append(el("span", { class: "detail" }, detail));
    return li;
  }

  // num is a number shown outside the charts, with its exact value for a
  // test (data-field, not data-metric: the charts' test reads those).
  function num(field, value, text) {
    return el("span", { class: "num", "data-field": field, "data-value": String(value) }, text === undefined ? String(value) : text);
  }

  // ---- escalations -----------------------------------------------------

  // secondsLeft is the time to a deadline by this browser's clock.
  function secondsLeft(at) { return Math.round((Date.parse(at) - Date.now()) / 1000); }
  function duration(s) {
    const a = Math.abs(s), h = Math.floor(a / 3600), m = Math.floor((a % 3600) / 60), sec = a % 60;
    const text = (h ? h + " h " : "") + (h || m ? m + " min " : "") + sec + " s";
    return s >= 0 ? text + " left" : "passed " + text + " ago";
  }

  async function loadEscalations() {
    const mine = view;
    const status = $("escalations-status");
    status.textContent = "Loading open escalations…";
    status.dataset.state = "loading";
    try {
      const ans = await getJSON("/v1/console/escalations");
      if (mine !== view) return;
      const rows = clear($("escalations-rows"));
      for (const x of ans.escalations || []) {
        const left = secondsLeft(x.expires_at);
        const transitions = el("ol", { class: "transitions" });
        for (const tr of x.transitions || []) {
          transitions.append(el("li", { "data-status": tr.status }, tr.status + " at ", el("time", { datetime: tr.at }, tr.at),
            tr.reason ? " (" + tr.reason + ")" : ""));
        }
        const note = el("span", { class: "row-note", role: "status" });
        const cancel = el("button", { type: "button", class: "secondary", "aria-label": "Cancel escalation " + x.escalation_id }, "Cancel");
        const tr = el("tr", { "data-escalation-id": x.escalation_id, "data-status": x.status, "data-intent-id": x.intent_id,
          "data-created-at": x.created_at, "data-expires-at": x.expires_at },
          el("td", {}, el("span", { class: "badge pending" }, x.status)),
          el("td", {}, el("code", {}, x.intent_id)),
          el("td", {}, el("time", { datetime: x.created_at }, x.created_at)),
          el("td", {}, el("time", { datetime: x.expires_at }, x.expires_at), el("br", {}),
            el("span", { class: "num left", "data-seconds-left": String(left) }, duration(left))),
          el("td", {}, transitions),
          el("td", {}, cancel, " ", note));
        cancel.addEventListener("click", () => cancelEscalation(x.escalation_id, tr, cancel, note));
        rows.append(tr);
      }
      const n = (ans.escalations || []).length;
      status.textContent = n === 0 ? "No open escalations." : n + " open escalation" + (n === 1 ? "" : "s") + ", oldest first.";
      status.dataset.state = "done";
      status.dataset.count = String(n);
    } catch (err) {
      if (mine !== view) return;
      status.textContent = "Could not load escalations: " + describe(err);
      status.dataset.state = "error";
    }
  }

  // cancelEscalation cancels one escalation; the row leaves the list once
  // the server says so, and focus moves to the status line.
  async function cancelEscalation(id, row, button, note) {
    const status = $("escalations-status");
    button.disabled = true;
    note.textContent = "Cancelling…";
    try {
      const res = await call("/v1/authority/escalations/" + encodeURIComponent(id), { method: "DELETE" });
      const body = await res.json().catch(() => null);
      if (res.status === 403) {
        note.textContent = "This key may not cancel escalations: it needs decision:write or escalation:write.";
        row.dataset.cancel = "forbidden";
        button.disabled = false;
        return;
      }
      if (!res.ok) throw new APIError(res.status, body);
      row.remove();
      const left = $("escalations-rows").children.length;
      status.textContent = "Escalation " + id + " is " + ((body && body.status) || "cancelled") + ". " +
        (left === 0 ? "No open escalations." : left + " open escalation" + (left === 1 ? "" : "s") + ".");
      status.dataset.count = String(left);
      status.dataset.cancelled = id;
      status.focus();
    } catch (err) {
      note.textContent = "Could not cancel: " + describe(err);
      row.dataset.cancel = "error";
      button.disabled = false;
    }
  }

  // ---- policies --------------------------------------------------------

  async function loadPolicies() {
    const mine = view;
    const status = $("policies-status");
    status.textContent = "Loading policy versions…";
    status.dataset.state = "loading";
    try {
      loadDrafts(mine);
      const ans = await getJSON("/v1/policies");
      if (mine !== view) return;
      const rows = clear($("policies-rows"));
      const from = clear($("d-from")), to = clear($("d-to"));
      const bundles = ans.bundles || [];
      for (const b of bundles) {
        rows.append(el("tr", { "data-version": b.version, "data-active": String(!!b.active) },
          el("th", { scope: "row" }, el("code", {}, b.version)),
          el("td", {}, b.active ? el("span", { class: "badge active" }, "Active") : ""),
          el("td", {}, b.bundle_id),
          el("td", {}, b.mode),
          el("td", {}, num("rule_count", b.rule_count)),
          el("td", {}, el("time", { datetime: b.published_at }, b.published_at)),
          el("td", {}, el("code", { class: "digest" }, b.bundle_digest))));
        for (const sel of [from, to]) sel.append(el("option", { value: b.version }, b.version + (b.active ? " (active)" : "")));
      }
      // By default the diff compares the active version with the newest
      // other one.
      const newest = (bundles[bundles.length - 1] || {}).version;
      const active = ans.active_version || newest;
      const other = bundles.map((b) => b.version).filter((v) => v !== active).pop();
      if (other) { from.value = other; to.value = active; }
      $("policy-diff").hidden = bundles.length < 2;
      status.textContent = bundles.length + " version" + (bundles.length === 1 ? "" : "s") +
        (ans.active_version ? "; active: " + ans.active_version + "." : "; none active.");
      status.dataset.state = "done";
    } catch (err) {
      if (mine !== view) return;
      status.textContent = "Could not load policies: " + describe(err);
      status.dataset.state = "error";
    }
  }

  function outcomeText(d) {
    return d ? (d.outcome || "—") + ((d.reason_codes || []).length ? " [" + d.reason_codes.join(", ") + "]" : "") : "—";
  }

  async function loadDiff(ev) {
    ev.preventDefault();
    const mine = view;
    const status = $("diff-status");
    const out = $("diff-result");
    out.hidden = true;
    status.textContent = "Comparing…";
    status.dataset.state = "loading";
    const q = new URLSearchParams({ from: $("d-from").value, to: $("d-to").value });
    try {
      const d = await getJSON("/v1/policies/diff?" + q);
      if (mine !== view) return;
      const dl = clear($("diff-summary"));
      fact(dl, "From", d.from);
      fact(dl, "To", d.to);
      fact(dl, "Identical", d.identical ? "yes" : "no");
      fact(dl, "Bundle id", d.bundle_id ? d.bundle_id.from + " → " + d.bundle_id.to : "unchanged");
      fact(dl, "Mode", d.mode ? d.mode.from + " → " + d.mode.to : "unchanged");
      fact(dl, "Default", d.default ? outcomeText(d.default.from) + " → " + outcomeText(d.default.to) : "unchanged");
      fact(dl, "Rule order", d.reordered ? "changed" : "unchanged");
      dl.dataset.identical = String(!!d.identical);
      dl.dataset.defaultChanged = String(!!d.default);
      const ruleList = (id, ids, none) => {
        const list = clear($(id));
        for (const r of ids) list.append(el("li", { "data-rule": r }, el("code", {}, r)));
        if (ids.length === 0) list.append(el("li", { class: "none" }, none));
      };
      ruleList("diff-added", d.rules_added || [], "None added.");
      ruleList("diff-removed", d.rules_removed || [], "None removed.");
      const changed = clear($("diff-changed"));
      for (const c of d.rules_changed || []) {
        const li = el("li", { "data-rule": c.rule_id, "data-fields": (c.fields || []).join(",") }, el("code", {}, c.rule_id), ": " + (c.fields || []).join(", "));
        if ((c.fields || []).includes("outcome")) li.append(" (" + c.from.outcome + " → " + c.to.outcome + ")");
        changed.append(li);
      }
      if ((d.rules_changed || []).length === 0) changed.append(el("li", { class: "none" }, "None changed."));
      for (const [id, n] of [["diff-added-count", (d.rules_added || []).length], ["diff-removed-count", (d.rules_removed || []).length], ["diff-changed-count", (d.rules_changed || []).length]]) {
        $(id).dataset.value = String(n);
        $(id).textContent = String(n);
      }
      out.hidden = false;
      status.textContent = d.identical ? "The two versions decide alike." : "The versions differ.";
      status.dataset.state = "done";
    } catch (err) {
      if (mine !== view) return;
      status.textContent = "Could not compare: " + describe(err);
      status.dataset.state = "error";
    }
  }

  // ---- replays --------------------------------------------------------

  const FORBIDDEN_REPLAY = "This key may not read drafts or run replays: it needs policy:read.";

  // loadDrafts fills the replay form's list of drafts.
  async function loadDrafts(mine) {
    const status = $("drafts-status"), form = $("replay-form");
    status.textContent = "Loading drafts…";
    status.dataset.state = "loading";
    try {
      const ans = await getJSON("/v1/policies/drafts");
      if (mine !== view) return;
      const sel = $("r-draft"), keep = sel.value;
      clear(sel);
      for (const d of ans.drafts || []) sel.append(el("option", { value: d.name }, d.name + " (revision " + d.revision + ")"));
      if (keep && (ans.drafts || []).some((d) => d.name === keep)) sel.value = keep;
      // By default the window is the last 24 hours by this computer's clock.
      if (!$("r-from").value) $("r-from").value = new Date(Date.now() - 864e5).toISOString().slice(0, 19);
      const n = (ans.drafts || []).length;
      form.hidden = n === 0;
      status.textContent = n === 0 ? "No drafts: put one with PUT /v1/policies/drafts/{name} to replay it." : n + " draft" + (n === 1 ? "" : "s") + ".";
      status.dataset.state = "done";
    } catch (err) {
      if (mine !== view) return;
      form.hidden = true;
      status.textContent = err.status === 403 ? FORBIDDEN_REPLAY : "Could not load drafts: " + describe(err);
      status.dataset.state = err.status === 403 ? "forbidden" : "error";
    }
  }

  // runReplay starts a replay of the chosen draft; a big window is queued
  // by the server (202) and its status is read again until it is done.
  async function runReplay(ev) {
    ev.preventDefault();
    const mine = view;
    const status = $("replay-status"), out = $("replay-result"), button = $("r-run");
    const say = (state, text) => { status.dataset.state = state; status.textContent = text; };
    const from = rfc3339($("r-from").value), to = rfc3339($("r-to").value);
    if (!from) {
      say("error", "Enter the time to replay from.");
      $("r-from").setAttribute("aria-invalid", "true");
      $("r-from").focus();
      return;
    }
    $("r-from").removeAttribute("aria-invalid");
    const body = { draft: $("r-draft").value, from, examples: 5 };
    if (to) body.to = to;
    out.hidden = true;
    button.disabled = true;
    say("loading", "Starting the replay of " + body.draft + "…");
    try {
      const res = await call("/v1/policies/replays", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
      let r = await res.json().catch(() => null);
      if (!res.ok) throw new APIError(res.status, r);
      while (r.status === "queued" || r.status === "running") {
        if (mine !== view) return;
        say("running", "Replaying: " + r.processed + " of " + r.total + " decisions…");
        await new Promise((done) => setTimeout(done, 1000));
        if (mine !== view) return;
        r = await getJSON("/v1/policies/replays/" + encodeURIComponent(r.replay_id));
      }
      if (mine !== view) return;
      if (r.status !== "done") throw new Error("the replay failed: " + (r.failure || r.status));
      showReplay(r);
      const x = r.result;
      say("done", "The draft " + body.draft + " would change " + x.changed + " of " + x.replayed + " replayed outcome" + (x.replayed === 1 ? "" : "s") +
        " (" + x.more_restrictive + " more restrictive, " + x.less_restrictive + " less)" + (x.skipped ? "; " + x.skipped + " could not be replayed." : "."));
      status.focus();
    } catch (err) {
      if (mine !== view) return;
      say(err.status === 403 ? "forbidden" : "error", err.status === 403 ? FORBIDDEN_REPLAY : "Could not replay: " + describe(err));
    } finally {
      button.disabled = false;
    }
  }

  // showReplay draws a done replay; every number carries data-field
  // "replay.<path in its result>".
  function showReplay(r) {
    const x = r.result, at = (field, value) => num("replay." + field, value);
    const out = $("replay-result");
    out.dataset.replayId = r.replay_id;
    const dl = clear($("replay-summary"));
    fact(dl, "Draft", (r.candidate && r.candidate.draft) + " (as version " + r.policy_version + ")");
    fact(dl, "Window (UTC)", r.from + " to " + r.to);
    for (const [label, f] of [["Decisions in the window", "total"], ["Replayed", "replayed"], ["Not replayable", "skipped"], ["Outcome changed", "changed"],
      ["Outcome unchanged", "unchanged"], ["More restrictive", "more_restrictive"], ["Less restrictive", "less_restrictive"], ["Same outcome, other reasons", "reason_codes_changed"]]) {
      dl.append(el("dt", {}, label), el("dd", {}, at(f, x[f])));
    }
    for (const k of Object.keys(x.skipped_by_reason || {}).sort()) dl.append(el("dt", {}, "Not replayable: " + k), el("dd", {}, at("skipped_by_reason." + k, x.skipped_by_reason[k])));
    const dirs = clear($("replay-direction-rows"));
    for (const k of Object.keys(x.by_direction || {}).sort()) {
      dirs.append(el("tr", { "data-direction": k }, el("th", { scope: "row" }, k.replace("->", " → ")), el("td", {}, at("by_direction." + k, x.by_direction[k]))));
    }
    if (dirs.children.length === 0) dirs.append(el("tr", {}, el("td", { colspan: "2" }, "No outcome would change.")));
    const wfs = clear($("replay-workflow-rows"));
    for (const k of Object.keys(x.by_workflow || {}).sort()) {
      const w = x.by_workflow[k], list = el("ul", { class: "directions" });
      for (const d of Object.keys(w.by_direction || {}).sort()) list.append(el("li", {}, d.replace("->", " → ") + ": ", at("by_workflow." + k + ".by_direction." + d, w.by_direction[d])));
      wfs.append(el("tr", { "data-workflow": k }, el("th", { scope: "row" }, k || "(none)"), el("td", {}, at("by_workflow." + k + ".replayed", w.replayed)),
        el("td", {}, at("by_workflow." + k + ".changed", w.changed)), el("td", {}, list)));
    }
    if (wfs.children.length === 0) wfs.append(el("tr", {}, el("td", { colspan: "4" }, "No decisions replayed.")));
    const ex = clear($("replay-examples"));
    for (const e of x.examples || []) {
      ex.append(el("li", { "data-dossier-id": e.dossier_id }, el("a", { href: "#/dossiers/" + e.dossier_id }, e.dossier_id.slice(0, 8) + "…"),
        " " + (e.workflow_key || "(no workflow)") + ": " + outcomeText(e.recorded) + " → " + outcomeText(e.replayed)));
    }
    if (ex.children.length === 0) ex.append(el("li", { class: "none" }, "None changed."));
    out.hidden = false;
  }

  // ---- ledger ----------------------------------------------------------

  // ledger holds what the ledger view shows, which is exactly what
  // "Verify in my browser" checks.
  const ledger = { checkpoint: null, key: "", entry: null, proof: null };

  async function loadLedger() {
    const mine = view;
    const status = $("ledger-status");
    status.textContent = "Loading the ledger…";
    status.dataset.state = "loading";
    for (const id of ["ledger-head", "ledger-checkpoint"]) clear($(id));
    try {
      const [page, cp, key] = await Promise.all([
        getJSON("/v1/protocol/audit/ledger?limit=1"),
        getJSON("/v1/protocol/audit/ledger/checkpoint").catch((err) => { if (err.status === 404) return null; throw err; }),
        call("/.well-known/clearance-ledger-key", { anonymous: true, headers: { Accept: "text/plain" } }).then(async (res) => {
          if (!res.ok) throw new APIError(res.status, await res.json().catch(() => null));
          return (await res.text()).trim();
        }),
      ]);
      if (mine !== view) return;
      ledger.checkpoint = cp;
      ledger.key = key;
      const head = $("ledger-head");
      head.append(el("dt", {}, "Entries"), el("dd", {}, num("head.seq", page.head.seq)));
      fact(head, "Newest entry hash", page.head.entry_hash);
      const c = $("ledger-checkpoint");
      if (cp) {
        c.append(el("dt", {}, "Tree size"), el("dd", {}, num("checkpoint.tree_size", cp.tree_size)));
        fact(c, "Root hash", cp.root_hash);
        fact(c, "Origin", cp.origin);
        $("ledger-note").textContent = cp.checkpoint;
        if (!$("l-seq").value) $("l-seq").value = String(cp.tree_size);
        $("l-seq").max = String(cp.tree_size);
      } else {
        fact(c, "Checkpoint", "None signed yet: entries are proven once the ledger is sealed.");
        $("ledger-note").textContent = "";
      }
      $("ledger-key").textContent = key;
      status.textContent = "";
      status.dataset.state = "done";
    } catch (err) {
      if (mine !== view) return;
      status.textContent = "Could not load the ledger: " + describe(err);
      status.dataset.state = "error";
    }
  }

  async function fetchProof(ev) {
    ev.preventDefault();
    const mine = view;
    const status = $("proof-status");
    const seq = parseInt($("l-seq").value, 10), size = $("l-size").value.trim();
    ledger.entry = ledger.proof = null;
    $("verify-browser").disabled = true;
    $("proof-result").hidden = true;
    resetBrowserChecks();
    if (!(seq >= 1)) {
      status.textContent = "Enter an entry number from 1.";
      status.dataset.state = "error";
      $("l-seq").setAttribute("aria-invalid", "true");
      $("l-seq").focus();
      return;
    }
    $("l-seq").removeAttribute("aria-invalid");
    status.textContent = "Fetching entry " + seq + " and its proof…";
    status.dataset.state = "loading";
    const q = new URLSearchParams({ seq: String(seq) });
    if (size) q.set("tree_size", size);
    try {
      const [page, proof] = await Promise.all([
        getJSON("/v1/protocol/audit/ledger?" + new URLSearchParams({ after_seq: String(seq - 1), limit: "1" })),
        getJSON("/v1/protocol/audit/ledger/proofs/inclusion?" + q),
      ]);
      if (mine !== view) return;
      const entry = (page.entries || [])[0];
      if (!entry || entry.seq !== seq) throw new Error("the ledger has no entry " + seq);
      ledger.entry = entry;
      ledger.proof = proof;
      $("proof-entry").textContent = JSON.stringify(entry, null, 2);
      const dl = clear($("proof-facts"));
      dl.append(el("dt", {}, "Entry"), el("dd", {}, num("proof.seq", proof.seq)));
      dl.append(el("dt", {}, "In a tree of"), el("dd", {}, num("proof.tree_size", proof.tree_size), " entries"));
      fact(dl, "Leaf hash (server's)", proof.leaf_hash);
      dl.append(el("dt", {}, "Proof hashes"), el("dd", {}, num("proof.length", (proof.proof || []).length)));
      const hashes = clear($("proof-hashes"));
      for (const h of proof.proof || []) hashes.append(el("li", {}, el("code", {}, h)));
      $("proof-result").hidden = false;
      $("verify-browser").disabled = !ledger.checkpoint;
      status.textContent = ledger.checkpoint ? "Fetched. Verify it here against the checkpoint above and the published key."
        : "Fetched, but there is no checkpoint to verify it against.";
      status.dataset.state = "done";
    } catch (err) {
      if (mine !== view) return;
      status.textContent = "Could not fetch the proof: " + describe(err);
      status.dataset.state = "error";
    }
  }

  function resetBrowserChecks() {
    clear($("browser-checks"));
    const v = $("browser-verdict");
    v.textContent = "";
    v.dataset.state = "";
  }

  // Byte helpers for the checks below; WebCrypto does the hashing and the
  // signature, nothing else is trusted.
  const utf8 = new TextEncoder();
  async function sha256(...parts) { return new Uint8Array(await crypto.subtle.digest("SHA-256", concat(...parts))); }
  function concat(...parts) {
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let i = 0;
    for (const p of parts) { out.set(p, i); i += p.length; }
    return out;
  }
  function unbase64(s) {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s) || s.length % 4 !== 0) throw new Error("not standard base64");
    return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
  }
  function hex(b) { return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join(""); }
  function sameBytes(a, b) { return a.length === b.length && a.every((x, i) => x === b[i]); }

  // canonicalJSON is RFC 8785 for the JSON types: members sorted by UTF-16
  // code units, ECMAScript number and string forms, no whitespace.
  function canonicalJSON(v) {
    if (v === null || typeof v === "boolean") return JSON.stringify(v);
    if (typeof v === "number") {
      if (!Number.isFinite(v)) throw new Error("a number JSON cannot hold");
      return JSON.stringify(v);
    }
    if (typeof v === "string") {
      if (!v.isWellFormed()) throw new Error("a string with a lone surrogate");
      return JSON.stringify(v);
    }
    if (Array.isArray(v)) return "[" + v.map(canonicalJSON).join(",") + "]";
    if (typeof v === "object") {
      return "{" + Object.keys(v).sort().map((k) => canonicalJSON(k) + ":" + canonicalJSON(v[k])).join(",") + "}";
    }
    throw new Error("not a JSON value");
  }

  // parseVerifierKey reads a signed-note verifier key, name+hash+base64(0x01
  // || Ed25519 public key), and checks its key hash: the first four bytes,
  // big-endian, of SHA-256(name || "\n" || 0x01 || public key).
  async function parseVerifierKey(text) {
    const m = /^([^+\s]+)\+([0-9a-f]{8})\+([A-Za-z0-9+/=]+)$/.exec(text);
    if (!m) throw Object.assign(new Error("not name+hash+key"), { reason: "KEY_MALFORMED" });
    const raw = unbase64(m[3]);
    if (raw.length !== 33 || raw[0] !== 1) throw Object.assign(new Error("not an Ed25519 key"), { reason: "KEY_NOT_ED25519" });
    const sum = await sha256(utf8.encode(m[1] + "\n"), raw);
    if (hex(sum.subarray(0, 4)) !== m[2]) throw Object.assign(new Error("the key hash " + m[2] + " is not the key's " + hex(sum.subarray(0, 4))), { reason: "KEY_HASH_MISMATCH" });
    const key = await crypto.subtle.importKey("raw", raw.subarray(1), { name: "Ed25519" }, false, ["verify"]);
    return { name: m[1], hash: m[2], key };
  }

  // openNote splits a signed note into its text (ending in "\n") and its
  // signature lines "— name base64(key hash || signature)".
  function openNote(note) {
    const i = note.lastIndexOf("\n\n");
    if (i < 0 || !note.endsWith("\n")) throw new Error("no signature block");
    const sigs = note.slice(i + 2, -1).split("\n").map((line) => {
      const m = /^\u2014 (\S+) (\S+)$/.exec(line);
      if (!m) throw new Error("malformed signature line");
      return { name: m[1], raw: unbase64(m[2]) };
    });
    return { text: note.slice(0, i + 1), sigs };
  }

  // recordRoot runs an RFC 9162 inclusion proof as golang.org/x/mod's tlog
  // lays it out (the sibling nearest the root last) for leaf n of the tree
  // [lo, hi), returning the root it leads to.
  async function recordRoot(proof, lo, hi, n, leaf) {
    if (hi - lo === 1) {
      if (proof.length !== 0) throw new Error("the proof has more hashes than a tree of this size needs");
      return leaf;
    }
    if (proof.length === 0) throw new Error("the proof has fewer hashes than a tree of this size needs");
    let k = 1;
    while (k * 2 < hi - lo) k *= 2;
    const last = proof[proof.length - 1], rest = proof.slice(0, -1);
    if (n < lo + k) return sha256(Uint8Array.of(1), await recordRoot(rest, lo, lo + k, n, leaf), last);
    return sha256(Uint8Array.of(1), last, await recordRoot(rest, lo + k, hi, n, leaf));
  }

  // verifyInBrowser checks, here, that the entry shown is in the tree the
  // checkpoint shown signs, and that the published ledger key signed it.
  async function verifyInBrowser() {
    const mine = view;
    const list = clear($("browser-checks")), verdict = $("browser-verdict");
    const say = (state, text) => { verdict.dataset.state = state; verdict.textContent = text; };
    const { checkpoint: cp, key: keyText, entry, proof } = ledger;
    if (!cp || !entry || !proof) { say("error", "Fetch an entry's proof first."); return; }
    say("loading", "Verifying in this browser…");
    let allOK = true;
    const check = (name, ok, reason, detail) => { allOK = allOK && ok; list.append(checkItem(name, ok, reason, detail)); };
    try {
      // 1. The published key.
      let vk = null;
      try {
        vk = await parseVerifierKey(keyText);
        check("ledger key", true, "", "Ed25519 key " + vk.name + "+" + vk.hash + ", from /.well-known/clearance-ledger-key.");
      } catch (err) {
        check("ledger key", false, err.reason || "KEY_MALFORMED", String(err.message));
      }
      // 2. The checkpoint's signature and body.
      let size = -1, root = null;
      try {
        const note = openNote(cp.checkpoint);
        const sig = vk && note.sigs.find((s) => s.name === vk.name && s.raw.length === 68 && hex(s.raw.subarray(0, 4)) === vk.hash);
        if (!vk) check("checkpoint signature", false, "NO_KEY", "There is no key to check it with.");
        else if (!sig) check("checkpoint signature", false, "NO_SIGNATURE_BY_KEY", "No signature line of " + vk.name + "+" + vk.hash + ".");
        else if (await crypto.subtle.verify({ name: "Ed25519" }, vk.key, sig.raw.subarray(4), utf8.encode(note.text))) {
          check("checkpoint signature", true, "", "Ed25519 signature by " + vk.name + " over the checkpoint's text.");
        } else check("checkpoint signature", false, "SIGNATURE_INVALID", "The signature does not verify with the published key.");
        const lines = note.text.slice(0, -1).split("\n");
        if (lines.length < 3 || !/^(0|[1-9][0-9]*)$/.test(lines[1])) throw new Error("the text is not origin, size, root");
        const r = unbase64(lines[2]);
        if (r.length !== 32) throw new Error("the root is not a SHA-256 hash");
        size = Number(lines[1]);
        root = r;
        // One ledger key signs every org's checkpoints: the origin line
        // ("<issuer>/ledger/<org_id>") says whose log this is.
        const ours = lines[0].endsWith("/ledger/" + entry.org_id);
        const same = ours && lines[0] === cp.origin && size === cp.tree_size && lines[2] === cp.root_hash;
        check("checkpoint body", same, same ? "" : (ours ? "CHECKPOINT_MISMATCH" : "CHECKPOINT_OF_ANOTHER_LOG"),
          "Origin " + lines[0] + ", " + size + " entries, root " + lines[2] +
          (same ? "." : ours ? "; the page was told otherwise." : "; it is not the ledger of the entry's org " + entry.org_id + "."));
      } catch (err) {
        check("checkpoint signature", false, "NOTE_MALFORMED", String(err.message));
      }
      // 3. The entry: its hash, and its leaf hash, recomputed here.
      const withoutHash = Object.assign({}, entry);
      delete withoutHash.entry_hash;
      const entryHash = "sha256:" + hex(await sha256(utf8.encode(canonicalJSON(withoutHash))));
      check("entry hash", entryHash === entry.entry_hash, entryHash === entry.entry_hash ? "" : "ENTRY_HASH_MISMATCH",
        "SHA-256 of the entry's RFC 8785 form without entry_hash: " + entryHash + ".");
      const leaf = await sha256(Uint8Array.of(0), utf8.encode(canonicalJSON(entry)));
      const leafOK = proof.leaf_hash === base64(leaf) && proof.seq === entry.seq;
      check("leaf hash", leafOK, leafOK ? "" : "LEAF_HASH_MISMATCH",
        "SHA-256(0x00 || RFC 8785 form of entry " + entry.seq + ") = " + base64(leaf) + (leafOK ? ", as the proof says." : "; the proof says " + proof.leaf_hash + " for entry " + proof.seq + "."));
      // 4. The path from that leaf to the checkpoint's root.
      if (root === null) {
        check("inclusion", false, "NO_CHECKPOINT", "There is no readable checkpoint to reach.");
      } else if (entry.seq < 1 || entry.seq > size) {
        check("inclusion", false, "OUT_OF_TREE", "Entry " + entry.seq + " is not in a tree of " + size + " entries.");
      } else {
        let got = null, why = "";
        try {
          const path = (proof.proof || []).map(unbase64);
          if (path.some((h) => h.length !== 32)) throw new Error("a proof hash is not 32 bytes");
          got = await recordRoot(path, 0, size, entry.seq - 1, leaf);
        } catch (err) { why = err.message; }
        const ok = got !== null && sameBytes(got, root);
        const sizes = proof.tree_size === size ? "" : " The proof is for a tree of " + proof.tree_size + " entries; the checkpoint signs " + size + ".";
        check("inclusion", ok, ok ? "" : (got === null ? "PROOF_MALFORMED" : "ROOT_MISMATCH"),
          ok ? "The " + (proof.proof || []).length + " proof hashes lead from the leaf to the checkpoint's root." :
            (got === null ? "The proof cannot be run for this tree: " + why + "." : "The proof leads to " + base64(got) + ", not to the checkpoint's root.") + sizes);
      }
      if (mine !== view) return;
      say(allOK ? "valid" : "invalid", allOK ? "Valid: every check passed, in this browser." : "Not valid: see the failed checks.");
    } catch (err) {
      if (mine === view) say("error", "Could not verify: " + describe(err));
    }
  }

  // ---- start -----------------------------------------------------------

  document.addEventListener("DOMContentLoaded", () => {
    $("signin-form").addEventListener("submit", signIn);
    $("signout").addEventListener("click", () => signOut("", true));
    $("account-back").addEventListener("click", accountBack);
    $("account-form").addEventListener("submit", accountSubmit);
    $("workspace-form").addEventListener("submit", openWorkspace);
    $("account-leave").addEventListener("click", leaveAccount);
    $("decision-filters").addEventListener("submit", (ev) => { ev.preventDefault(); view++; loadDecisions(); });
    $("activity-filters").addEventListener("submit", (ev) => { ev.preventDefault(); view++; loadActivity(); });
    $("escalations-refresh").addEventListener("click", () => { view++; loadEscalations(); });
    $("diff-form").addEventListener("submit", loadDiff);
    $("replay-form").addEventListener("submit", runReplay);
    $("f-live").addEventListener("change", setLive);
    $("proof-form").addEventListener("submit", fetchProof);
    $("verify-browser").addEventListener("click", verifyInBrowser);
    window.addEventListener("hashchange", () => { route(); $("main").focus({ preventScroll: true }); });
    const why = sessionStorage.getItem(MESSAGE_STORE);
    sessionStorage.removeItem(MESSAGE_STORE);
    if (why) {
      let m;
      try { m = JSON.parse(why); } catch (err) { m = { text: why, where: "key" }; }
      $(m.where === "account" ? "account-status" : "signin-error").textContent = String(m.text || "");
    }
    route();
    if (!apiKey) {
      $("account-email").focus();
      probeSession();
    }
  });
})();
