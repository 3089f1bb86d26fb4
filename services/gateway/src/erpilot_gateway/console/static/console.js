// The console: sessions (ids kept in localStorage), a chat whose timeline is the session's SSE stream,
// and the approvals inbox (polled). Every string from the model or a person goes in with textContent.

import { api, ApiError, countdown, formatMoney, h, startCountdowns, timeOfDay } from "./common.js";
import { resultDetails } from "./results.js";

const sub = document.body.dataset.sub;
const roles = JSON.parse(document.body.dataset.roles || "[]");
const isRequester = roles.includes("requester");
// A deciding role, or a delegation in force (the server says which: data-inbox).
const isDecider = document.body.dataset.inbox === "true" || roles.some((r) => ["approver", "manager", "admin"].includes(r));
const $ = (id) => document.getElementById(id);
const enc = encodeURIComponent;

const EVENT_TYPES = ["message", "run_started", "run_finished", "run_failed", "tool_started", "approval_pending",
                     "approval_resolved", "approval_withdrawn", "tool_executing", "tool_finished", "approval_vote",
                     "approval_escalated"];
const APPROVAL_LABELS = { approved: "Approved", rejected: "Rejected", cancelled: "Cancelled", expired: "Expired",
                          superseded: "Superseded" };
// The state a tool call is in, as its card's pill shows it. "approved" is not "done": only tool_finished
// with outcome "succeeded" is.
const CALL_STATES = {
  running: "Running",
  awaiting_approval: "Awaiting approval",
  approved: "Approved · not executed yet",
  executing: "Executing",
  succeeded: "Done",
  business_rejected: "Business rejected",
  not_executed: "Not executed",
  failed: "Failed",
};

// --- banner -----------------------------------------------------------------------------------------------

function banner(text) {
  const el = $("banner");
  el.textContent = text || "";
  el.hidden = !text;
}

function explain(err) {
  if (err instanceof ApiError && err.status === 401) {
    banner("Your sign-in is no longer valid. Sign out and sign in again with a current token.");
  }
  return err instanceof ApiError ? `${err.code}: ${err.message}` : String(err);
}

// --- tabs ---------------------------------------------------------------------------------------------------

