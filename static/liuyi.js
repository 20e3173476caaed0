// liuyi.js — a dependency-free browser/Node client for liuyi's streaming translation API.
//
//   import { translateStream } from "/static/liuyi.js";
//   for await (const event of translateStream("我很好。", { signal })) {
//     if (event.type === "delta") output.textContent += event.text;
//   }
//
// Two stream formats, one async generator or helper each:
//   translateStream()      POST /v1/translate/stream, NDJSON over fetch(): abortable, sends headers
//                          (API key), typed errors before the first byte.
//   translateEventSource() GET  /v1/translate/stream?text=…, Server-Sent Events through EventSource:
//                          reconnects by itself and resumes with Last-Event-ID.
//
// Deliberate choices (do not "simplify" without reading):
//   * Bytes are decoded by ONE TextDecoder with {stream: true}: a Chinese character split across two
//     network reads stays whole. Decoding each chunk on its own would turn it into U+FFFD.
//   * Lines are split after decoding, with a carry-over buffer: a read may end mid-line or hold several.
//   * Every call owns one AbortController, linked to the caller's signal and aborted in `finally`: the
//     connection closes however the consumer stops (abort, break, exception), and the server cancels
//     the translation when its connection closes.
//   * A stream that ends without `done` or `error` is itself an error ("incomplete_stream").

const NDJSON = "application/x-ndjson";

/**
 * A failed request, before the stream started (an HTTP error status) or on the client's side.
 *
 * `status` is the HTTP status (0 when no response arrived); `code` is the server's stable error code
 * ("overloaded", "text_too_long", …) or one of the client's own: "network_error", "bad_response",
 * "incomplete_stream". `retryAfter` is in seconds (from Retry-After) or null; `details` holds the
 * remaining fields of the error body, e.g. `{limit: 5000, length: 6120, param: "text"}`.
 */
export class LiuyiError extends Error {
  /**
   * @param {{status?: number, code: string, message: string, retryAfter?: number|null,
   *          details?: Record<string, unknown>}} fields
   */
  constructor({ status = 0, code, message, retryAfter = null, details = {} }) {
    super(message);
    this.name = "LiuyiError";
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
    this.details = details;
  }
}

/**
 * Incremental NDJSON parser: bytes in, complete JSON values out. Never emits half a character or
 * half a line; blank lines are ignored.
 *
 *   const decoder = new NdjsonDecoder();
 *   decoder.push(chunk1); // -> [event, ...] for every line completed by this chunk
 *   decoder.flush();      // -> the last line, if the stream did not end with a newline
 */
export class NdjsonDecoder {
  constructor() {
    this._text = new TextDecoder("utf-8");
    this._carry = ""; // the unfinished last line
  }

  /**
   * Feed one chunk of bytes.
   * @param {Uint8Array} bytes
   * @returns {object[]} the values of the lines this chunk completed
   * @throws {LiuyiError} code "bad_response" when a line is not JSON
   */
  push(bytes) {
    this._carry += this._text.decode(bytes, { stream: true });
    const lines = this._carry.split("\n");
    this._carry = lines.pop();
    return parseLines(lines);
  }

  /**
   * End of input: decode any bytes held back and parse a final line without a newline.
   * @returns {object[]}
   * @throws {LiuyiError} code "bad_response" when that line is not JSON
   */
  flush() {
    const rest = this._carry + this._text.decode();
    this._carry = "";
    return parseLines([rest]);
  }
}

function parseLines(lines) {
  const values = [];
  for (const raw of lines) {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (!line.trim()) continue;
    try {
      values.push(JSON.parse(line));
    } catch {
      throw new LiuyiError({ code: "bad_response", message: `not a JSON line: ${line.slice(0, 80)}` });
    }
  }
  return values;
}

/**
 * Parsed events of an NDJSON byte stream (e.g. `response.body`).
 * @param {ReadableStream<Uint8Array>} body
 * @returns {AsyncGenerator<object>}
 */
