// agentkit web chat: speaks AG-UI to the server that serves this file.
// Every model and tool output is hostile: text goes through textContent / text nodes only,
// never parsed as HTML, and the page's CSP allows no inline script.
"use strict";

const PROGRESS_EVENT = "agentkit.tool_progress";
const $ = (id) => document.getElementById(id);
const state = {
  token: null,
  threadId: null,
  running: false,
  pending: new Set(),   // tool call ids waiting for approval
  stream: null,         // AbortController of the SSE reader we follow
  calls: new Map(),     // tool call id -> its <details> element
  messages: new Map(),  // message id -> its element
  opening: null,        // the thread switch in progress (a Promise), if any
  md: new Map(),        // assistant message id -> its MD.Stream (markdown as it streams)
  dirty: new Set(),     // MD.Streams with text not rendered yet
  runTexts: [],         // ids of the assistant texts streamed in the current run
  lastUser: null,       // the last message sent (Retry sends it again, same id)
  threads: [],          // the thread list as last loaded
  nested: new Map(),    // "outer/inner" call id -> {name, args, status}: calls inside agent tools
  steers: [],           // messages typed while the agent worked: {text, status, node}
};

// What became of a message typed while the agent worked (POST /threads/{id}/steer).
const STEER_LABELS = {
  queued: "queued: the agent reads it at its next step",
  next_request: "steered: the agent read it before its next step",
  follow_up: "steered: answered in a follow-up turn",
  no_run: "the agent had finished: sent as a new message",
  unreachable: "not delivered: the run could not be reached",
};

// ---------------------------------------------------------------- http
function headers(extra) {
  const h = Object.assign({ "Content-Type": "application/json" }, extra || {});
  if (state.token) h.Authorization = "Bearer " + state.token;
  return h;
}