function route() {
  const [tabPart, ...rest] = location.hash.replace(/^#/, "").split("/");
  let tab = tabPart;
  if (tab !== "sessions" && tab !== "approvals") tab = isRequester ? "sessions" : "approvals";
  if (tab === "sessions" && !isRequester) tab = "approvals";
  if (tab === "approvals" && !isDecider) tab = "sessions";
  for (const name of ["sessions", "approvals"]) {
    const view = $(`view-${name}`);
    if (view) view.hidden = name !== tab;
    const link = $(`tab-${name}`);
    if (link) link.classList.toggle("active", name === tab);
  }
  if (tab === "sessions") {
    const sid = rest.length ? decodeURIComponent(rest.join("/")) : null;
    if (sid) openSession(sid);
    else {
      const last = loadSessions()[0];
      if (last && !current) location.replace(`#sessions/${enc(last.id)}`);
    }
  }
}

// --- sessions (listed by the server: every session of yours, from any browser or the API) --------------------

const sessionList = { items: [], q: "", next: null, loaded: false, seq: 0 };

function loadSessions() {
  return sessionList.items.map((s) => ({ id: s.session_id, title: s.title || "" }));
}

async function refreshSessions({ more = false } = {}) {
  const mine = ++sessionList.seq;  // a slower earlier search never overwrites a later one
  const params = new URLSearchParams({ limit: "50" });
  if (sessionList.q) params.set("q", sessionList.q);
  if (more && sessionList.next) params.set("cursor", sessionList.next);
  try {
    const page = await api("GET", `/v1/sessions?${params}`);
    if (mine !== sessionList.seq) return;
    sessionList.items = more ? [...sessionList.items, ...page.items] : page.items;
    sessionList.next = page.next_cursor;
    sessionList.loaded = true;
    renderSessionList();
  } catch (err) {
    banner(`Could not list your sessions: ${explain(err)}`);
  }
}

function rememberSession(id) {
  if (!sessionList.items.some((s) => s.session_id === id)) refreshSessions();  // new, or found by id
}

function searchSessions(event) {
  if (event) event.preventDefault();
  sessionList.q = $("session-search").elements.q.value.trim();
  refreshSessions();
}

function renderSessionList() {
  const list = $("session-list");
  if (!list) return;
  const sessions = loadSessions();
  list.replaceChildren(...sessions.map((s) => h("li", {
    class: current && current.sid === s.id ? "active" : "", data: { sessionId: s.id },
  },
  h("a", { attrs: { href: `#sessions/${enc(s.id)}` } },
    h("span", { class: "session-title", text: s.title || "Untitled session" }),
    h("span", { class: "mono muted small", text: s.id })))));
  const empty = $("session-list-empty");
  empty.hidden = sessions.length > 0 || !sessionList.loaded;
  empty.textContent = sessionList.q ? `No session title contains “${sessionList.q}”.`
    : "No sessions yet. Create one to talk to the agent.";
  $("session-more").hidden = !sessionList.next;
}

async function createSession(event) {
  event.preventDefault();
  const form = event.currentTarget;
  const title = form.elements.title.value.trim();
  form.querySelector("button").disabled = true;
  try {
    const created = await api("POST", "/v1/sessions", title ? { title } : {});
    rememberSession(created.session_id, title);
    form.reset();
    location.hash = `#sessions/${enc(created.session_id)}`;
  } catch (err) {
    banner(`Could not create a session: ${explain(err)}`);
  } finally {
    form.querySelector("button").disabled = false;
  }
}

// --- one open session: its timeline from the SSE stream -----------------------------------------------------

let current = null; // {sid, source, lastSeq, calls: Map(call_id -> card), retry}

function closeSession() {
  if (!current) return;
  if (current.source) current.source.close();
  clearTimeout(current.retry);
  current = null;
  $("chat-main").hidden = true;
  $("chat-empty").hidden = false;
  renderSessionList();
}

async function openSession(sid) {
  if (current && current.sid === sid) return;
  closeSession();
  const session = { sid, source: null, lastSeq: 0, calls: new Map(), retry: null, endedRuns: new Set(),
                    running: false };
  current = session;
  renderSessionList();
  $("chat-empty").hidden = true;
  $("chat-main").hidden = false;
  $("timeline").replaceChildren();
  $("run-state").hidden = true;
  $("composer-error").hidden = true;
  $("session-title").textContent = "Loading…";
  $("session-id").textContent = sid;
  setStream("connecting");
  let view;
  try {
    view = await api("GET", `/v1/sessions/${enc(sid)}`);
  } catch (err) {
    if (current !== session) return;
    $("session-title").textContent = "Session unavailable";
    setStream("closed");
    $("timeline").append(h("li", { class: "system error", text: err instanceof ApiError && err.status === 404
      ? "No such session of yours. It may belong to another person."
      : `Could not open the session: ${explain(err)}` }));
    return;
  }
  if (current !== session) return;
  rememberSession(sid, view.title);
  $("session-title").textContent = view.title || "Untitled session";
  connect(session);
}

function setStream(state) {
  const el = $("stream-state");
  const labels = { connecting: "connecting…", live: "live", reconnecting: "reconnecting…", closed: "disconnected" };
  el.textContent = labels[state] || state;
  el.dataset.state = state;
}

function connect(session) {
  // The browser's EventSource resends Last-Event-ID by itself when it reconnects. When the stream was
  // closed for good (e.g. an error status), a new one resumes with ?last_event_id= instead.
  const url = `/v1/sessions/${enc(session.sid)}/events` + (session.lastSeq ? `?last_event_id=${session.lastSeq}` : "");
  const source = new EventSource(url);
  session.source = source;
  for (const type of EVENT_TYPES) {
    source.addEventListener(type, (event) => {
      if (current !== session) return;
      let data;
      try { data = JSON.parse(event.data); } catch { return; }
      if (typeof data.seq !== "number" || data.seq <= session.lastSeq) return; // replayed already
      session.lastSeq = data.seq;
      applyEvent(session, data);
    });
  }
  source.onopen = () => { if (current === session) setStream("live"); };
  source.onerror = () => {
    if (current !== session) return;
    if (source.readyState === EventSource.CLOSED) {
      setStream("closed");
      session.retry = setTimeout(() => { if (current === session) connect(session); }, 3000);
    } else {
      setStream("reconnecting");
    }
  };
}

function nearBottom() {
  const el = document.scrollingElement;
  return el.scrollHeight - el.scrollTop - el.clientHeight < 200;
}

function append(node) {
  const stick = nearBottom();
  $("timeline").append(node);
  if (stick) node.scrollIntoView({ block: "end" });
}

function applyEvent(session, event) {
  const d = event.data || {};
  const at = timeOfDay(event.occurred_at);
  switch (event.type) {
    case "message":
      append(h("li", { class: `message message-${d.role === "user" ? "user" : "agent"}`, data: { seq: event.seq } },
        h("div", { class: "message-meta" }, h("span", { text: d.role === "user" ? "You" : d.role === "assistant" ? "Agent" : String(d.role || "") }),
          h("span", { class: "muted", text: at })),
        h("div", { class: "message-text", text: d.text ?? "" })));
      break;
    case "run_started":
      session.running = true;
      updateRunState(session);
      break;
    case "run_finished":
      if (d.run_id) session.endedRuns.add(d.run_id);
      session.running = false;
      updateRunState(session);
      break;
    case "run_failed": {
      if (d.run_id) session.endedRuns.add(d.run_id);
      session.running = false;
      updateRunState(session);
      const err = d.error || {};
      append(h("li", { class: "system error", data: { seq: event.seq },
                      text: `The agent's run failed: ${err.code || "error"}${err.message ? " — " + err.message : ""}` }));
      break;
    }
    default:
      applyToolEvent(session, event, at);
      updateRunState(session);
  }
}

function randomId() {
  // crypto.randomUUID exists only in secure contexts; getRandomValues everywhere.
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** "The agent is working" while a run is on; while a call waits for a person, say that instead. */
function updateRunState(session) {
  if (current !== session) return;
  const waiting = [...session.calls.values()].some((c) => c.dataset.state === "awaiting_approval");
  $("run-state").hidden = !session.running && !waiting;
  $("run-state").classList.toggle("waiting", waiting);
  $("run-state-text").textContent = waiting
    ? "Waiting for an approval decision; the agent goes on once it is decided. You can keep asking meanwhile."
    : "The agent is working…";
}

function callCard(session, callId, tool) {
  let card = session.calls.get(callId);
  if (!card) {
    card = h("li", { class: "tool-card", data: { callId, state: "running" } },
      h("div", { class: "tool-head" },
        h("span", { class: "tool-name", text: tool || "tool" }),
        h("span", { class: "mono muted small", text: callId }),
        h("span", { class: "spacer" }),
        h("span", { class: "pill" })),
      h("ol", { class: "stages" }));
    session.calls.set(callId, card);
    append(card);
    setCallState(card, "running");
  }
  return card;
}

function setCallState(card, state) {
  card.dataset.state = state;
  const pill = card.querySelector(".pill");
  pill.className = `pill pill-${state}`;
  pill.textContent = CALL_STATES[state] || state;
}

function stage(card, name, at, extra, ...content) {
  const row = h("li", { class: `stage stage-${name}`, data: { stage: name, ...extra } },
    h("span", { class: "stage-time", text: at }), h("div", { class: "stage-body" }, ...content));
  const stick = nearBottom();
  card.querySelector(".stages").append(row);
  if (stick) row.scrollIntoView({ block: "end" });
  return row;
}

function jsonDetails(label, value) {
  return h("details", { class: "json-details" }, h("summary", { text: label }),
    h("pre", { class: "json", text: JSON.stringify(value, null, 2) }));
}

function stopCountdowns(card) {
  for (const el of card.querySelectorAll("[data-deadline]")) {
    delete el.dataset.deadline;
    (el.closest(".deadline") || el).remove();
  }
}

function applyToolEvent(session, event, at) {
  const d = event.data || {};
  if (!d.call_id) return;
  const card = callCard(session, d.call_id, d.tool);
  switch (event.type) {
    case "tool_started":
      card.querySelector(".tool-name").textContent = d.tool || "tool";
      stage(card, "tool_started", at, {}, h("strong", { text: "Started" }),
        d.arguments && Object.keys(d.arguments).length ? jsonDetails("arguments", d.arguments) : null);
      setCallState(card, "running");
      break;
    case "approval_pending": {
      const p = d.preview || {};
      const amount = formatMoney(p.amount_minor, p.currency);
      const link = `/resume/${enc(d.pending_id)}`;
      stage(card, "approval_pending", at, { pendingId: d.pending_id },
        h("strong", { text: "Approval requested" }),
        h("div", { class: "approval-summary" },
          h("span", { text: p.operation || "" }),
          amount ? h("span", { class: "amount", text: amount }) : null,
          p.object ? h("span", { text: p.object }) : null,
          p.target ? h("span", { text: p.target }) : null),
        h("div", { class: "approval-links" },
          h("span", { class: "deadline" }, "expires in ", h("span", { class: "countdown", data: { deadline: d.expires_at }, text: countdown(d.expires_at).text })),
          h("a", { attrs: { href: link }, text: "Open the approval page" }),
          cancelButton(session, d.call_id)));
      setCallState(card, "awaiting_approval");
      break;
    }
    case "approval_vote":
      stage(card, "approval_vote", at, { action: d.action },
        h("strong", { text: `${d.action === "approve" ? "Approved" : d.action === "reject" ? "Rejected" : "Cancelled"} by ${byWhom(d.sub, d.on_behalf_of)}` }),
        h("span", { class: "muted", text: ` (${d.role}) — ${d.approvals_received} of ${d.approvals_required} approvals` }),
        d.comment ? h("blockquote", { class: "comment", text: d.comment }) : null);
      break;
    case "approval_withdrawn":
      stopCountdowns(card);
      for (const button of card.querySelectorAll(".cancel-run")) button.remove();
      stage(card, "approval_withdrawn", at, {},
        h("strong", { text: `Withdrawn${d.withdrawn_by ? " by " + d.withdrawn_by : ""}` }),
        h("span", { class: "muted", text: " — the request was cancelled; nothing was executed" }));
      break;
    case "approval_resolved": {
      stopCountdowns(card);
      const status = d.status;
      const who = d.decided_by ? ` by ${byWhom(d.decided_by, d.decided_on_behalf_of)}` : "";
      const text = status === "approved" ? `Approved${who}`
        : status === "expired" ? "Expired — nobody decided before the deadline"
          : status === "superseded" ? `Superseded by an edit${who}`
            : `${APPROVAL_LABELS[status] || status}${who}`;
      stage(card, "approval_resolved", at, { status },
        h("strong", { text }),
        status === "approved" ? h("span", { class: "muted", text: " — approval only; not executed yet" }) : null,
        d.comment ? h("blockquote", { class: "comment", text: d.comment }) : null);
      if (status === "approved") setCallState(card, "approved");
      break;
    }
    case "approval_escalated":
      stage(card, "approval_escalated", at, { escalatedTo: d.escalated_to },
        h("strong", { text: `Escalated — ${roleName(d.escalated_to)} may now decide it too` }),
        h("span", { class: "muted", text: " (nobody decided in time; the deadline is unchanged)" }));
      break;
    case "tool_executing":
      stage(card, "tool_executing", at, {}, h("strong", { text: "Executing in the ERP" }));
      setCallState(card, "executing");
      break;
    case "tool_finished": {
      stopCountdowns(card);
      const outcome = d.outcome;
      const err = d.error || {};
      let content;
      if (outcome === "succeeded") {
        content = [h("strong", { text: "Done" }),
                   h("span", { class: "result-summary", text: d.summary ? ` — ${d.summary}` : "" }),
                   d.result ? resultDetails(session.sid, d.call_id, d.result) : null];
      } else if (outcome === "business_rejected") {
        content = [h("strong", { text: "Business rejected" }), h("span", { text: ` — ${err.code || ""}${err.message ? ": " + err.message : ""}` }),
                   h("div", { class: "muted small", text: "The ERP refused; nothing changed." })];
      } else if (outcome === "not_executed") {
        content = [h("strong", { text: "Not executed" }), h("span", { text: ` — ${err.message || err.code || ""}` })];
      } else {
        content = [h("strong", { text: "Failed" }), h("span", { text: ` — ${err.code || ""}${err.message ? ": " + err.message : ""}` })];
      }
      stage(card, "tool_finished", at, { outcome }, ...content);
      setCallState(card, CALL_STATES[outcome] ? outcome : "failed");
      break;
    }
    default:
      break;
  }
}

/** Who decided, as people read it: "ana", or "ana for bob" when ana decided as bob's delegate. */
function byWhom(sub, onBehalfOf) {
  return onBehalfOf ? `${sub} for ${onBehalfOf}` : sub;
}

/** "a manager", "an approver". */
function roleName(role) {
  return `${/^[aeiou]/.test(role || "") ? "an" : "a"} ${role || "another role"}`;
}

/** A model's call id is "<run_id>:<id>": its run can be cancelled while the call waits for a person. */
function cancelButton(session, callId) {
  const runId = String(callId || "").split(":")[0];
  if (!runId.startsWith("run_") || session.endedRuns.has(runId)) return null;
  const button = h("button", {
    class: "button ghost small cancel-run", text: "Cancel this request",
    attrs: { type: "button", title: "Cancel the waiting run and withdraw its approvals" }, data: { runId },
  });
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      const answer = await api("POST", `/v1/sessions/${enc(session.sid)}/runs/${enc(runId)}/cancel`, {});
      const kept = (answer.approvals || []).filter((a) => a.status !== "withdrawn" && a.status !== "not_found");
      if (kept.length) banner(`Cancelled; already decided before the cancel: ${kept.map((a) => a.status).join(", ")}`);
      button.remove();
    } catch (err) {
      button.disabled = false;
      banner(`Could not cancel: ${explain(err)}`);
    }
  });
  return button;
}

