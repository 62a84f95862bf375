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

function setRunning(running) {
  state.running = running;
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

function scrollDown() { const log = $("log"); log.scrollTop = log.scrollHeight; }

function setCallStatus(callId, status) {
  const node = state.calls.get(callId);
  if (!node) return;
  node.setAttribute("data-status", status);
  node.querySelector(".badge").textContent = status;
  const actions = node.querySelector(".actions");
  if (status === "pending") node.open = true;   // the decision must be visible
  if (status === "pending" && !actions) node.appendChild(approvalButtons(callId));
  if (status !== "pending" && actions) actions.remove();
}

function approvalButtons(callId) {
  const box = el("div", { class: "actions" });
  const approve = el("button", { type: "button", class: "approve", "data-testid": "approve" }, "Approve");
  const deny = el("button", { type: "button", class: "deny", "data-testid": "deny" }, "Deny");
  approve.addEventListener("click", () => answer(callId, true));
  deny.addEventListener("click", () => answer(callId, false));
  box.append(approve, deny);
  return box;
}

function toolCallEl(callId, name, parentId) {
  let node = state.calls.get(callId);
  if (node) return node;
  node = el("details", { class: "tool", "data-testid": "tool-call", "data-status": "running" });
  node.dataset.callId = callId;
  const summary = el("summary", {}, name + " ");
  // Progress sits in the summary so that it shows while the call is collapsed.
  summary.append(el("span", { class: "badge" }, "running"), el("span", { class: "progress" }));
  node.append(summary, el("pre", { class: "args" }), el("pre", { class: "result" }));
  messageEl(parentId || "call-" + callId, "assistant").appendChild(node);
  state.calls.set(callId, node);
  return node;
}

function setResult(callId, content, status) {
  const node = state.calls.get(callId);
  if (!node) return;
  node.querySelector(".result").textContent = typeof content === "string" ? content : JSON.stringify(content);
  node.querySelector(".progress").textContent = "";
  setCallStatus(callId, status);
}

function renderMessages(messages) {
  $("log").replaceChildren();
  state.calls.clear();
  state.messages.clear();
  for (const m of messages) {
    if (m.role === "user") appendText(messageEl(m.id, "user"), textOf(m.content));
    else if (m.role === "assistant") renderAssistant(m);
    else if (m.role === "reasoning") reasoningEl(m.id).lastChild.textContent = m.content;
    else if (m.role === "tool") {
      const status = (m.metadata && m.metadata.status) || (m.error ? "error" : "done");
      setResult(m.toolCallId, m.content, status);
    }
  }
  for (const [callId, node] of state.calls) {
    if (node.getAttribute("data-status") === "running") {
      setCallStatus(callId, state.pending.has(callId) ? "pending" : state.running ? "running" : "interrupted");
    }
  }
  scrollDown();
}

function textOf(content) {
  if (typeof content === "string") return content;
  return (content || []).filter((p) => p.type === "text").map((p) => p.text).join("\n");
}

function renderAssistant(m) {
  const node = messageEl(m.id, "assistant");
  if (m.content) appendText(node, m.content);
  for (const call of m.toolCalls || []) {
    toolCallEl(call.id, call.function.name, m.id).querySelector(".args").textContent = call.function.arguments;
  }
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
    case "RUN_STARTED": setRunning(true); break;
    case "MESSAGES_SNAPSHOT": renderMessages(ev.messages); break;
    case "TEXT_MESSAGE_START": messageEl(ev.messageId, "assistant"); break;
    case "TEXT_MESSAGE_CONTENT": appendText(messageEl(ev.messageId, "assistant"), ev.delta); break;
    case "REASONING_MESSAGE_START": reasoningEl(ev.messageId); break;
    case "REASONING_MESSAGE_CONTENT": reasoningEl(ev.messageId).lastChild.appendChild(document.createTextNode(ev.delta)); break;
    case "TOOL_CALL_START": toolCallEl(ev.toolCallId, ev.toolCallName, ev.parentMessageId); break;
    case "TOOL_CALL_ARGS": {
      const node = state.calls.get(ev.toolCallId);
      if (node) node.querySelector(".args").appendChild(document.createTextNode(ev.delta));
      break;
    }
    case "CUSTOM":
      if (ev.name === PROGRESS_EVENT && ev.value) {
        const node = state.calls.get(ev.value.toolCallId);
        if (node) node.querySelector(".progress").textContent = ev.value.text || "";
      }
      break;
    case "TOOL_CALL_RESULT": setResult(ev.toolCallId, ev.content, (ev.metadata && ev.metadata.status) || "done"); break;
    case "RUN_FINISHED": onFinished(ev.outcome || { type: "success" }); break;
    case "RUN_ERROR":
      setRunning(false);
      appendText(messageEl("error-" + randomId(), "error"), "Error: " + ev.message);
      break;
    default: break;
  }
}