async function api(method, path, body) {
  const res = await fetch(path, {
    method, headers: headers(), body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.status === 204) return null;
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error((data.error && data.error.message) || res.statusText);
  return data;
}

function randomId() {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

// ---------------------------------------------------------------- rendering
function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function setStatus(text) { $("status").textContent = text; }

// A polite announcement for screen readers: once per finished message, never per delta.
function announce(text) {
  const box = $("announce");
  box.textContent = "";
  setTimeout(() => { box.textContent = text; }, 50);
}

// Decisions wait while a run is in flight (a resume for one call runs; the others are
// decided when it has stopped again).
function lockDecisions(locked) {
  for (const b of document.querySelectorAll("#log .actions button")) b.disabled = locked;
}

function setRunning(running) {
  state.running = running;
  lockDecisions(running);
  $("stop").hidden = !running;
  setStatus(running ? "working…" : "");
}

function messageEl(id, role) {
  let node = state.messages.get(id);
  if (!node) {
    node = el("div", { class: "message", "data-testid": "message", "data-role": role });
    node.dataset.id = id;
    node.appendChild(el("div", { class: "text" }));
    $("log").appendChild(node);
    state.messages.set(id, node);
  }
  return node;
}

function appendText(node, delta) {
  node.querySelector(".text").appendChild(document.createTextNode(delta));
  scrollDown();
}

// The markdown of an assistant message: buffered per delta, rendered per network read.
function assistantText(id) {
  let md = state.md.get(id);
  if (!md) {
    const node = messageEl(id, "assistant");
    const text = node.querySelector(".text");
    text.classList.add("md");
    md = new MD.Stream(text);
    state.md.set(id, md);
  }
  return md;
}

function renderDirty() {
  if (!state.dirty.size) return;
  const follow = nearBottom();
  for (const md of state.dirty) md.render(false);
  state.dirty.clear();
  if (follow) scrollDown();
}

function endText(id) {
  const md = state.md.get(id);
  if (!md) return;
  state.dirty.delete(md);
  md.render(true);
  const text = md.src.trim();
  if (text) announce("Assistant: " + (text.length > 400 ? text.slice(0, 400) + "…" : text));
}

function nearBottom() {
  const log = $("log");
  return log.scrollHeight - log.scrollTop - log.clientHeight < 120;
}

function scrollDown() { const log = $("log"); log.scrollTop = log.scrollHeight; }

function setCallStatus(callId, status) {
  const node = state.calls.get(callId);
  if (!node) return;
  node.setAttribute("data-status", status);
  node.querySelector(":scope > summary .badge").textContent = status;
  const nested = state.nested.get(callId);
  if (nested) nested.status = status;
  const actions = node.querySelector(":scope > .actions");
  if (status === "pending") {
    // The decision must be visible: whole arguments, buttons in view, outer calls open.
    for (let d = node; d; d = d.parentElement && d.parentElement.closest("details.tool")) d.open = true;
    const args = node.querySelector(":scope > .args");
    args.textContent = prettyJson(args.textContent);
    if (nested) nested.args = args.textContent;
    if (!actions) node.appendChild(approvalButtons(callId, node.dataset.name, node.classList.contains("nested")));
    node.scrollIntoView({ block: "nearest" });
  }
  if (status !== "pending" && actions) actions.remove();
}

function prettyJson(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
}

function approvalButtons(callId, name, nested) {
  const inside = nested ? " inside " + callId.slice(0, callId.lastIndexOf("/")) : "";
  const box = el("div", { class: "actions", role: "group", "aria-label": "Approve the call " + name + inside + "?" });
  const approve = el("button", { type: "button", class: "approve", "data-testid": "approve" }, "Approve");
  const deny = el("button", { type: "button", class: "deny", "data-testid": "deny" }, "Deny");
  approve.addEventListener("click", () => answer(callId, true));
  deny.addEventListener("click", () => answer(callId, false));
  approve.disabled = deny.disabled = state.running;
  box.append(approve, deny);
  return box;
}

function toolCallEl(callId, name, parentId) {
  let node = state.calls.get(callId);
  if (node) return node;
  node = el("details", { class: "tool", "data-testid": "tool-call", "data-status": "running" });
  node.dataset.callId = callId;
  node.dataset.name = name;
  const summary = el("summary", {}, name + " ");
  // Progress sits in the summary so that it shows while the call is collapsed.
  summary.append(el("span", { class: "badge" }, "running"), el("span", { class: "progress" }));
  node.append(summary, el("pre", { class: "args", tabindex: "0", "aria-label": "arguments" }),
              el("pre", { class: "result", tabindex: "0", "aria-label": "result" }));
  state.calls.set(callId, node);
  // A call inside an agent used as a tool ("outer/inner") sits inside its outer call.
  const cut = callId.lastIndexOf("/");
  const outer = cut > 0 ? state.calls.get(callId.slice(0, cut)) : null;
  if (cut > 0) {
    node.classList.add("nested");
    const where = outer ? outer.dataset.name : callId.slice(0, cut);
    summary.insertBefore(el("span", { class: "where", "data-testid": "nested-in" }, "inside " + where + " "),
                         summary.querySelector(".badge"));
    if (!state.nested.has(callId)) state.nested.set(callId, { name, args: "", status: "running" });
  }
  if (outer) {
    let inner = outer.querySelector(":scope > .inner");
    if (!inner) {
      inner = el("div", { class: "inner", role: "group", "aria-label": "calls inside " + outer.dataset.name });
      outer.insertBefore(inner, outer.querySelector(":scope > .result"));
    }
    inner.appendChild(node);
  } else {
    messageEl(parentId || "call-" + callId, "assistant").appendChild(node);
  }
  return node;
}

// The call an interrupt asks about: its metadata names it and carries its whole arguments (a
// pending call inside an agent tool is known to the page only from here); the message text
// "Approve the call NAME(ARGS)?" is the fallback.
function parseInterrupt(it) {
  const meta = it.metadata;
  if (meta && typeof meta.name === "string") return { name: meta.name, args: JSON.stringify(meta.input ?? {}) };
  const m = /^Approve the call ([^(]+)\((.*)\)\?$/s.exec(it.message || "");
  return m ? { name: m[1], args: m[2] } : { name: "tool call", args: it.message || "" };
}

// Show every pending call (nested ones too: after a reload only the interrupt names them)
// and mark the agent tools that wait for a decision inside them.
function showPending(interrupts) {
  for (const it of interrupts) {
    const id = it.toolCallId || it.id;
    state.pending.add(id);
    if (!state.calls.has(id)) {
      const call = parseInterrupt(it);
      toolCallEl(id, call.name).querySelector(".args").textContent = call.args;
    }
    for (let cut = id.lastIndexOf("/"); cut > 0; cut = id.lastIndexOf("/", cut - 1)) {
      setCallStatus(id.slice(0, cut), "waiting");
    }
  }
  for (const id of state.pending) setCallStatus(id, "pending");
}

function setResult(callId, content, status) {
  const node = state.calls.get(callId);
  if (!node) return;
  node.querySelector(":scope > .result").textContent = typeof content === "string" ? content : JSON.stringify(content);
  node.querySelector(":scope > summary .progress").textContent = "";
  setCallStatus(callId, status);
  McpApps.onResult(callId, node, content, status);  // a trusted server's ui:// app (apps.js)
}

function renderMessages(messages) {
  // Rendered answers are kept (a snapshot repeats them under their stored ids): a run's
  // closing snapshot must not re-parse a long answer that streamed in.
  const rendered = new Map();
  for (const md of state.md.values()) {
    if (md.final) rendered.set(md.src, (rendered.get(md.src) || []).concat([md]));
  }
  state.reuse = rendered;
  $("log").replaceChildren();
  state.calls.clear();
  state.messages.clear();
  state.md.clear();
  state.dirty.clear();
  for (const m of messages) {
    if (m.role === "user") appendText(messageEl(m.id, "user"), textOf(m.content));
    else if (m.role === "assistant") renderAssistant(m);
    else if (m.role === "reasoning") reasoningEl(m.id).lastChild.textContent = m.content;
    else if (m.role === "tool") {
      const status = (m.metadata && m.metadata.status) || (m.error ? "error" : "done");
      setResult(m.toolCallId, m.content, status);
    }
  }
  state.reuse = null;
  // Calls inside agent tools are not in the stored messages: the ones seen are put back.
  for (const [id, call] of state.nested) {
    const outer = state.calls.get(id.slice(0, id.lastIndexOf("/")));
    if (!outer || !["running", "waiting"].includes(outer.getAttribute("data-status"))) continue;
    toolCallEl(id, call.name).querySelector(".args").textContent = call.args;
    setCallStatus(id, call.status);
  }
  const waiting = (id) => Array.from(state.pending).some((p) => p.startsWith(id + "/"));
  for (const [callId, node] of state.calls) {
    if (node.getAttribute("data-status") === "running") {
      setCallStatus(callId, state.pending.has(callId) ? "pending" : waiting(callId) ? "waiting"
        : state.running ? "running" : "interrupted");
    }
  }
  placeSteers();
  scrollDown();
}

// Each steered message is shown once: the stored one (same text, in order) takes its mark;
// one still queued stays at the end of the thread.
function placeSteers() {
  const users = Array.from($("log").querySelectorAll(".message[data-role=user]"));
  let from = 0;
  for (const s of state.steers) {
    const i = users.findIndex((n, k) => k >= from && n.querySelector(".text").textContent === s.text);
    if (i >= 0) { s.node = users[i]; from = i + 1; }
    else if (s.status === "queued") { s.node = messageEl(s.node.dataset.id, "user"); appendText(s.node, s.text); }
    else continue;
    markSteer(s);
  }
}

function markSteer(s) {
  const node = s.node;
  node.dataset.steer = s.status;
  node.classList.toggle("queued", s.status === "queued");
  let mark = node.querySelector(".steer-mark");
  if (!mark) {
    mark = el("span", { class: "steer-mark", "data-testid": "steer-status", role: "status" });
    node.appendChild(mark);
  }
  mark.textContent = STEER_LABELS[s.status] || s.status;
  node.querySelector(".resend")?.remove();
  if (s.status === "unreachable") {
    const again = el("button", { type: "button", class: "retry resend" }, "Send as a new message");
    again.addEventListener("click", () => { s.status = "no_run"; markSteer(s); post(s.text).catch(report); });
    node.appendChild(again);
  }
}

function textOf(content) {
  if (typeof content === "string") return content;
  return (content || []).filter((p) => p.type === "text").map((p) => p.text).join("\n");
}

function renderAssistant(m) {
  const node = messageEl(m.id, "assistant");
  const kept = m.content && state.reuse && state.reuse.get(m.content);
  if (kept && kept.length) {
    const md = kept.shift();
    node.replaceChild(md.root, node.querySelector(".text"));
    state.md.set(m.id, md);
  } else if (m.content) {
    const md = assistantText(m.id);
    md.append(m.content);
    md.render(true);
  }
  for (const call of m.toolCalls || []) {
    toolCallEl(call.id, call.function.name, m.id).querySelector(".args").textContent =
      prettyJson(call.function.arguments);
  }
  if (m.metadata && m.metadata.interrupted && m.content) addStoppedMark(node);
}

function reasoningEl(id) {
  let node = state.messages.get(id);
  if (!node) {
    node = el("details", { class: "reasoning message", "data-testid": "message", "data-role": "reasoning" });
    node.append(el("summary", {}, "reasoning"), el("div", { class: "text" }));
    $("log").appendChild(node);
    state.messages.set(id, node);
  }
  return node;
}

// ---------------------------------------------------------------- AG-UI events
function onEvent(ev) {
  switch (ev.type) {
    case "RUN_STARTED": setRunning(true); state.runTexts = []; break;
    case "MESSAGES_SNAPSHOT": renderMessages(ev.messages); break;
    case "TEXT_MESSAGE_START": assistantText(ev.messageId); state.runTexts.push(ev.messageId); break;
    case "TEXT_MESSAGE_CONTENT": {
      const md = assistantText(ev.messageId);
      md.append(ev.delta);
      state.dirty.add(md);
      break;
    }
    case "TEXT_MESSAGE_END": endText(ev.messageId); break;
    case "REASONING_MESSAGE_START": reasoningEl(ev.messageId); break;
    case "REASONING_MESSAGE_CONTENT": reasoningEl(ev.messageId).lastChild.appendChild(document.createTextNode(ev.delta)); break;
    case "TOOL_CALL_START": toolCallEl(ev.toolCallId, ev.toolCallName, ev.parentMessageId); break;
    case "TOOL_CALL_ARGS": {
      const node = state.calls.get(ev.toolCallId);
      if (node) node.querySelector(":scope > .args").appendChild(document.createTextNode(ev.delta));
      const nested = state.nested.get(ev.toolCallId);
      if (nested) nested.args += ev.delta;
      break;
    }
    case "CUSTOM":
      if (ev.name === PROGRESS_EVENT && ev.value) {
        const node = state.calls.get(ev.value.toolCallId);
        if (node) node.querySelector(":scope > summary .progress").textContent = ev.value.text || "";
      }
      break;
    case "TOOL_CALL_RESULT": setResult(ev.toolCallId, ev.content, (ev.metadata && ev.metadata.status) || "done"); break;
    case "RUN_FINISHED": onFinished(ev.outcome || { type: "success" }); break;
    case "RUN_ERROR": onError(ev); break;
    default: break;
  }
}

// The server's message is already meant for the person (the detail is in its log).
function onError(ev) {
  renderDirty();
  for (const id of state.runTexts) endText(id);
  setRunning(false);
  const node = messageEl("error-" + randomId(), "error");
  node.setAttribute("role", "alert");
  node.querySelector(".text").textContent = ev.message || "Something went wrong.";
  if (ev.code) {
    const more = el("details", { class: "detail" });
    more.append(el("summary", {}, "Details"), el("code", {}, "code: " + ev.code));
    node.appendChild(more);
  }
  if (state.lastUser) {
    const again = state.lastUser;
    const retry = el("button", { type: "button", class: "retry", "data-testid": "retry" }, "Retry");
    retry.addEventListener("click", () => { retry.disabled = true; resend(again).catch(report); });
    node.appendChild(retry);
  }
  setStatus("something went wrong");
  scrollDown();
  loadThreads().catch(report);   // the failed first message still titles the thread
}

// The answer this run was writing when it was stopped (the last one after the last question).
function markStopped() {
  const nodes = Array.from($("log").querySelectorAll(".message[data-role=user], .message[data-role=assistant]"));
  const node = nodes.pop();
  if (!node || node.dataset.role !== "assistant" || !node.querySelector(".md") ||
      !state.runTexts.length) return;
  addStoppedMark(node);
}

function addStoppedMark(node) {
  if (node.querySelector(".stopped-mark")) return;
  node.dataset.stopped = "1";
  node.appendChild(el("span", { class: "stopped-mark", "data-testid": "stopped-mark" }, "stopped"));
  node.setAttribute("aria-description", "this answer was stopped before it finished");
}

function onFinished(outcome) {
  renderDirty();
  for (const id of state.runTexts) endText(id);
  setRunning(false);
  state.pending = new Set();
  if (outcome.type === "interrupt") {
    showPending(outcome.interrupts);
    setStatus("waiting for your approval");
  } else if (outcome.type === "cancelled") {
    for (const [callId, node] of state.calls) {
      if (node.getAttribute("data-status") === "running") setCallStatus(callId, "interrupted");
    }
    markStopped();
    setStatus("stopped");
  }
  loadThreads().catch(report);
}

const SLICE_MS = 12;   // the longest stretch of event handling before the page may paint
const nextTask = () => new Promise((resolve) => setTimeout(resolve, 0));

// Read an SSE stream of AG-UI events. Returns true when it ended with the run's last event,
// false when it dropped first (the caller reconnects). A burst (a replay) is handled in
// slices, so the page stays responsive however much arrives at once.
async function follow(response, threadId, controller) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let ended = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let start = 0;
      let cut;
      let slice = performance.now();
      while ((cut = buffer.indexOf("\n\n", start)) >= 0) {
        const chunk = buffer.slice(start, cut);
        start = cut + 2;
        for (const line of chunk.split("\n")) {
          if (!line.startsWith("data: ") || state.threadId !== threadId) continue;
          const ev = JSON.parse(line.slice(6));
          if (ev.type === "RUN_FINISHED" || ev.type === "RUN_ERROR") ended = true;
          onEvent(ev);
        }
        if (performance.now() - slice > SLICE_MS) {
          renderDirty();
          await nextTask();
          slice = performance.now();
        }
      }
      buffer = buffer.slice(start);
      renderDirty();
    }
  } catch (err) {
    if (controller.signal.aborted) return true;
  } finally {
    if (state.stream === controller) state.stream = null;
  }
  renderDirty();
  return ended || controller.signal.aborted || state.threadId !== threadId;
}