async function sendMessage(event) {
  event.preventDefault();
  if (!current) return;
  const form = $("composer");
  const box = form.elements.text;
  const text = box.value.trim();
  const error = $("composer-error");
  if (!text) return;
  form.querySelector("button").disabled = true;
  error.hidden = true;
  try {
    const session = current;
    // One key per message text: resending after a lost answer returns the same run, never a second one.
    if (form.dataset.pendingText !== text) {
      form.dataset.pendingText = text;
      form.dataset.idempotencyKey = `console-${randomId()}`;
    }
    const accepted = await api("POST", `/v1/sessions/${enc(session.sid)}/messages`, { text },
                               { "Idempotency-Key": form.dataset.idempotencyKey });
    delete form.dataset.pendingText;
    box.value = "";
    // The stream may already have told that this run ended; only show "working" while it has not.
    if (current === session && !(accepted && session.endedRuns.has(accepted.run_id))) {
      session.running = true;
      updateRunState(session);
    }
  } catch (err) {
    error.textContent = err instanceof ApiError && err.code === "run_in_progress"
      ? "The agent is still working on the previous message; send this when it has answered (a request waiting for an approval does not block you)."
      : `Not sent: ${explain(err)}`;
    error.hidden = false;
  } finally {
    form.querySelector("button").disabled = false;
    box.focus();
  }
}

