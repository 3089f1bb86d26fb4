// The standing approvals page: revoke one (DELETE /v1/standing-approvals/{id}) with the bearer token built from the
// sign-in cookie; the page is then reloaded from the server.

import { api, ApiError, localiseTimes } from "./common.js";

async function revoke(event) {
  const button = event.currentTarget;
  const box = document.getElementById("revoke-error");
  button.disabled = true;
  box.hidden = true;
  try {
    await api("DELETE", `/v1/standing-approvals/${encodeURIComponent(button.dataset.standingId)}`);
    location.reload();
  } catch (err) {
    box.textContent = `Not revoked — ${err instanceof ApiError ? `${err.code}: ${err.message}` : String(err)}`;
    box.hidden = false;
    button.disabled = false;
  }
}

for (const button of document.querySelectorAll("button.revoke")) button.addEventListener("click", revoke);
localiseTimes(document);
