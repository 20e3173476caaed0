// The live bilingual page: source text on the left, the translation streaming in on the right.
//
// One translation runs at a time. A run owns one AbortController: Stop, a new translation, or a new
// keystroke (after the debounce) aborts it, which closes the connection and so cancels the work on
// the server. A run that is overloaded (503 + Retry-After) waits and retries itself.
//
// What the output pane shows, and how a translated sentence is linked to its source, is in render.js.

import { LiuyiError, models, translateStream } from "./liuyi.js";
import { Highlighter, Rendering } from "./render.js";

const DEBOUNCE_MS = 500; // pause in typing before translate-as-you-type starts a translation
const MAX_RETRIES = 5; // automatic retries of an overloaded request before giving up
const LANGUAGE_LABELS = { zh: "中", en: "EN" };
const HTML_LANG = { zh: "zh-Hans", en: "en" };

const $ = (id) => document.getElementById(id);
const ui = {
  directions: $("directions"),
  source: $("source"),
  backdrop: $("backdrop"),
  mirror: $("mirror"),
  output: $("output"),
  translate: $("translate"),
  stop: $("stop"),
  live: $("live"),
  counter: $("counter"),
  copy: $("copy"),
  status: $("status"),
  statusText: $("status-text"),
  stats: $("stats"),
  cached: $("cached"),
  apiKey: $("api-key"),
  settings: $("settings"),
};

const state = {
  models: [], // from GET /v1/models
  run: null, // the current translation: {controller, attempt, retryTimer}
  debounce: null,
  rendering: null, // the Rendering shown in the output pane
};
const highlighter = new Highlighter(ui);

// ---- directions and limits ---------------------------------------------------------------------

function directionLabel(model) {
  const name = (code) => LANGUAGE_LABELS[code] ?? code.toUpperCase();
  return `${name(model.source)}→${name(model.target)}`;
}

function renderDirections(list) {
  for (const model of list) {
    const label = document.createElement("label");
    const input = document.createElement("input");
    Object.assign(input, { type: "radio", name: "direction", value: model.direction });
    label.append(input, ` ${directionLabel(model)}`);
    label.title = model.id;
    ui.directions.append(label);
  }
}

function selectedModel() {
  const value = ui.directions.querySelector("input:checked")?.value ?? "auto";
  return state.models.find((m) => m.direction === value) ?? null;
}

function requestOptions() {
  const model = selectedModel();
  return model ? { source: model.source, target: model.target } : { source: "auto" };
}

function inputLimit() {
  const model = selectedModel();
  if (model) return model.max_input_chars;
  const limits = state.models.map((m) => m.max_input_chars).filter(Number.isFinite);
  return limits.length ? Math.min(...limits) : null;
}

function updateCounter() {
  const count = [...ui.source.value].length; // code points, as the server counts
  const limit = inputLimit();
  const over = limit != null && count > limit;
  ui.counter.textContent = limit == null ? `${count} characters` : `${count} / ${limit} characters`;
  if (over) ui.counter.textContent += " — too long";
  ui.counter.classList.toggle("over", over);
  return { count, limit, over };
}

// ---- status line -------------------------------------------------------------------------------

function setStatus(kind, message, { stats = "", cached = false } = {}) {
  ui.status.dataset.state = kind;
  ui.statusText.textContent = message;
  ui.stats.textContent = stats;
  ui.cached.hidden = !cached;
}