// --- approvals inbox (polled) ----------------------------------------------------------------------------

const inboxRows = new Map();

const selected = new Map();  // pending_id -> the item as listed (fingerprint and preview shown)

function pickCell(item) {
  if (item.can_decide === false) return h("td", { class: "pick" });
  const box = h("input", { class: "bulk-pick", attrs: { type: "checkbox", "aria-label": `Select ${item.pending_id}` },
                           data: { pendingId: item.pending_id } });
  box.addEventListener("change", () => {
    if (box.checked) selected.set(item.pending_id, item); else selected.delete(item.pending_id);
    renderBulkBar();
  });
  return h("td", { class: "pick" }, box);
}

// The total of the selection, per currency ("1,234.50 EUR + 20.00 USD"); items without an amount are counted.
function selectionTotal() {
  const sums = new Map();
  for (const item of selected.values()) {
    const p = item.preview || {};
    if (Number.isInteger(p.amount_minor) && p.currency) sums.set(p.currency, (sums.get(p.currency) || 0) + p.amount_minor);
  }
  return [...sums].map(([currency, minor]) => formatMoney(minor, currency)).join(" + ");
}

function renderBulkBar() {
  const count = selected.size;
  const total = selectionTotal();
  $("bulk-summary").textContent = count
    ? `${count} selected${total ? ` · total ${total}` : ""}`
    : "Select approvals to approve them together.";
  $("bulk-approve").disabled = count === 0;
  $("bulk-approve").textContent = count ? `Approve ${count} selected` : "Approve selected";
  const boxes = [...document.querySelectorAll(".bulk-pick")];
  $("bulk-all").checked = boxes.length > 0 && boxes.every((b) => b.checked);
}

