// The JSON API the pages read (src/llmsizer/web/API.md): every number on a page is the API's answer, which is
// the CLI's --json answer for the same input. This module holds the endpoint paths and nothing else.

export const API = "/api/v1";

/** An API error, with the one-line message the CLI would print (problem+json "detail"), for an invalid request
 * file every line it prints ("errors"), and the other fields a cross-field error names beside "field" ("also"). */
export class ApiError extends Error {
  constructor(message, status, field, errors, also) {
    super(message);
    this.status = status;
    this.field = field || null;
    this.errors = Array.isArray(errors) ? errors : [message];
    this.also = Array.isArray(also) ? also : []; // a cross-field error's other fields (web/problems.py "also")
  }
}

async function answer(res) {
  const type = res.headers.get("content-type") || "";
  const body = type.includes("json") ? await res.json() : await res.text();
  if (res.ok) return body;
  if (body && typeof body === "object") {
    const msg = body.detail || body.title || JSON.stringify(body);
    throw new ApiError(typeof msg === "string" ? msg : JSON.stringify(msg), res.status, body.field, body.errors, body.also);
  }
  throw new ApiError(String(body || res.statusText), res.status);
}

/** POST a JSON body; an AbortSignal cancels a stale request (a newer keystroke replaced it). */
export async function post(path, body, signal) {
  const res = await fetch(API + path, { method: "POST", headers: { "content-type": "application/json",
    accept: "application/json" }, body: JSON.stringify(body), signal });
  return answer(res);
}

export async function get(path, signal) {
  return answer(await fetch(API + path, { headers: { accept: "application/json" }, signal }));
}

/** POST and keep the answer as text (a report in HTML or Markdown). */
export async function postText(path, body, signal) {
  const res = await fetch(API + path, { method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify(body), signal });
  if (!res.ok) return answer(res);
  return res.text();
}

/** Upload a model file's header (raw bytes, never the weights): the id to send as ``model_file``, and what the
 * server read from it (POST /model-files). */
export async function uploadHeader(kind, name, size, bytes) {
  const q = new URLSearchParams({ kind, name, size: String(size) });
  const res = await fetch(`${API}/model-files?${q}`, { method: "POST",
    headers: { "content-type": "application/octet-stream", accept: "application/json" }, body: bytes });
  return answer(res);
}

/** Run ``fn`` on each item with at most ``limit`` in flight (the fits-on grid: 32 fits, the server has 2 cores). */
export async function pool(items, limit, fn) {
  let next = 0;
  const worker = async () => { while (next < items.length) { const i = next++; await fn(items[i], i); } };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** ``fn`` once ``ms`` after the last call; ``.cancel()`` drops the call scheduled. */
export function debounce(fn, ms) {
  let timer = null;
  const call = (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
  call.cancel = () => { clearTimeout(timer); timer = null; };
  return call;
}
