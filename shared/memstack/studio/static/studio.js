// Memstack Studio: every view reads the Memstack HTTP API at this page's origin (/v1/..., docs/api.md).
// The DOM is built with textContent only: memory text is never parsed as HTML.
"use strict";

const PAGE_SIZE = 20;
const MAX_RANGE_MESSAGES = 1000;

const state = {
  resource: "",
  thread: "",
  view: "welcome",
  threadsCursor: null,
  messages: [],
  messagesCursor: null,
  inspected: null,
};

class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

// --- plumbing -------------------------------------------------------------------------------------

function $(selector) {
  return document.querySelector(selector);
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "className") node.className = value;
    else if (name === "onclick") node.addEventListener("click", value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function query(params) {
  return Object.entries(params)
    .filter(([, v]) => v !== undefined && v !== null && v !== "")
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(typeof v === "object" ? JSON.stringify(v) : v)}`)
    .join("&");
}

function threadPath(suffix) {
  return `threads/${encodeURIComponent(state.thread)}${suffix ? "/" + suffix : ""}`;
}

async function api(method, path, params, body) {
  const url = `/v1/${path}?${query({ resource_id: state.resource, ...(params || {}) })}`;
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(url, init);
  if (response.status === 204) return null;
  let data = null;
  try {
    data = await response.json();
  } catch (_) {
    data = null;
  }
  if (!response.ok) {
    const error = (data && data.error) || {};
    throw new ApiError(response.status, error.code || "error", error.message || response.statusText, error.field);
  }
  return data;
}

function showError(error) {
  const box = $("#error");
  if (!error) {
    box.hidden = true;
    box.textContent = "";
    return;
  }
  const where = error.field ? ` (field ${error.field})` : "";
  box.textContent = error instanceof ApiError
    ? `${error.status} ${error.code}: ${error.message}${where}`
    : String(error.message || error);
  box.hidden = false;
}

async function guarded(work) {
  showError(null);
  try {
    await work();
  } catch (error) {
    showError(error);
  }
}

function when(value) {
  if (!value) return "";
  const date = new Date(value);
  return isNaN(date) ? String(value) : date.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

function score(value) {
  return value === null || value === undefined ? "–" : Number(value).toFixed(4);
}

function text(message) {
  return (message.parts || [])
    .filter((p) => p.type === "text")
    .map((p) => p.text)
    .join("\n");
}

function facts(table, rows) {
  const body = table.querySelector("tbody");
  body.replaceChildren(...rows.map(([name, value, key]) =>
    el("tr", { "data-key": key || name }, el("th", {}, name), el("td", {}, value === null || value === undefined ? "–" : String(value)))));
}

// --- navigation -----------------------------------------------------------------------------------

const VIEWS = {
  welcome: () => {},
  threads: () => loadThreads(false),
  messages: () => loadMessages(false),
  "working-memory": () => loadWorkingMemory(),
  observations: () => loadObservations(),
  recall: () => {},
  context: () => {},
  index: () => loadIndexHealth(),
};

const NEEDS_THREAD = new Set(["messages", "observations", "recall", "context"]);

function writeHash() {
  const params = query({ resource: state.resource, thread: state.thread, view: state.view });
  if (location.hash.slice(1) !== params) history.replaceState(null, "", `#${params}`);
}

function show(view) {
  if (!state.resource && view !== "welcome") view = "welcome";
  state.view = view;
  for (const section of document.querySelectorAll(".view")) section.hidden = section.id !== `view-${view}`;
  for (const button of document.querySelectorAll("nav button")) {
    if (button.dataset.view === view) button.setAttribute("aria-current", "page");
    else button.removeAttribute("aria-current");
  }
  $("#current-thread").textContent = state.thread ? `thread: ${state.thread}` : "no thread chosen";
  writeHash();
  if (NEEDS_THREAD.has(view) && !state.thread) {
    showError(new Error("Choose a thread in the Threads view first."));
    return;
  }
  if (NEEDS_THREAD.has(view) && !routable(state.thread)) {
    showError(new Error(
      `The thread id ${JSON.stringify(state.thread)} cannot be addressed over HTTP: ids hold letters, digits, ` +
      `'_' and ${ROUTABLE_SPECIALS}, and are not '.' or '..' (docs/api.md "Ids over HTTP"). A thread stored ` +
      "under such an id by an earlier version is copied or deleted with the library (clone_thread, delete_thread).",
    ));
    return;
  }
  guarded(VIEWS[view]);
}