async function approveSelected() {
  const items = [...selected.values()].map((i) => ({ pending_id: i.pending_id, fingerprint: i.fingerprint }));
  if (!items.length) return;
  const result = $("bulk-result");
  $("bulk-approve").disabled = true;
  try {
    const answer = await api("POST", "/v1/approvals/decisions", { action: "approve", items });
    const done = (answer.items || []).length;
    result.textContent = `Approved ${done} approval${done === 1 ? "" : "s"} together (total ${selectionTotal() || "no amount"}).`;
    result.className = "bulk-result";
    selected.clear();
    for (const box of document.querySelectorAll(".bulk-pick")) box.checked = false;
  } catch (err) {
    const which = err instanceof ApiError && err.problem && err.problem.pending_id ? ` (${err.problem.pending_id})` : "";
    result.textContent = `Nothing was approved${which}: ${explain(err)}`;
    result.className = "bulk-result error";
  }
  result.hidden = false;
  renderBulkBar();
  pollInboxNow();
}

// What a row shows that may change while it is listed: a changed row is rebuilt.
function rowSignature(item) {
  return JSON.stringify([item.can_decide, item.cannot_decide_reason, item.can_decide_for, item.escalated_at,
                         item.approvals_received, item.fingerprint]);
}

function inboxBadges(item) {
  const badges = [];
  if (item.escalated_at) {
    badges.push(h("span", { class: "pill escalated", text: "escalated",
                            attrs: { title: `Nobody decided in time: ${item.escalate_to || "another role"} may decide it too since ${timeOfDay(item.escalated_at)}` } }));
  }
  if (item.can_decide_for) {
    badges.push(h("span", { class: "pill delegated", text: `for ${item.can_decide_for}`,
                            attrs: { title: `You decide this as ${item.can_decide_for}'s delegate` } }));
  }
  return badges.length ? h("div", { class: "badges" }, ...badges) : null;
}