// The stream dropped mid-run: show it, and re-attach through GET /threads/{id}/events
// (which replays the run from its start) until the run is followed to its end or is over.
async function reconnect(threadId) {
  document.body.dataset.connection = "reconnecting";
  $("connection").hidden = false;
  setStatus("reconnecting…");
  try {
    for (let attempt = 0; state.threadId === threadId; attempt++) {
      if (attempt) await new Promise((r) => setTimeout(r, Math.min(5000, 250 * 2 ** attempt)));
      const controller = new AbortController();
      state.stream = controller;
      let res;
      try {
        res = await fetch("threads/" + encodeURIComponent(threadId) + "/events",
                          { headers: headers(), signal: controller.signal });
      } catch (err) {
        if (controller.signal.aborted) return;
        continue;   // the server is unreachable: try again
      }
      if (res.status === 204) {   // the run is over: the stored thread has all of it
        if (state.stream === controller) state.stream = null;
        if (state.threadId === threadId) await refreshThread(threadId);
        return;
      }
      if (!res.ok) continue;
      clearReconnecting();
      if (await follow(res, threadId, controller)) return;
      document.body.dataset.connection = "reconnecting";
      $("connection").hidden = false;
      setStatus("reconnecting…");
    }
  } finally {
    clearReconnecting();
  }
}