// The API's rule for ids in a path (memstack.model.ROUTABLE_ID; Python's Unicode \w is letters, numbers and
// '_'): a thread id outside it could only ever answer 404, so the page says why instead of asking.
const ROUTABLE_SPECIALS = "-._~()'!*:@,;=+&$<> []{}|^";
const ROUTABLE_ID = /^[-._~()'!*:@,;=+&$<> \[\]{}|^\p{L}\p{N}_]+$/u;

function routable(id) {
  return id !== "." && id !== ".." && ROUTABLE_ID.test(id);
}

function chooseThread(threadId, view) {
  if (threadId !== state.thread) {
    state.thread = threadId;
    forgetThread();
  }
  show(view || "messages");
}

// Everything loaded or computed for one thread (its messages, a recall, an assembled context) is dropped
// when the thread or resource changes, so no view shows another thread's results under this one's name.
function forgetThread() {
  state.messages = [];
  state.messagesCursor = null;
  state.inspected = null;
  $("[data-testid=context-layers] tbody").replaceChildren();
  $("#context-total").textContent = "";
  renderRequest();
  $("[data-testid=recall-hits] tbody").replaceChildren();
  $("#recall-summary").textContent = "";
}

// --- threads --------------------------------------------------------------------------------------

async function loadThreads(more) {
  const data = await api("GET", "threads", {
    limit: PAGE_SIZE,
    order_by: "updated_at",
    direction: "desc",
    cursor: more ? state.threadsCursor : null,
  });
  const body = $("[data-testid=threads-table] tbody");
  const rows = data.threads.map((t) =>
    el("tr", { "data-thread": t.id },
      el("td", {}, el("a", { href: "#", onclick: (e) => { e.preventDefault(); chooseThread(t.id); } }, t.title || "(untitled)")),
      el("td", {}, el("code", {}, t.id)),
      el("td", { className: "num" }, t.last_seq),
      el("td", {}, when(t.updated_at)),
      el("td", {}, when(t.created_at))));
  if (more) body.append(...rows);
  else body.replaceChildren(...rows);
  state.threadsCursor = data.next_cursor;
  $("#threads-more").hidden = !data.next_cursor;
}

// --- messages -------------------------------------------------------------------------------------

async function loadMessages(more) {
  if (!more) {
    state.messages = [];
    state.messagesCursor = null;
  }
  const data = await api("GET", threadPath("messages"), { limit: PAGE_SIZE, cursor: more ? state.messagesCursor : null });
  state.messages = state.messages.concat(data.messages);
  state.messagesCursor = data.next_cursor;
  renderMessages();
  $("#messages-more").hidden = !data.next_cursor;
}

function toolResults(messages) {
  const byCall = new Map();
  for (const m of messages) for (const p of m.parts) if (p.type === "tool_result") byCall.set(p.tool_call_id, p);
  return byCall;
}

function toolCalls(messages) {
  const ids = new Set();
  for (const m of messages) for (const p of m.parts) if (p.type === "tool_call") ids.add(p.id);
  return ids;
}

function renderResult(part) {
  const value = typeof part.result === "string" ? part.result : JSON.stringify(part.result, null, 2);
  return el("div", { className: `tool-result${part.is_error ? " error" : ""}`, "data-testid": "tool-result", "data-call": part.tool_call_id },
    el("span", { className: "muted" }, part.is_error ? "error result: " : "result: "), value);
}

function renderPart(part, results, calls) {
  switch (part.type) {
    case "text":
      return el("div", { className: "part" }, part.text);
    case "reasoning":
      return el("div", { className: "part reasoning" }, `reasoning: ${part.text}`);
    case "tool_call": {
      const result = results.get(part.id);
      return el("div", { className: "part tool-call", "data-testid": "tool-call", "data-call": part.id },
        el("code", {}, `${part.name}(${JSON.stringify(part.args)})`),
        result ? renderResult(result) : el("div", { className: "muted" }, "no result yet"));
    }
    case "tool_result":
      return calls.has(part.tool_call_id)
        ? el("div", { className: "part muted" }, `result of ${part.name || "tool"} call ${part.tool_call_id}: shown with its call`)
        : renderResult(part);
    case "image":
      return el("div", { className: "part image", "data-testid": "image" }, `[image: ${part.caption || part.url.split("/").pop()}]`);
    case "file":
      return el("div", { className: "part file" }, `[file: ${part.name || part.url.split("/").pop()} (${part.media_type})]`);
    default:
      return el("div", { className: "part muted" }, `[${part.type}]`);
  }
}

function renderMessage(m, results, calls) {
  const author = m.author ? (m.author.name || m.author.id) + (m.author.role ? ` (${m.author.role})` : "") : "";
  const inspect = m.role === "user"
    ? el("button", { type: "button", onclick: () => inspectMessage(text(m)) }, "What the model sees")
    : null;
  return el("li", { "data-message": m.id, "data-seq": m.seq },
    el("div", { className: "meta" },
      el("span", { className: `role role-${m.role}` }, m.role),
      author ? el("span", { "data-testid": "author" }, author) : null,
      el("span", {}, `seq ${m.seq}`),
      el("span", {}, when(m.created_at)),
      el("code", {}, m.id),
      inspect),
    m.parts.map((p) => renderPart(p, results, calls)));
}

function renderMessages() {
  const results = toolResults(state.messages);
  const calls = toolCalls(state.messages);
  $("#messages-list").replaceChildren(...state.messages.map((m) => renderMessage(m, results, calls)));
}

function inspectMessage(messageText) {
  $("#context-form").elements.message.value = messageText;
  show("context");
  guarded(runInspect);
}

// --- working memory -------------------------------------------------------------------------------

function wmPath() {
  return $("#wm-scope").value === "thread" ? threadPath("working-memory") : "working-memory";
}

// The routes follow the server's options, as Memory does; the Studio names the scope the operator chose
// (and reads it whether or not the server shows working memory to the model).
function wmOptions() {
  return { working_memory: { enabled: true, scope: $("#wm-scope").value } };
}

async function loadWorkingMemory() {
  if ($("#wm-scope").value === "thread" && !state.thread) throw new Error("Choose a thread for thread-scoped working memory.");
  const data = await api("GET", wmPath(), { options: JSON.stringify(wmOptions()) });
  const doc = data.working_memory;
  $("#wm-text").value = doc || "";
  renderWorkingMemory(doc);
}

function renderWorkingMemory(doc) {
  const target = $("#wm-rendered");
  if (doc === null || doc === undefined || doc === "") {
    target.replaceChildren(el("p", { className: "muted" }, "No working memory yet."));
    return;
  }
  if ($("#wm-json").checked) {
    try {
      target.replaceChildren(el("div", { className: "tree", "data-testid": "wm-tree" }, tree(JSON.parse(doc))));
      return;
    } catch (_) {
      target.replaceChildren(el("p", { className: "muted" }, "Not JSON: shown as markdown."), ...markdown(doc));
      return;
    }
  }
  target.replaceChildren(...markdown(doc));
}

function tree(value) {
  if (value === null || typeof value !== "object") return el("span", { className: "value" }, JSON.stringify(value));
  const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
  return el("ul", {}, entries.map(([k, v]) =>
    el("li", {}, el("span", { className: "key" }, `${k}: `), tree(v))));
}

function inline(line) {
  // **bold** only; everything else stays text
  const out = [];
  const pattern = /\*\*([^*]+)\*\*/g;
  let last = 0;
  for (const match of line.matchAll(pattern)) {
    out.push(line.slice(last, match.index), el("strong", {}, match[1]));
    last = match.index + match[0].length;
  }
  out.push(line.slice(last));
  return out;
}

function markdown(doc) {
  const blocks = [];
  let list = null;
  for (const raw of doc.split("\n")) {
    const line = raw.trimEnd();
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    const item = /^\s*[-*]\s+(.*)$/.exec(line);
    if (item) {
      if (!list) blocks.push((list = el("ul", {})));
      list.append(el("li", {}, inline(item[1])));
      continue;
    }
    list = null;
    if (heading) blocks.push(el(`h${Math.min(6, heading[1].length + 2)}`, {}, inline(heading[2])));
    else if (line) blocks.push(el("p", {}, inline(line)));
  }
  return blocks;
}

async function saveWorkingMemory() {
  $("#wm-status").textContent = "";
  await api("PUT", wmPath(), {}, { working_memory: $("#wm-text").value, options: wmOptions() });
  await loadWorkingMemory();
  $("#wm-status").textContent = "Saved.";
}

// --- observations ---------------------------------------------------------------------------------

const RECORD_FACTS = [
  ["Scope", "scope"],
  ["Generations (reflections)", "generation_count"],
  ["Origin", "origin_type"],
  ["Cursor (last observed seq)", "observed_seq"],
  ["Pending message tokens", "pending_message_tokens"],
  ["Buffered chunks", "buffered_chunks"],
  ["Observation tokens", "observation_tokens"],
  ["Failures", "failure_count"],
  ["Last error", "last_error"],
  ["Current task", "current_task"],
  ["Suggested response", "suggested_response"],
  ["Updated", "updated_at"],
];

async function loadObservations() {
  const data = await api("GET", threadPath("observations"), { resource_usage: "true" });
  const record = data.record;
  if (!record) {
    facts($("#obs-record"), [["Record", "nothing observed, buffered or metered for this thread yet", "record"]]);
    facts($("#obs-usage"), []);
    $("#obs-log").replaceChildren();
    return;
  }
  facts($("#obs-record"), RECORD_FACTS.map(([label, key]) =>
    [label, key === "updated_at" ? when(record[key]) : record[key], key]));
  const usage = record.usage || {};
  const total = data.resource_usage ? data.resource_usage.usage : {};
  facts($("#obs-usage"), Object.keys(usage).map((key) =>
    [key.replaceAll("_", " "), data.resource_usage ? `${usage[key]} (resource: ${total[key]})` : usage[key], key]));
  renderLog(record.active_observations || "");
}

function observationGroups(log) {
  const pattern = /<observation-group\b([^>]*)>([\s\S]*?)<\/observation-group>/g;
  const groups = [];
  let last = 0;
  for (const match of log.matchAll(pattern)) {
    const before = log.slice(last, match.index).trim();
    if (before) groups.push({ text: before });
    const attrs = {};
    for (const a of match[1].matchAll(/(\w+)="([^"]*)"/g)) attrs[a[1]] = a[2];
    groups.push({ id: attrs.id, kind: attrs.kind || "observation", range: attrs.range, text: match[2].trim() });
    last = match.index + match[0].length;
  }
  const rest = log.slice(last).trim();
  if (rest) groups.push({ text: rest });
  return groups;
}

function renderLog(log) {
  const target = $("#obs-log");
  if (!log.trim()) {
    target.replaceChildren(el("p", { className: "muted" }, "The log is empty (observations are buffered or pending)."));
    return;
  }
  const groups = observationGroups(log);
  const nodes = groups.map((g, i) => {
    if (!g.range) {
      return el("div", { className: "group", "data-testid": "obs-group" },
        el("div", { className: "meta" }, groups.length === 1
          ? "The whole log (groups carry message ranges when observational_memory.retrieval is on)"
          : "Outside any group"),
        el("pre", {}, g.text));
    }
    const [first, lastId] = g.range.split(":");
    const slot = el("div", { "data-testid": "obs-group-messages" });
    return el("div", { className: "group", "data-testid": "obs-group", "data-range": g.range },
      el("div", { className: "meta" }, `group ${i + 1} · ${g.kind} · ${g.id || ""} · messages ${first} → ${lastId}`,
        el("button", { type: "button", onclick: () => guarded(() => showGroupMessages(first, lastId, slot)) }, "Messages behind it")),
      el("pre", {}, g.text),
      slot);
  });
  target.replaceChildren(...nodes);
}

async function allThreadMessages() {
  let cursor = null;
  let out = [];
  do {
    const page = await api("GET", threadPath("messages"), { limit: 200, cursor });
    out = out.concat(page.messages);
    cursor = page.next_cursor;
  } while (cursor && out.length < MAX_RANGE_MESSAGES);
  return out;
}

async function showGroupMessages(first, last, slot) {
  const messages = await allThreadMessages();
  const a = messages.find((m) => m.id === first);
  const b = messages.find((m) => m.id === last);
  if (!a || !b) {
    slot.replaceChildren(el("p", { className: "muted" }, "These messages are not in this thread (another thread of the resource)."));
    return;
  }
  const inRange = messages.filter((m) => m.seq >= a.seq && m.seq <= b.seq);
  const results = toolResults(inRange);
  const calls = toolCalls(inRange);
  slot.replaceChildren(el("ol", { className: "group-messages" }, inRange.map((m) => renderMessage(m, results, calls))));
}

// --- recall playground ----------------------------------------------------------------------------

async function runRecall() {
  const form = $("#recall-form").elements;
  const recall = {
    mode: form.mode.value,
    top_k: Number(form.top_k.value),
    message_range: { before: Number(form.before.value), after: Number(form.after.value) },
    scope: form.scope.value,
  };
  if (form.filter.value.trim()) {
    try {
      recall.filter = JSON.parse(form.filter.value);
    } catch (error) {
      throw new Error(`The filter is not JSON: ${error.message}`);
    }
  }
  const data = await api("POST", threadPath("recall"), {}, { query: form.query.value, options: { semantic_recall: recall } });
  const byId = new Map(data.messages.map((m) => [m.id, m]));
  const rows = data.hits.map((h, i) => el("tr", { "data-message": h.message_id },
    el("td", { className: "num" }, i + 1),
    el("td", {}, el("code", {}, h.message_id)),
    el("td", {}, h.thread_id),
    el("td", { className: "num" }, h.seq),
    el("td", { className: "num", "data-col": "score" }, score(h.score)),
    el("td", { className: "num", "data-col": "vector_rank" }, h.vector_rank ?? "–"),
    el("td", { className: "num", "data-col": "vector_score" }, score(h.vector_score)),
    el("td", { className: "num", "data-col": "keyword_rank" }, h.keyword_rank ?? "–"),
    el("td", { className: "num", "data-col": "keyword_score" }, score(h.keyword_score)),
    el("td", {}, byId.has(h.message_id) ? text(byId.get(h.message_id)).slice(0, 200) : "")));
  $("[data-testid=recall-hits] tbody").replaceChildren(...rows);
  $("#recall-summary").textContent = `${data.hits.length} hits; ${data.messages.length} messages with their neighbours.`;
}

// --- what the model sees --------------------------------------------------------------------------

async function runInspect() {
  const form = $("#context-form").elements;
  const body = {};
  if (form.message.value.trim()) body.message = form.message.value;
  if (form.instructions.value.trim()) body.instructions = form.instructions.value;
  const data = await api("POST", threadPath("inspect"), {}, body);
  state.inspected = data;
  const rows = data.layers.map((layer, i) => el("tr", { "data-layer": layer.layer },
    el("td", { className: "num" }, i + 1),
    el("td", {}, layer.layer.replaceAll("_", " ")),
    el("td", {}, layer.role),
    el("td", { className: "num" }, layer.role === "tools" ? `${layer.tools} tools` : layer.messages),
    el("td", { className: "num", "data-col": "tokens" }, layer.tokens)));
  $("[data-testid=context-layers] tbody").replaceChildren(...rows);
  $("#context-total").textContent = data.token_count;
  renderRequest();
}

function renderRequest() {
  const data = state.inspected;
  $("#context-request").textContent = data ? JSON.stringify(data[$("#context-provider").value], null, 2) : "";
}

// --- index health ---------------------------------------------------------------------------------

async function loadIndexHealth() {
  const data = await api("GET", "index-health");
  facts($("#index-facts"), [
    ["Embedding model", data.embedding_model, "embedding_model"],
    ["Dimension", data.dimension, "dimension"],
    ["Threads", data.threads, "threads"],
    ["Messages", data.messages, "messages"],
    ["Indexed", data.indexed, "indexed"],
    ["Stored but not indexed", data.not_indexed, "not_indexed"],
    ["Stale (other content or embedder)", data.stale, "stale"],
    ["Nothing to index", data.unsearchable, "unsearchable"],
    ["Complete", data.complete ? "yes" : "no (limit reached)", "complete"],
  ]);
  $("[data-testid=index-samples] tbody").replaceChildren(...data.samples.map((s) => el("tr", { "data-message": s.message_id },
    el("td", {}, s.thread_id), el("td", {}, el("code", {}, s.message_id)), el("td", { className: "num" }, s.seq), el("td", {}, s.state))));
}

// --- start ----------------------------------------------------------------------------------------

function readHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  state.resource = params.get("resource") || "";
  state.thread = params.get("thread") || "";
  $("#resource").value = state.resource;
  return params.get("view") || (state.resource ? "threads" : "welcome");
}