function inboxRow(item) {
  const p = item.preview || {};
  return h("tr", { data: { pendingId: item.pending_id, sig: rowSignature(item) } },
    pickCell(item),
    h("td", { class: "nowrap", text: timeOfDay(item.created_at) }),
    h("td", {},
      inboxBadges(item),
      h("div", { class: "strong", text: p.operation || item.tool }),
      h("div", { class: "small", text: p.object || "" }),
      h("div", { class: "mono muted small", text: item.tool }),
      (item.approvals_required || 1) > 1
        ? h("div", { class: "small quorum", text: `${item.approvals_received} of ${item.approvals_required} approvals` }) : null),
    h("td", { text: p.target || "" }),
    h("td", { class: "num strong nowrap", text: formatMoney(p.amount_minor, p.currency) || "—" }),
    h("td", { text: item.requested_by }),
    h("td", { class: "nowrap" }, h("span", { class: "countdown", data: { deadline: item.expires_at }, text: countdown(item.expires_at).text })),
    h("td", {}, ...decideCell(item)));
}

// Why the approval service says this person may not approve (the record's cannot_decide_reason).
const CANNOT_DECIDE = {
  separation_of_duties: "You requested or edited this: another person must approve it (you may reject).",
  role: "You do not hold a role that may decide this.",
  already_decided: "Already decided.",
  expired: "Expired.",
  superseded: "Superseded by an edit.",
  withdrawn: "Withdrawn by the requester.",
  already_voted: "You voted; waiting for other approvers.",
};