function clearReconnecting() {
  delete document.body.dataset.connection;
  $("connection").hidden = true;
}

async function stream(method, path, body) {
  if (state.stream) state.stream.abort();   // stop *reading* an older stream, not its run
  const controller = new AbortController();
  state.stream = controller;
  const threadId = state.threadId;
  const res = await fetch(path, {
    method, headers: headers(), signal: controller.signal,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.status === 204) { state.stream = null; return; }
  if (!res.ok) {
    const data = await res.json().catch(() => ({}));
    state.stream = null;
    throw new Error((data.error && data.error.message) || res.statusText);
  }
  if (!(await follow(res, threadId, controller))) await reconnect(threadId);
}

// ---------------------------------------------------------------- actions
function runInput(messages, resume) {
  const input = { threadId: state.threadId, runId: randomId(), messages, state: {}, tools: [],
                  context: [], forwardedProps: {} };
  if (resume) input.resume = resume;
  return input;
}

// Actions wait for a thread switch in progress: a message typed right after "New chat" (or a
// thread click) belongs to the thread being opened, not to the one being left.
async function settled() {
  while (state.opening) await state.opening.catch(() => {});
}

// Typing while the agent works steers it (the message joins the run at its next step);
// with "Interrupt instead" checked it stops the run, then sends (as `agentkit chat` does).
async function send(text) {
  await settled();
  if (!state.threadId) await newThread();
  if (state.running && !$("interrupt-mode").checked) return steer(text);
  if (state.running) await stop();
  await post(text);
}

async function post(text) {
  const message = { id: randomId(), role: "user", content: text };
  state.lastUser = message;
  appendText(messageEl(message.id, "user"), text);
  await stream("POST", "agui", runInput([message]));
}

// Retry after a failed run: the same message (same id) again. When the failed run stored
// it, the server knows the id and runs the agent again on the thread as stored.
async function resend(message) {
  await settled();
  if (state.running) return;
  setStatus("retrying…");
  await stream("POST", "agui", runInput([message]));
}

async function steer(text) {
  const s = { text, status: "queued", node: messageEl("steer-" + randomId(), "user") };
  appendText(s.node, text);
  state.steers.push(s);
  markSteer(s);
  const threadId = state.threadId;
  let status;
  try {
    status = (await api("POST", "threads/" + encodeURIComponent(threadId) + "/steer", { message: text })).status;
  } catch (err) {
    status = "unreachable";
  }
  if (state.threadId !== threadId) return;
  s.status = STEER_LABELS[status] ? status : "unreachable";
  markSteer(s);
  if (s.status === "no_run") {   // it finished meanwhile: this is the next message
    state.steers.splice(state.steers.indexOf(s), 1);
    s.node.remove();
    await post(text);
  }
}

async function stop() {
  await settled();
  setStatus("stopping…");
  await api("POST", "threads/" + encodeURIComponent(state.threadId) + "/interrupt");
}

async function answer(callId, approved) {
  lockDecisions(true);
  const payload = approved ? { approved: true } : { approved: false, reason: "denied in the web chat" };
  // A call inside an agent tool gets no result event of its own: its decision is its state.
  setCallStatus(callId, state.nested.has(callId) ? (approved ? "approved" : "denied") : "running");
  await stream("POST", "agui", runInput([], [{ interruptId: callId, status: "resolved", payload }]));
}

function switching(work) {
  const done = work().finally(() => { if (state.opening === done) state.opening = null; });
  state.opening = done;
  return done;
}

function newThread() {
  return switching(async () => {
    const created = await api("POST", "threads");
    await showThread(created.threadId);
  });
}

function openThread(threadId) {
  return switching(() => showThread(threadId));
}

async function showThread(threadId) {
  if (state.stream) state.stream.abort();
  state.threadId = threadId;
  state.lastUser = null;
  state.nested = new Map();
  state.steers = [];
  history.replaceState(null, "", "#thread=" + encodeURIComponent(threadId));
  await refreshThread(threadId);
}

async function refreshThread(threadId) {
  const thread = await api("GET", "threads/" + encodeURIComponent(threadId));
  $("title").textContent = thread.title || "New chat";
  state.pending = new Set(thread.pending.map((p) => p.toolCallId || p.id));
  setRunning(thread.running);
  renderMessages(thread.messages);
  showPending(thread.pending);
  await loadThreads();
  // A live run (the page was reloaded mid-run): follow it from its first event.
  if (thread.running) stream("GET", "threads/" + encodeURIComponent(threadId) + "/events").catch(report);
}

async function loadThreads() {
  const data = await api("GET", "threads");
  state.threads = data.threads;
  const list = $("threads");
  list.replaceChildren();
  for (const t of data.threads) {
    const button = el("button", { type: "button", "data-testid": "thread" });
    button.append(el("span", { class: "thread-title" }, t.title || "New chat"));
    if (t.updatedAt) {
      const when = el("time", { datetime: t.updatedAt, title: new Date(t.updatedAt).toLocaleString() });
      when.textContent = relativeTime(t.updatedAt);
      button.append(when);
    }
    button.dataset.threadId = t.threadId;
    if (t.threadId === state.threadId) {
      button.classList.add("current");
      button.setAttribute("aria-current", "true");
      $("title").textContent = t.title || "New chat";
    }
    button.addEventListener("click", () => {
      showSidebar(false, true);
      openThread(t.threadId).catch(report);
    });
    const item = el("li");
    item.appendChild(button);
    list.appendChild(item);
  }
}

const UNITS = [["year", 31536e6], ["month", 2592e6], ["week", 6048e5], ["day", 864e5],
               ["hour", 36e5], ["minute", 6e4]];
const RELATIVE = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });

function relativeTime(iso) {
  const ms = Date.parse(iso) - Date.now();
  for (const [unit, size] of UNITS) {
    if (Math.abs(ms) >= size) return RELATIVE.format(Math.round(ms / size), unit);
  }
  return "just now";
}

function refreshTimes() {
  for (const t of document.querySelectorAll("#threads time")) t.textContent = relativeTime(t.getAttribute("datetime"));
}

// ---------------------------------------------------------------- the off-canvas sidebar
const narrow = window.matchMedia("(max-width: 700px)");

function showSidebar(open, toInput) {
  if (!narrow.matches) open = false;
  const was = document.body.classList.contains("nav-open");
  document.body.classList.toggle("nav-open", open);
  $("menu").setAttribute("aria-expanded", String(open));
  $("main").inert = open;   // while it covers the page, focus stays in the sidebar
  if (open && !was) {
    ($("threads").querySelector(".current") || $("new-thread")).focus();
  } else if (!open && was) {
    (toInput ? $("input") : $("menu")).focus();
  }
}

function report(err) { setStatus("error: " + err.message); }

async function copyCode(button) {
  const code = button.closest(".code-block").querySelector("code");
  try {
    await navigator.clipboard.writeText(code.textContent);
    button.textContent = "Copied";
  } catch {
    // No clipboard permission: select the code, so that Ctrl+C copies it.
    getSelection().selectAllChildren(code);
    button.textContent = "Press Ctrl+C";
  }
  setTimeout(() => { button.textContent = "Copy"; }, 2000);
}