export async function* ndjsonEvents(body) {
  const reader = body.getReader();
  const decoder = new NdjsonDecoder();
  let ended = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      yield* decoder.push(value);
    }
    ended = true;
    yield* decoder.flush();
  } finally {
    if (!ended) reader.cancel().catch(() => {}); // the consumer stopped early: close the body
    reader.releaseLock();
  }
}

/**
 * Translate `text` and yield the server's events as they arrive.
 *
 * Events: `start` {id, model, direction, source, target, cached, segments: [{index, start, end}]},
 * `delta` {text, index, segment} (joined deltas are the translation; index -1 marks layout text such
 * as "\n\n" placed before the segment), `segment` {index, start, end, translation, ...},
 * `ping`, and finally exactly one `done` {translation, cached, usage, timings, ...} or `error`
 * {code, message} — the generator returns after it.
 *
 * @param {string} text
 * @param {object} [options]
 * @param {string} [options.source="auto"]  source language, e.g. "zh", or "auto"
 * @param {string} [options.target]          target language, e.g. "en" (default: the model's)
 * @param {AbortSignal} [options.signal]     aborting closes the connection (the server stops work)
 * @param {string} [options.baseUrl=""]      server origin, e.g. "http://127.0.0.1:8000"; "" = this page's
 * @param {string} [options.apiKey]          sent as `Authorization: Bearer <apiKey>`
 * @param {number} [options.maxNewTokens]    cap on generated tokens per segment
 * @returns {AsyncGenerator<object>}
 * @throws {LiuyiError} an HTTP error status, no connection, a malformed or unfinished stream
 * @throws {DOMException} "AbortError" (or the signal's reason) when `signal` aborts
 */
export async function* translateStream(
  text,
  { source = "auto", target, signal, baseUrl = "", apiKey, maxNewTokens } = {},
) {
  const controller = new AbortController();
  const forwardAbort = () => controller.abort(signal.reason);
  if (signal?.aborted) forwardAbort();
  else signal?.addEventListener("abort", forwardAbort, { once: true });

  const headers = { "Content-Type": "application/json", Accept: NDJSON };
  if (apiKey) headers.Authorization = `Bearer ${apiKey}`;
  const body = { text, source };
  if (target) body.target = target;
  if (maxNewTokens != null) body.max_new_tokens = maxNewTokens;

  try {
    const response = await request(`${baseUrl}/v1/translate/stream`, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    if (!response.ok) throw await errorFrom(response);
    const type = response.headers.get("content-type") ?? "";
    if (!type.toLowerCase().startsWith(NDJSON) || !response.body) {
      throw new LiuyiError({
        status: response.status,
        code: "bad_response",
        message: `expected ${NDJSON}, got ${type || "no content type"}`,
      });
    }
    try {
      for await (const event of ndjsonEvents(response.body)) {
        yield event;
        if (event.type === "done" || event.type === "error") return;
      }
    } catch (error) {
      if (controller.signal.aborted) throw controller.signal.reason ?? error;
      if (error instanceof LiuyiError) throw error;
      throw new LiuyiError({ code: "network_error", message: `connection lost (${error.message})` });
    }
    throw new LiuyiError({
      status: response.status,
      code: "incomplete_stream",
      message: "the stream ended before the translation was done",
    });
  } finally {
    signal?.removeEventListener("abort", forwardAbort);
    controller.abort(); // closes the connection if it is still open; a no-op otherwise
  }
}

/** fetch(), with "no response at all" turned into a LiuyiError (aborts pass through). */
async function request(url, init) {
  try {
    return await fetch(url, init);
  } catch (error) {
    if (init.signal?.aborted) throw error;
    throw new LiuyiError({ code: "network_error", message: `cannot reach the server (${error.message})` });
  }
}

/**
 * The LiuyiError for a non-2xx response with liuyi's JSON error body {"error": {code, message, ...}}.
 * @param {Response} response
 * @returns {Promise<LiuyiError>}
 */
export async function errorFrom(response) {
  let payload = null;
  if ((response.headers.get("content-type") ?? "").includes("json")) {
    try {
      payload = (await response.json())?.error ?? null;
    } catch {
      payload = null;
    }
  }
  const { code, message, ...details } = payload && typeof payload === "object" ? payload : {};
  return new LiuyiError({
    status: response.status,
    code: typeof code === "string" ? code : "http_error",
    message: typeof message === "string" ? message : `HTTP ${response.status} ${response.statusText}`.trim(),
    retryAfter: parseRetryAfter(response.headers.get("retry-after")) ?? numberOrNull(details.retry_after),
    details,
  });
}

/**
 * Seconds to wait from a Retry-After header value (delta-seconds or an HTTP date), or null.
 * @param {string|null} value
 * @param {number} [now=Date.now()]
 * @returns {number|null}
 */
export function parseRetryAfter(value, now = Date.now()) {
  if (value == null || value.trim() === "") return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, Math.ceil((date - now) / 1000));
}

