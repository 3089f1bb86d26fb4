// The approval page: countdown, approve / reject with the fingerprint shown, a quorum approval's votes,
// then the recorded decision and the business outcome, polled from /resume/{id}/status. All text goes in
// with textContent.

import { api, ApiError, localiseTimes, startCountdowns } from "./common.js";

const card = document.getElementById("decide-card");
const pendingId = card.dataset.pendingId;
const fingerprint = card.dataset.fingerprint;
const form = document.getElementById("decide-form");
const errorBox = document.getElementById("decide-error");
let state = JSON.parse(card.dataset.state);
let pollTimer = null;

const LABELS = { pending: "Pending", approved: "Approved", rejected: "Rejected", cancelled: "Cancelled",
                 expired: "Expired", superseded: "Superseded" };
const FINAL_OUTCOMES = new Set(["done", "business_rejected", "not_executed"]);

function setText(id, text) {
  const el = document.getElementById(id);
  if (el) el.textContent = text || "";
  return el;
}

function show(id, visible) {
  const el = document.getElementById(id);
  if (el) el.hidden = !visible;
}

function cell(text, className) {
  const td = document.createElement("td");
  if (className) td.className = className;
  td.textContent = text || "";
  return td;
}

function renderVotes(next) {
  const quorum = document.getElementById("quorum");
  if (quorum && next.approvals_required > 1) {
    quorum.textContent = `${next.approvals_received} of ${next.approvals_required} needed`;
  }
  const body = document.querySelector("#votes tbody");
  if (!body || !Array.isArray(next.votes)) return;
  body.replaceChildren(...next.votes.map((vote) => {
    const row = document.createElement("tr");
    row.dataset.action = vote.action;
    const when = document.createElement("time");
    when.setAttribute("datetime", vote.at);
    when.dataset.local = "";
    when.textContent = vote.at_text;
    const at = cell("");
    at.append(when);
    row.append(cell(vote.who || vote.sub), cell(vote.role), cell(vote.action, "strong"), at, cell(vote.comment, "prewrap"));
    return row;
  }));
  show("votes-card", next.votes.length > 0);
  localiseTimes(body);
}

function render(next) {
  state = next;
  renderVotes(next);
  const pill = setText("status-pill", LABELS[next.status] || next.status);
  pill.className = `status-pill status-${next.status}`;
  const decision = document.getElementById("decision");
  decision.className = `decision decision-${next.status}`;
  setText("decision-headline", next.decision.headline);
  const at = document.getElementById("decision-at");
  at.setAttribute("datetime", next.decision.at || "");
  at.removeAttribute("title");
  at.textContent = next.decision.at_text || "";
  show("decision-at-line", Boolean(next.decision.at));
  localiseTimes(at.parentElement);
  setText("decision-comment", next.decision.comment);
  show("decision-comment", Boolean(next.decision.comment));
  if (next.decision.superseded_by) {
    const link = setText("superseded-link", next.decision.superseded_by);
    link.setAttribute("href", `/resume/${encodeURIComponent(next.decision.superseded_by)}`);
  }
  show("superseded", Boolean(next.decision.superseded_by));
  show("countdown-line", next.status === "pending");
  const outcome = document.getElementById("outcome");
  if (next.outcome) {
    outcome.className = `outcome outcome-${next.outcome.state}`;
    setText("outcome-title", next.outcome.title);
    setText("outcome-detail", next.outcome.detail);
  }
  outcome.hidden = !next.outcome;
  const reason = document.getElementById("no-decision").dataset.reason;
  if (next.status !== "pending" && reason !== "role") {
    if (form) form.remove();
    const note = setText("no-decision", next.status === "expired"
      ? "This approval expired without a decision; it can no longer be decided."
      : next.status === "superseded"
        ? "This version was superseded by an edit; decide the new version instead."
        : `This approval was already decided (${(LABELS[next.status] || next.status).toLowerCase()}); there is nothing left to decide.`);
    note.hidden = false;
  }
  document.title = `${LABELS[next.status] || next.status}: ${document.getElementById("operation").textContent} · Erpilot`;
}

function settled() {
  return state.status !== "pending" && state.status !== "approved"
    || (state.outcome && FINAL_OUTCOMES.has(state.outcome.state));
}

async function poll() {
  try {
    const next = await api("GET", `/resume/${encodeURIComponent(pendingId)}/status`);
    if (JSON.stringify(next) !== JSON.stringify(state)) render(next);
  } catch (err) {
    // keep the page as it is; the next poll tries again
  }
  if (!settled()) pollTimer = setTimeout(poll, 1500);
  else pollTimer = null;
}

function ensurePolling() {
  if (pollTimer === null && !settled()) pollTimer = setTimeout(poll, 1500);
}

function describe(err) {
  if (!(err instanceof ApiError)) return String(err);
  const messages = {
    already_decided: "Someone already decided this approval.",
    expired: "This approval expired before your decision arrived; nothing was decided.",
    stale_fingerprint: "The operation changed after this page was loaded; reload and review it again.",
    superseded: "An edit replaced this approval; open the new version.",
    separation_of_duties: "You requested this operation and may not approve it yourself.",
    forbidden: "You do not have a role that may decide this approval.",
    unauthorized: "Your sign-in has expired. Sign in again, then decide.",
    already_voted: "You have voted on this approval already.",
  };
  return messages[err.code] || `${err.code}: ${err.message}`;
}

if (form) {
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const action = event.submitter && event.submitter.value;
    if (action !== "approve" && action !== "reject") return;
    const comment = form.elements.comment.value.trim();
    const body = { action, fingerprint };
    if (comment) body.comment = comment;
    for (const button of form.querySelectorAll("button")) button.disabled = true;
    errorBox.hidden = true;
    try {
      const record = await api("POST", `/v1/approvals/${encodeURIComponent(pendingId)}/decision`, body);
      if (record.status === "pending") {  // a quorum vote: it waits for others; the poll shows the votes
        form.remove();
        const note = setText("no-decision", "You have voted on this approval; it waits for the other approvals it needs.");
        note.dataset.reason = "already_voted";
        note.hidden = false;
        poll();
        return;
      }
      // Show the decision as recorded at once; the status poll adds the business outcome.
      render({ ...state, status: record.status,
               decision: { status: record.status, label: LABELS[record.status] || record.status,
                           headline: `${LABELS[record.status] || record.status} by ${record.decided_by}`
                             + (record.decided_on_behalf_of ? ` for ${record.decided_on_behalf_of}` : ""),
                           at: record.decided_at || "", at_text: record.decided_at || "",
                           comment: record.comment || "", superseded_by: record.superseded_by || "" },
               outcome: record.status === "approved"
                 ? { state: "waiting", title: "Approved — not executed yet",
                     detail: "Waiting for the agent to commit the operation to the ERP." }
                 : { state: "not_executed", title: "Not executed",
                     detail: `The approval was ${record.status}; the operation was not carried out and changed nothing.` } });
      poll();
    } catch (err) {
      errorBox.textContent = describe(err);
      errorBox.hidden = false;
      if (err instanceof ApiError && ["already_decided", "expired", "superseded"].includes(err.code)) poll();
      else for (const button of form.querySelectorAll("button")) button.disabled = false;
    }
  });
}

localiseTimes(document);

startCountdowns(document, () => {
  if (state.status !== "pending") return;
  if (form) for (const button of form.querySelectorAll("button")) button.disabled = true;
  const note = setText("no-decision", "This approval has expired; it can no longer be decided.");
  note.hidden = false;
  if (form) form.hidden = true;
  ensurePolling();
});

ensurePolling();
