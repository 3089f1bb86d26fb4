// A tool call's result in its card. A result over RESULT_BYTES of compact JSON (the session view's bound,
// docs/GUIDE.md) is not kept in the page: the card says its size, and opening it reads the call from
// GET /v1/sessions/{sid}/tool-calls/{call_id}. So is a result the server already replaced by its
// {"omitted": true, "size_bytes", "href"} marker.

import { api, h } from "./common.js";

export const RESULT_BYTES = 16384;

export function isOmitted(result) {
  return !!result && result.omitted === true && typeof result.href === "string";
}

function kilobytes(bytes) {
  return `${(bytes / 1024).toFixed(1)} kB`;
}

function pre(value) {
  return h("pre", { class: "json", text: JSON.stringify(value, null, 2) });
}

/** The result's <details>: inline when small, else fetched from the call's own view when opened. */
export function resultDetails(sessionId, callId, result) {
  const size = isOmitted(result) ? result.size_bytes
    : new TextEncoder().encode(JSON.stringify(result)).length;
  if (!isOmitted(result) && size <= RESULT_BYTES) {
    return h("details", { class: "json-details" }, h("summary", { text: "result" }), pre(result));
  }
  const href = isOmitted(result) ? result.href
    : `/v1/sessions/${encodeURIComponent(sessionId)}/tool-calls/${encodeURIComponent(callId)}`;
  const status = h("div", { class: "muted small result-loading", text: "Loading…" });
  const details = h("details", { class: "json-details large-result", data: { href } },
    h("summary", { text: `result (${kilobytes(size)}, loaded when opened)` }), status);
  let loaded = false;
  details.addEventListener("toggle", async () => {
    if (!details.open || loaded) return;
    loaded = true;
    try {
      const call = await api("GET", href);
      status.replaceWith(pre(call.result));
    } catch (err) {
      loaded = false;
      status.textContent = `Could not load the result: ${err.message || err}`;
      status.classList.add("error");
    }
  });
  return details;
}