function numberOrNull(value) {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

/**
 * Translate over Server-Sent Events (GET /v1/translate/stream?text=…). The browser reconnects by
 * itself after a network hiccup and the server resumes after the Last-Event-ID it sends. The
 * EventSource is closed after `done` or `error`.
 *
 * `onEvent` receives the same typed events as translateStream() (no pings: SSE heartbeats are
 * comments). A connection that cannot be (re)established ends with a client-made
 * `{type: "error", code: "network_error" | "http_error", message}` event. The text travels in the
 * URL, so keep it short (servers and proxies limit URL length); the API key too, as `api_key`.
 *
 * @param {string} text
 * @param {object} options
 * @param {(event: object) => void} options.onEvent
 * @param {string} [options.source="auto"]
 * @param {string} [options.target]
 * @param {string} [options.baseUrl=""]
 * @param {string} [options.apiKey]  visible in the URL and server logs: prefer translateStream()
 * @returns {EventSource} call `.close()` to stop early
 */
export function translateEventSource(text, { source = "auto", target, baseUrl = "", apiKey, onEvent }) {
  const params = new URLSearchParams({ text, source });
  if (target) params.set("target", target);
  if (apiKey) params.set("api_key", apiKey);
  const stream = new EventSource(`${baseUrl}/v1/translate/stream?${params}`);
  let finished = false;

  const deliver = (message) => {
    if (finished) return;
    const event = JSON.parse(message.data);
    if (event.type === "done" || event.type === "error") {
      finished = true;
      stream.close(); // otherwise EventSource reconnects when the server ends the response
    }
    onEvent(event);
  };
  for (const type of ["start", "delta", "segment", "done"]) stream.addEventListener(type, deliver);
  // "error" is both the server's error event (with data) and EventSource's connection error (without).
  stream.addEventListener("error", (message) => {
    if (typeof message.data === "string") {
      deliver(message);
    } else if (stream.readyState === EventSource.CLOSED && !finished) {
      finished = true; // an HTTP error status or a wrong content type: EventSource gives up
      onEvent({ type: "error", code: "http_error", message: "the server refused the event stream" });
    }
    // readyState CONNECTING: the browser is reconnecting and will resume with Last-Event-ID.
  });
  return stream;
}

/**
 * The server's models and directions (GET /v1/models).
 * @param {string} [baseUrl=""]
 * @param {{signal?: AbortSignal, apiKey?: string}} [options]
 * @returns {Promise<Array<{id: string, source: string, target: string, direction: string,
 *                          max_input_chars: number, max_new_tokens: number}>>}
 * @throws {LiuyiError} e.g. status 401 when the server needs an API key
 */
export async function models(baseUrl = "", { signal, apiKey } = {}) {
  const headers = { Accept: "application/json" };
  if (apiKey) headers.Authorization = `Bearer ${apiKey}`;
  const response = await request(`${baseUrl}/v1/models`, { headers, signal });
  if (!response.ok) throw await errorFrom(response);
  const body = await response.json();
  return Array.isArray(body?.data) ? body.data : [];
}