function start() {
  $("#resource-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.resource = $("#resource").value.trim();
    state.thread = "";
    forgetThread();
    show("threads");
  });
  for (const button of document.querySelectorAll("nav button")) {
    button.addEventListener("click", () => show(button.dataset.view));
  }
  $("#threads-more").addEventListener("click", () => guarded(() => loadThreads(true)));
  $("#messages-more").addEventListener("click", () => guarded(() => loadMessages(true)));
  $("#wm-scope").addEventListener("change", () => guarded(loadWorkingMemory));
  $("#wm-json").addEventListener("change", () => renderWorkingMemory($("#wm-text").value));
  $("#wm-edit").addEventListener("change", () => {
    $("#wm-editor").hidden = !$("#wm-edit").checked;
    $("#wm-status").textContent = "";
  });
  $("#wm-save").addEventListener("click", () => guarded(saveWorkingMemory));
  $("#recall-form").addEventListener("submit", (event) => {
    event.preventDefault();
    guarded(runRecall);
  });
  $("#context-form").addEventListener("submit", (event) => {
    event.preventDefault();
    guarded(runInspect);
  });
  $("#context-provider").addEventListener("change", renderRequest);
  window.addEventListener("hashchange", () => {
    const before = [state.resource, state.thread];
    const view = readHash();
    if (before[0] !== state.resource || before[1] !== state.thread) forgetThread();
    else state.messages = [];
    show(view);
  });
  show(readHash());
}

document.addEventListener("DOMContentLoaded", start);