// ---------------------------------------------------------------- start
function readLocation() {
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get("token");
  if (token) {
    localStorage.setItem("agentkit-token", token);
    params.delete("token");
    history.replaceState(null, "", "#" + params.toString());
  }
  state.token = localStorage.getItem("agentkit-token");
  return params.get("thread");
}

document.addEventListener("DOMContentLoaded", () => {
  const input = $("input");
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    input.value = "";
    send(text).catch(report);
  });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("composer").requestSubmit(); }
  });
  $("stop").addEventListener("click", () => stop().catch(report));
  const mode = $("interrupt-mode");
  mode.checked = localStorage.getItem("agentkit-interrupt-mode") === "1";
  const hint = () => {
    input.placeholder = "Message the agent (Enter sends; while it works, sending " +
      (mode.checked ? "interrupts it)" : "steers it)");
  };
  mode.addEventListener("change", () => {
    localStorage.setItem("agentkit-interrupt-mode", mode.checked ? "1" : "0");
    hint();
  });
  hint();
  $("new-thread").addEventListener("click", () => {
    showSidebar(false, true);
    newThread().catch(report);
  });
  $("menu").addEventListener("click", () =>
    showSidebar(!document.body.classList.contains("nav-open")));
  $("backdrop").addEventListener("click", () => showSidebar(false));
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && document.body.classList.contains("nav-open")) {
      e.preventDefault();
      showSidebar(false);
    }
  });
  narrow.addEventListener("change", () => showSidebar(false));
  $("log").addEventListener("click", (e) => {
    const button = e.target.closest("button.copy");
    if (button) copyCode(button);
  });
  setInterval(refreshTimes, 30000);
  window.addEventListener("hashchange", () => {
    const wanted = readLocation();
    if (wanted && wanted !== state.threadId) openThread(wanted).catch(report);
  });
  const threadId = readLocation();
  (threadId ? openThread(threadId) : loadThreads()).then(() => {
    document.body.dataset.ready = "1";
  }).catch(report);
});
