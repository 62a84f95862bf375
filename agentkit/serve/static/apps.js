// agentkit web chat: MCP Apps. The host side of the ext-apps postMessage protocol
// (JSON-RPC 2.0 between this page and a frame; spec 2026-01-26), for the ui:// UI of a
// trusted MCP server's tool. The frame is <iframe sandbox="allow-scripts"> (an opaque
// origin: no access to this page, its storage or its API) loaded from apps/frame/<session>,
// whose own CSP forbids every fetch. Everything the frame sends is untrusted input: only
// the methods below are answered, a tools/call goes to the server (same approval rules as
// the model's calls; the approval shows here, in the thread) and calls are rate-limited.
"use strict";

const McpApps = (() => {
  const PROTOCOL = "2026-01-26";
  const HOST_INFO = { name: "agentkit-web-chat", version: "1" };
  const MAX_IN_FLIGHT = 1;   // tools/call requests a frame has at the server at once
  const MAX_QUEUED = 4;      // and waiting behind it; more are refused at once
  const MAX_HEIGHT = 800;
  let tools = null;          // Promise of the Set of tool names that have an app
  const apps = new Map();    // "thread/call id" -> app record
  const byWindow = new Map(); // frame window -> app record

  function loadTools() {
    if (!tools) {
      tools = api("GET", "apps").then((r) => new Set(r.tools)).catch(() => new Set());
    }
    return tools;
  }

  function post(app, message) {
    // The frame's origin is opaque ("null"): "*" is the only target that reaches it. Only
    // the app's own tool data is sent, which its server produced.
    if (app.frame.contentWindow) app.frame.contentWindow.postMessage(message, "*");
  }
  function reply(app, id, result) { post(app, { jsonrpc: "2.0", id, result }); }
  function fail(app, id, code, message) { post(app, { jsonrpc: "2.0", id, error: { code, message } }); }
  function notify(app, method, params) { post(app, { jsonrpc: "2.0", method, params }); }

  function parseResult(text, isError) {
    const result = { content: [{ type: "text", text: String(text) }], isError: !!isError };
    try {
      const value = JSON.parse(text);
      if (value && typeof value === "object" && !Array.isArray(value)) result.structuredContent = value;
    } catch { /* plain text */ }
    return result;
  }

  function hostContext(app) {
    const dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
    return {
      theme: dark ? "dark" : "light",
      displayMode: "inline",
      availableDisplayModes: ["inline"],
      platform: "web",
      locale: navigator.language,
      containerDimensions: { maxHeight: MAX_HEIGHT },
      toolInfo: { id: app.callId, tool: { name: app.name, inputSchema: { type: "object" } } },
    };
  }

  // -------------------------------------------------------------- frame -> host
  function onMessage(event) {
    const app = byWindow.get(event.source);
    if (!app) return;  // not one of our frames
    const msg = event.data;
    if (!msg || typeof msg !== "object" || msg.jsonrpc !== "2.0" || typeof msg.method !== "string") return;
    const isRequest = typeof msg.id === "string" || typeof msg.id === "number";
    const params = msg.params && typeof msg.params === "object" ? msg.params : {};
    if (!isRequest) return onNotification(app, msg.method, params);
    switch (msg.method) {
      case "ui/initialize": {
        const asked = params.protocolVersion;
        reply(app, msg.id, {
          protocolVersion: asked === PROTOCOL ? asked : PROTOCOL,
          hostInfo: HOST_INFO,
          hostCapabilities: { serverTools: {}, logging: {} },
          hostContext: hostContext(app),
        });
        return;
      }
      case "ping": reply(app, msg.id, {}); return;
      case "tools/call": callTool(app, msg.id, params); return;
      case "ui/request-display-mode": reply(app, msg.id, { mode: "inline" }); return;
      default: fail(app, msg.id, -32601, "the agentkit web chat does not support " + msg.method);
    }
  }

  function onNotification(app, method, params) {
    if (method === "ui/notifications/initialized") {
      // (Again after the app reloads itself: it gets its data again.)
      notify(app, "ui/notifications/tool-input", { arguments: app.input });
      notify(app, "ui/notifications/tool-result", app.result);
    } else if (method === "ui/notifications/size-changed") {
      const h = Number(params.height);
      if (Number.isFinite(h) && h > 0) app.frame.style.height = Math.min(MAX_HEIGHT, Math.ceil(h)) + "px";
    }
    // notifications/message (the app's log) and others: ignored.
  }

  // -------------------------------------------------------------- tools/call
  function callTool(app, id, params) {
    if (typeof params.name !== "string") return fail(app, id, -32602, "tools/call needs a tool name");
    const args = params.arguments && typeof params.arguments === "object" ? params.arguments : {};
    if (app.busy >= MAX_IN_FLIGHT + MAX_QUEUED) {
      return fail(app, id, -32000, "too many tool calls at once; wait for the earlier ones");
    }
    app.busy += 1;
    app.queue = app.queue.then(() => runCall(app, params.name, args))
      .then((result) => reply(app, id, result), (err) => fail(app, id, -32000, err.message))
      .finally(() => { app.busy -= 1; });
  }

  async function appApi(app, path, body) {
    return api("POST", "apps/" + encodeURIComponent(app.session) + path, body);
  }

  async function runCall(app, name, args) {
    const first = await appApi(app, "/calls", { name, arguments: args });
    const node = toolCallEl(first.toolCallId, name, "app-" + first.toolCallId);
    markFromApp(node);
    node.querySelector(":scope > .args").textContent = JSON.stringify(args, null, 2);
    let answer = first;
    if (first.status === "approval_required") {
      const approved = await decision(node, name);
      answer = await appApi(app, "/calls/" + encodeURIComponent(first.toolCallId), { approved });
    }
    const text = answer.result.content.map((b) => b.text || "").join("");
    setResult(answer.toolCallId, text, answer.status);
    return answer.result;
  }

  function markFromApp(node) {
    if (node.classList.contains("from-app")) return;
    node.classList.add("from-app");
    node.querySelector(":scope > summary").insertBefore(
      el("span", { class: "where", "data-testid": "from-app" }, "from the app "),
      node.querySelector(":scope > summary .badge"));
  }

  // The approval is the page's, never the frame's: the frame cannot see or click it.
  function decision(node, name) {
    return new Promise((resolve) => {
      node.open = true;
      node.setAttribute("data-status", "pending");
      node.querySelector(":scope > summary .badge").textContent = "pending";
      const box = el("div", { class: "actions", role: "group", "aria-label": "Approve the call " + name + " from the app?" });
      const approve = el("button", { type: "button", class: "approve", "data-testid": "approve" }, "Approve");
      const deny = el("button", { type: "button", class: "deny", "data-testid": "deny" }, "Deny");
      const done = (value) => { box.remove(); node.setAttribute("data-status", "running");
        node.querySelector(":scope > summary .badge").textContent = "running"; resolve(value); };
      approve.addEventListener("click", () => done(true));
      deny.addEventListener("click", () => done(false));
      box.append(approve, deny);
      node.appendChild(box);
      node.scrollIntoView({ block: "nearest" });
      announce("The app asks to call " + name + ": approve or deny");
    });
  }

  // -------------------------------------------------------------- rendering
  async function render(app) {
    try {
      const opened = await api("POST", "threads/" + encodeURIComponent(app.threadId) + "/apps",
        { toolCallId: app.callId, toolName: app.name });
      app.session = opened.session;
      app.frame.title = "App of " + opened.server + ": " + app.name;
      app.frame.src = opened.frame;
    } catch (err) {
      app.box.replaceChildren(el("p", { class: "app-error" }, "The app could not be shown: " + err.message));
    }
  }

  function place(app, node) {
    if (!app.box.isConnected || app.box.previousSibling !== node) node.after(app.box);
  }

  // Called by the chat for every tool result it shows (streamed or from the thread).
  async function onResult(callId, node, content, status) {
    if (callId.startsWith("app_")) return markFromApp(node);  // an app's own call: no new app
    if (status !== "done" || !state.threadId || callId.includes("/")) return;
    const name = node.dataset.name;
    const threadId = state.threadId;
    if (!(await loadTools()).has(name) || threadId !== state.threadId) return;
    const key = threadId + "/" + callId;
    let app = apps.get(key);
    if (!app) {
      const frame = el("iframe", { sandbox: "allow-scripts", class: "app-frame", "data-testid": "app-frame",
        referrerpolicy: "no-referrer", title: "App: " + name });
      const box = el("div", { class: "app", role: "group", "aria-label": "App of " + name });
      box.append(frame);
      let input = {};
      try { input = JSON.parse(node.querySelector(":scope > .args").textContent || "{}"); } catch { /* keep {} */ }
      app = { threadId, callId, name, frame, box, input, session: null, busy: 0, queue: Promise.resolve(),
        result: parseResult(typeof content === "string" ? content : JSON.stringify(content), false) };
      apps.set(key, app);
      place(app, node);
      byWindow.set(frame.contentWindow, app);
      render(app);
      return;
    }
    const reattach = !app.box.isConnected;
    place(app, node);
    // A frame moved in the document reloads: it initializes again and gets its data again.
    if (reattach) byWindow.set(app.frame.contentWindow, app);
  }

  window.addEventListener("message", onMessage);
  return { onResult, loadTools };
})();
