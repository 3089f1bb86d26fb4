// Shared helpers of the console and the approval page. Text from the model or from people is only
// ever put into the page with textContent (see h()), never parsed as HTML.

const TOKEN_COOKIE = "erpilot_token";

/** The signed-in person's token: the cookie set at sign-in (the /v1 API wants it as a bearer header). */
export function token() {
  for (const part of document.cookie.split(";")) {
    const [name, ...rest] = part.trim().split("=");
    if (name === TOKEN_COOKIE) return decodeURIComponent(rest.join("="));
  }
  return null;
}

/** The server's clock, from the page's data-server-now (countdowns must not trust the local clock). */
const pageLoaded = Date.now();
const serverAtLoad = Date.parse(document.body.dataset.serverNow || "");
const skew = Number.isNaN(serverAtLoad) ? 0 : serverAtLoad - pageLoaded;
export function serverNow() {
  return Date.now() + skew;
}

export class ApiError extends Error {
  constructor(status, problem) {
    super(problem && problem.detail ? problem.detail : `HTTP ${status}`);
    this.status = status;
    this.code = problem && problem.code ? problem.code : `http_${status}`;
    this.problem = problem;
  }
}

/** Call the JSON API with the bearer token; resolves to the body, rejects with ApiError. */
export async function api(method, path, body, extraHeaders = {}) {
  const headers = { Accept: "application/json", ...extraHeaders };
  const bearer = token();
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin", cache: "no-store",
    });
  } catch (err) {
    throw new ApiError(0, { code: "network", detail: "The gateway cannot be reached." });
  }
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

/**
 * Build an element. props: {class, text, attrs: {...}, data: {...}, on: {event: fn}}; children are
 * nodes or strings (strings become text nodes).
 */
export function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  if (props.class) node.className = props.class;
  if (props.text !== undefined && props.text !== null) node.textContent = String(props.text);
  for (const [k, v] of Object.entries(props.attrs || {})) {
    if (v !== undefined && v !== null && v !== false) node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const [k, v] of Object.entries(props.data || {})) {
    if (v !== undefined && v !== null) node.dataset[k] = String(v);
  }
  for (const [event, fn] of Object.entries(props.on || {})) node.addEventListener(event, fn);
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Decimals of a currency's major unit (ISO 4217, as the browser's Intl knows it); 2 if unknown. */
export function currencyExponent(currency) {
  try {
    return new Intl.NumberFormat("en", { style: "currency", currency }).resolvedOptions().maximumFractionDigits;
  } catch {
    return 2;
  }
}

/** Integer minor units as major units and the currency code: "1,234.50 EUR", "1,234 JPY". */
export function formatMoney(minor, currency) {
  if (typeof minor !== "number" || !Number.isInteger(minor)) return minor == null ? "" : String(minor);
  const digits = currency ? currencyExponent(currency) : 2;
  const sign = minor < 0 ? "-" : "";
  const abs = Math.abs(minor);
  const scale = 10 ** digits;
  const major = Math.floor(abs / scale).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  const fraction = digits ? "." + String(abs % scale).padStart(digits, "0") : "";
  return `${sign}${major}${fraction}${currency ? " " + currency : ""}`;
}

/** An ISO timestamp as a date and time in the viewer's locale and time zone, e.g. "19 Oct 2026, 14:03:07 CEST". */
export function localDateTime(iso) {
  const date = new Date(iso);
  if (!iso || Number.isNaN(date.getTime())) return "";
  return new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "long" }).format(date);
}

/**
 * Show every <time datetime data-local> in the viewer's locale and time zone. The server renders UTC as
 * the text (what a page without script shows); it stays in the title, the ISO value in datetime.
 */
export function localiseTimes(root = document) {
  for (const el of root.querySelectorAll("time[data-local]")) {
    const text = localDateTime(el.getAttribute("datetime"));
    if (!text) continue;
    if (!el.title && el.textContent.trim()) el.title = el.textContent.trim();
    el.textContent = text;
  }
}

/** "14:59", "1:02:03", or "expired" for a deadline (ISO string) against the server's clock. */
export function countdown(deadlineIso) {
  const left = Date.parse(deadlineIso) - serverNow();
  if (Number.isNaN(left)) return { text: "", expired: false, left: NaN };
  if (left <= 0) return { text: "expired", expired: true, left };
  const total = Math.ceil(left / 1000);
  const hours = Math.floor(total / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const seconds = String(total % 60).padStart(2, "0");
  const text = hours ? `${hours}:${String(minutes).padStart(2, "0")}:${seconds}` : `${minutes}:${seconds}`;
  return { text, expired: false, left };
}

/** Local time of day of an ISO timestamp, e.g. "14:03:07". */
export function timeOfDay(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return "";
  return date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });
}

/** Update every [data-deadline] element once a second; `onExpire(el)` fires once per element. */
export function startCountdowns(root, onExpire) {
  const tick = () => {
    for (const el of root.querySelectorAll("[data-deadline]")) {
      const c = countdown(el.dataset.deadline);
      if (el.textContent !== c.text) el.textContent = c.text;
      el.classList.toggle("urgent", !c.expired && c.left < 60000);
      el.classList.toggle("expired", c.expired);
      if (c.expired && !el.dataset.expiredFired) {
        el.dataset.expiredFired = "1";
        if (onExpire) onExpire(el);
      }
    }
  };
  tick();
  return setInterval(tick, 1000);
}
