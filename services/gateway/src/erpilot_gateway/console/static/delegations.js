// The delegations page: give one (POST /v1/delegations) and revoke one you gave (DELETE /v1/delegations/{id}),
// with the bearer token built from the sign-in cookie; the page is then reloaded from the server.

import { api, ApiError, localiseTimes } from "./common.js";

const $ = (id) => document.getElementById(id);

function describe(err) {
  return err instanceof ApiError ? `${err.code}: ${err.message}` : String(err);
}

function showError(box, text) {
  box.textContent = text;
  box.hidden = !text;
}

async function give(event) {
  event.preventDefault();
  const form = event.currentTarget;
  const until = new Date(form.elements.until.value);  // the person's local time, sent with its zone (UTC)
  const tools = [...form.querySelectorAll("input[name=tools]:checked")].map((box) => box.value);
  const body = { to: form.elements.to.value.trim(), until: Number.isNaN(until.getTime()) ? "" : until.toISOString() };
  if (tools.length) body.tools = tools;
  const button = $("give");
  button.disabled = true;
  showError($("give-error"), "");
  try {
    await api("POST", "/v1/delegations", body);
    location.reload();
  } catch (err) {
    showError($("give-error"), `Not given — ${describe(err)}`);
    button.disabled = false;
  }
}

async function revoke(event) {
  const button = event.currentTarget;
  button.disabled = true;
  showError($("revoke-error"), "");
  try {
    await api("DELETE", `/v1/delegations/${encodeURIComponent(button.dataset.delegationId)}`);
    location.reload();
  } catch (err) {
    showError($("revoke-error"), `Not revoked — ${describe(err)}`);
    button.disabled = false;
  }
}

const form = $("give-form");
if (form) form.addEventListener("submit", give);
for (const button of document.querySelectorAll("button.revoke")) button.addEventListener("click", revoke);
localiseTimes(document);