function formatMs(ms) {
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`;
}

function showDone(done) {
  const { ttft_ms: ttft, total_ms: total } = done.timings;
  const tokens = done.usage.output_tokens;
  // Generated tokens over the whole request; a replayed (cached) stream has no speed worth showing.
  const speed = !done.cached && total > 0 ? (tokens / (total / 1000)).toFixed(1) : "—";
  const rate = `${speed} tokens/s`;
  const stats = [`first token ${formatMs(ttft)}`, `${tokens} tokens`, rate, `total ${formatMs(total)}`];
  setStatus("done", done.finish_reason === "length" ? "Done (cut at the token limit)." : "Done.", {
    stats: stats.join(" · "),
    cached: done.cached,
  });
}

/** A message a person can act on, for a LiuyiError or a stream's error event. */
function describe({ code, message, status = 0, details = {} }, started) {
  switch (code) {
    case "text_too_long":
      return (
        `Text too long: ${details.length ?? "it"} characters; ` +
        `this server accepts at most ${details.limit} characters.`
      );
    case "body_too_large":
      return `The text is too large to send (limit ${details.limit} bytes).`;
    case "overloaded":
    case "shutting_down":
      return "The server is still busy. Please try again in a moment.";
    case "network_error":
      return started
        ? "Connection lost during the translation. Check your network and translate again."
        : "Network error: cannot reach the server. Check your connection and try again.";
    case "incomplete_stream":
      return "The translation was cut off: the connection closed before it was done.";
    case "missing_api_key":
    case "invalid_api_key":
      return "This server needs a valid API key: enter it under Settings below.";
    case "request_timeout":
      return "The server took too long and stopped this translation.";
    default:
      return status >= 400 && status < 500
        ? `Request refused (${code}): ${message}`
        : `Server error (${code}): ${message}`;
  }
}

// ---- running translations ----------------------------------------------------------------------

function setRunning(running) {
  ui.stop.disabled = !running;
  ui.output.setAttribute("aria-busy", String(running));
}

/** Abort the current translation without a message (it is being replaced or was emptied). */
function cancelRun() {
  const run = state.run;
  if (!run) return;
  state.run = null;
  clearTimeout(run.retryTimer);
  run.controller.abort();
  state.rendering?.finish();
  setRunning(false);
}

/** Start translating the source text, replacing any translation in progress. */
function translate() {
  clearTimeout(state.debounce);
  cancelRun();
  const text = ui.source.value;
  if (!text.trim()) {
    clearOutput();
    setStatus("idle", "Type or paste text to translate.");
    return;
  }
  const run = { controller: new AbortController(), attempt: 0, retryTimer: null };
  state.run = run;
  setRunning(true);
  attempt(run, text);
}

async function attempt(run, text) {
  const current = () => state.run === run;
  let rendering = null;
  setStatus("waiting", run.attempt ? "Retrying…" : "Translating…");
  try {
    const options = {
      ...requestOptions(),
      signal: run.controller.signal,
      apiKey: ui.apiKey.value.trim() || undefined,
    };
    for await (const event of translateStream(text, options)) {
      if (!current()) return;
      switch (event.type) {
        case "start":
          rendering = state.rendering = new Rendering(ui.output, text);
          rendering.start(event);
          ui.output.lang = HTML_LANG[event.target] ?? event.target;
          ui.source.lang = HTML_LANG[event.source] ?? event.source;
          ui.copy.disabled = true;
          setStatus("streaming", "Translating…", { cached: event.cached });
          break;
        case "delta":
          rendering.delta(event);
          break;
        case "segment":
          rendering.segment(event);
          break;
        case "done":
          showDone(event);
          break;
        case "error":
          setStatus("error", describe(event, true));
          break;
      }
    }
  } catch (error) {
    if (!current()) return; // replaced by a newer translation: nothing to say
    if (run.controller.signal.aborted) {
      // Only stop() aborts the current run (a replaced run is no longer current).
      setStatus("stopped", "Stopped.");
    } else if (error instanceof LiuyiError && error.status === 503 && run.attempt < MAX_RETRIES) {
      retryLater(run, text, error);
      return;
    } else if (error instanceof LiuyiError) {
      setStatus("error", describe(error, rendering != null));
    } else {
      setStatus("error", `Unexpected error: ${error.message}`);
      console.error(error);
    }
  } finally {
    rendering?.finish();
  }
  if (current() && run.retryTimer == null) {
    state.run = null;
    setRunning(false);
    ui.copy.disabled = !state.rendering?.translation;
  }
}

/** 503 overloaded / shutting_down: count down Retry-After seconds, then try again. */
function retryLater(run, text, error) {
  run.attempt += 1;
  let remaining = Math.max(1, Math.ceil(error.retryAfter ?? 1));
  const why = error.code === "shutting_down" ? "restarting" : "overloaded";
  const tick = () => {
    if (state.run !== run) return;
    if (remaining === 0) {
      run.retryTimer = null;
      attempt(run, text);
      return;
    }
    setStatus("overloaded", `The server is busy (${why}). Retrying in ${remaining} s…`);
    remaining -= 1;
    run.retryTimer = setTimeout(tick, 1000);
  };
  tick();
}

function stop() {
  const run = state.run;
  if (!run) return;
  if (run.retryTimer != null) {
    cancelRun(); // waiting to retry: no request in flight
    setStatus("stopped", "Stopped.");
    return;
  }
  run.controller.abort(); // attempt() sees its own run aborted and reports "Stopped."
}

function clearOutput() {
  state.rendering = null;
  ui.output.replaceChildren();
  ui.copy.disabled = true;
  highlight(-1);
}

function onInput() {
  const { over } = updateCounter();
  highlight(-1);
  clearTimeout(state.debounce);
  if (!ui.source.value.trim()) {
    cancelRun();
    clearOutput();
    setStatus("idle", "Type or paste text to translate.");
    return;
  }
  if (ui.live.checked && !over) state.debounce = setTimeout(translate, DEBOUNCE_MS);
}

// ---- linking a translated sentence to its source -------------------------------------------------

function highlight(index, from = null) {
  highlighter.show(state.rendering, index, from);
}

function highlightAtCaret() {
  const rendering = state.rendering;
  if (!rendering || rendering.sourceText !== ui.source.value) return;
  highlight(rendering.segmentAt(ui.source.selectionStart), "source");
}

// ---- copying -----------------------------------------------------------------------------------

async function copyTranslation() {
  const text = state.rendering?.translation ?? "";
  if (!text) return;
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // No async clipboard (a plain-http page on another host): copy through a hidden textarea.
    const scratch = Object.assign(document.createElement("textarea"), { value: text });
    scratch.setAttribute("readonly", "");
    scratch.className = "offscreen";
    document.body.append(scratch);
    scratch.select();
    document.execCommand("copy");
    scratch.remove();
  }
  ui.copy.textContent = "Copied ✓";
  setTimeout(() => (ui.copy.textContent = "Copy translation"), 1500);
}

// ---- wiring ------------------------------------------------------------------------------------

async function init() {
  ui.apiKey.value = sessionStorage.getItem("liuyi.apiKey") ?? "";
  const applyApiKey = () => {
    sessionStorage.setItem("liuyi.apiKey", ui.apiKey.value.trim());
    if (!state.models.length) loadModels(); // the list may have been refused for want of a key
  };
  ui.apiKey.addEventListener("change", applyApiKey);
  ui.settings.addEventListener("submit", (event) => {
    event.preventDefault(); // Enter in the key field must not reload the page
    applyApiKey();
  });
  if (/Mac|iPhone|iPad/.test(navigator.platform)) {
    for (const key of document.querySelectorAll("kbd.mod")) key.textContent = "⌘";
  }
  ui.translate.addEventListener("click", translate);
  ui.stop.addEventListener("click", stop);
  ui.copy.addEventListener("click", copyTranslation);
  ui.source.addEventListener("input", onInput);
  ui.source.addEventListener("scroll", () => highlighter.syncScroll());
  for (const type of ["click", "keyup", "select", "focus"]) {
    ui.source.addEventListener(type, highlightAtCaret);
  }
  ui.source.addEventListener("blur", () => highlight(-1));
  // pointermove, not mouseover: scrolling the output under a resting pointer (as the caret
  // highlight does) must not steal the highlight; only a pointer that really moved does.
  let pointer = "";
  ui.output.addEventListener("pointermove", (event) => {
    const where = `${event.clientX},${event.clientY}`;
    if (where === pointer) return;
    pointer = where;
    const span = event.target.closest?.(".segment");
    const index = span ? Number(span.dataset.segment) : -1;
    if (index !== highlighter.index) highlight(index, "output");
  });
  ui.output.addEventListener("pointerleave", () => highlight(-1));
  ui.directions.addEventListener("change", () => {
    const { over } = updateCounter();
    if (ui.live.checked && ui.source.value.trim() && !over) translate();
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      translate();
    } else if (event.key === "Escape" && state.run) {
      stop();
    }
  });

  await loadModels();
  document.documentElement.dataset.ready = "true"; // for tests and scripts driving the page
}

/** GET /v1/models: the direction switch and the input limit. */
async function loadModels() {
  try {
    state.models = await models("", { apiKey: ui.apiKey.value.trim() || undefined });
    renderDirections(state.models);
    setStatus("idle", state.models.length ? "Ready." : "This server has no models loaded.");
  } catch (error) {
    const unauthorized = error instanceof LiuyiError && error.status === 401;
    setStatus("error", unauthorized ? describe(error, false) : `Cannot load the model list: ${error.message}`);
  }
  updateCounter();
}

init();