function onFinished(outcome) {
  setRunning(false);
  state.pending = new Set();
  if (outcome.type === "interrupt") {
    for (const it of outcome.interrupts) {
      state.pending.add(it.toolCallId || it.id);
      setCallStatus(it.toolCallId || it.id, "pending");
    }
    setStatus("waiting for your approval");
  } else if (outcome.type === "cancelled") {
    for (const [callId, node] of state.calls) {
      if (node.getAttribute("data-status") === "running") setCallStatus(callId, "interrupted");
    }
    setStatus("stopped");
  }
  loadThreads();
}

async function follow(response, threadId, controller) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const chunk = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        for (const line of chunk.split("\n")) {
          if (line.startsWith("data: ") && state.threadId === threadId) onEvent(JSON.parse(line.slice(6)));
        }
      }
    }
  } catch (err) {
    if (!controller.signal.aborted) setStatus("connection lost: " + err.message);
  } finally {
    if (state.stream === controller) state.stream = null;
  }
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
  await follow(res, threadId, controller);
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

async function send(text) {
  await settled();
  if (!state.threadId) await newThread();
  if (state.running) await stop();   // as in `agentkit chat`: interrupt, then follow up
  const message = { id: randomId(), role: "user", content: text };
  appendText(messageEl(message.id, "user"), text);
  await stream("POST", "agui", runInput([message]));
}

async function stop() {
  await settled();
  setStatus("stopping…");
  await api("POST", "threads/" + encodeURIComponent(state.threadId) + "/interrupt");
}

async function answer(callId, approved) {
  const payload = approved ? { approved: true } : { approved: false, reason: "denied in the web chat" };
  setCallStatus(callId, "running");
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
  history.replaceState(null, "", "#thread=" + encodeURIComponent(threadId));
  const thread = await api("GET", "threads/" + encodeURIComponent(threadId));
  $("title").textContent = thread.title || "New chat";
  state.pending = new Set(thread.pending.map((p) => p.toolCallId || p.id));
  setRunning(thread.running);
  renderMessages(thread.messages);
  await loadThreads();
  // A live run (the page was reloaded mid-run): follow it from its first event.
  if (thread.running) stream("GET", "threads/" + encodeURIComponent(threadId) + "/events").catch(report);
}

async function loadThreads() {
  const data = await api("GET", "threads");
  const nav = $("threads");
  nav.replaceChildren();
  for (const t of data.threads) {
    const button = el("button", { type: "button", "data-testid": "thread" }, t.title || "New chat");
    button.dataset.threadId = t.threadId;
    if (t.threadId === state.threadId) {
      button.classList.add("current");
      $("title").textContent = t.title || "New chat";
    }
    button.addEventListener("click", () => openThread(t.threadId).catch(report));
    nav.appendChild(button);
  }
}

function report(err) { setStatus("error: " + err.message); }

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
  $("new-thread").addEventListener("click", () => newThread().catch(report));
  window.addEventListener("hashchange", () => {
    const wanted = readLocation();
    if (wanted && wanted !== state.threadId) openThread(wanted).catch(report);
  });
  const threadId = readLocation();
  (threadId ? openThread(threadId) : loadThreads()).then(() => {
    document.body.dataset.ready = "1";
  }).catch(report);
});