function decideCell(item) {
  const href = `/resume/${enc(item.pending_id)}`;
  if (item.can_decide === false) {
    return [h("p", { class: "small muted cannot-decide", data: { reason: item.cannot_decide_reason || "" },
                     text: CANNOT_DECIDE[item.cannot_decide_reason] || "You cannot approve this." }),
            h("a", { class: "button small", attrs: { href }, text: "View" })];
  }
  return [h("a", { class: "button primary small", attrs: { href }, text: "Review" })];
}

function renderInbox(items) {
  const pending = items.filter((i) => i.status === "pending")
    .sort((a, b) => Date.parse(b.created_at) - Date.parse(a.created_at));
  const seen = new Set(pending.map((i) => i.pending_id));
  for (const [id, row] of inboxRows) {
    if (!seen.has(id)) { row.remove(); inboxRows.delete(id); selected.delete(id); }
  }
  const tbody = $("inbox-rows");
  pending.forEach((item, index) => {
    let row = inboxRows.get(item.pending_id);
    if (row && row.dataset.sig !== rowSignature(item)) {  // escalated, decided by others, … meanwhile
      const fresh = inboxRow(item);
      const box = row.querySelector(".bulk-pick");
      const freshBox = fresh.querySelector(".bulk-pick");
      if (box && box.checked && freshBox) {
        freshBox.checked = true;
        selected.set(item.pending_id, item);
      } else {
        selected.delete(item.pending_id);
      }
      row.replaceWith(fresh);
      row = fresh;
      inboxRows.set(item.pending_id, row);
    }
    if (!row) { row = inboxRow(item); inboxRows.set(item.pending_id, row); }
    if (tbody.children[index] !== row) tbody.insertBefore(row, tbody.children[index] || null);
  });
  $("inbox-empty").hidden = pending.length > 0;
  const badge = $("approvals-count");
  badge.textContent = String(pending.length);
  badge.hidden = pending.length === 0;
  document.title = pending.length ? `(${pending.length}) Erpilot console` : "Erpilot console";
  renderBulkBar();
}

let inboxTimer = null;

function pollInboxNow() {
  clearTimeout(inboxTimer);
  pollInbox();
}

async function pollInbox() {
  try {
    const data = await api("GET", "/v1/approvals?status=pending");
    renderInbox(Array.isArray(data && data.items) ? data.items : []);
    $("inbox-state").textContent = `updated ${timeOfDay(new Date().toISOString())}`;
  } catch (err) {
    $("inbox-state").textContent = `cannot load approvals: ${explain(err)}`;
  } finally {
    clearTimeout(inboxTimer);
    inboxTimer = setTimeout(pollInbox, 1500);
  }
}

// --- start ---------------------------------------------------------------------------------------------------

if (isRequester) {
  $("new-session").addEventListener("submit", createSession);
  $("open-session").addEventListener("submit", (event) => {
    event.preventDefault();
    const sid = event.currentTarget.elements.session_id.value.trim();
    if (sid) { event.currentTarget.reset(); location.hash = `#sessions/${enc(sid)}`; }
  });
  $("composer").addEventListener("submit", sendMessage);
  $("composer").elements.text.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("session-search").addEventListener("submit", searchSessions);
  let searchTimer = null;
  $("session-search").elements.q.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(searchSessions, 250);
  });
  $("session-more").addEventListener("click", () => refreshSessions({ more: true }));
}
if (isDecider) {
  $("bulk-approve").addEventListener("click", approveSelected);
  $("bulk-all").addEventListener("change", (event) => {
    for (const box of document.querySelectorAll(".bulk-pick")) {
      if (box.checked !== event.currentTarget.checked) { box.checked = event.currentTarget.checked; box.dispatchEvent(new Event("change")); }
    }
  });
  pollInbox();
}
window.addEventListener("hashchange", route);
if (isRequester) refreshSessions().then(route); else route();
startCountdowns(document, (el) => {
  const row = el.closest("tr");
  if (row) row.classList.add("expired");
});
