// The official A2A JS SDK (@a2a-js/sdk) as a client of an agentkit to_a2a server.
// Usage: node client.mjs <scenario> <base url>; prints one JSON object (what it saw).
// Scenarios: card, send, stream, cancel (cancel once the tool call is reported),
// approve (input-required, then a data-part decision in the same task).
import { ClientFactory } from "@a2a-js/sdk/client";
import { Role, TaskState } from "@a2a-js/sdk";

const [scenario, baseUrl] = process.argv.slice(2);

function message(parts, { contextId = "", taskId = "" } = {}) {
  return {
    messageId: crypto.randomUUID(),
    contextId,
    taskId,
    role: Role.ROLE_USER,
    parts,
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}
const text = (value) => ({ content: { $case: "text", value }, metadata: undefined });
const data = (value) => ({ content: { $case: "data", value }, metadata: undefined });
const request = (msg) => ({ tenant: "", message: msg, configuration: undefined, metadata: undefined });
const stateName = (state) => TaskState[state];
const partText = (parts) =>
  parts.filter((p) => p.content?.$case === "text").map((p) => p.content.value).join("");

function describe(event) {
  const { $case, value } = event.payload;
  if ($case === "task") return { kind: "task", id: value.id, context: value.contextId, state: stateName(value.status.state) };
  if ($case === "statusUpdate") {
    const parts = value.status.message?.parts ?? [];
    return {
      kind: "status",
      id: value.taskId,
      context: value.contextId,
      state: stateName(value.status.state),
      text: partText(parts),
      data: parts.filter((p) => p.content?.$case === "data").map((p) => p.content.value),
    };
  }
  if ($case === "artifactUpdate")
    return { kind: "artifact", id: value.taskId, append: value.append, last: value.lastChunk, text: partText(value.artifact.parts) };
  return { kind: $case };
}

async function main() {
  const client = await new ClientFactory().createFromUrl(baseUrl);
  const out = { scenario, protocolVersion: client.protocolVersion };
  if (scenario === "card") {
    const card = await client.getAgentCard();
    out.card = { name: card.name, description: card.description, skills: card.skills.map((s) => s.id), streaming: card.capabilities?.streaming };
  } else if (scenario === "send") {
    const result = await client.sendMessage(request(message([text("1+2?")])));
    out.kind = result.payload?.$case ?? (result.status ? "task" : "message");
    const task = result.payload?.value ?? result;
    out.state = stateName(task.status.state);
    out.answer = task.artifacts.map((a) => partText(a.parts)).join("\n");
    out.contextId = task.contextId;
  } else if (scenario === "stream") {
    out.events = [];
    for await (const event of client.sendMessageStream(request(message([text("1+2?")])))) out.events.push(describe(event));
  } else if (scenario === "cancel") {
    out.events = [];
    let taskId = "";
    for await (const event of client.sendMessageStream(request(message([text("crawl it")])))) {
      const seen = describe(event);
      out.events.push(seen);
      taskId ||= seen.id;
      if (seen.kind === "status" && seen.text.startsWith("calling ") && !out.canceled) {
        const task = await client.cancelTask({ tenant: "", id: taskId, metadata: undefined });
        out.canceled = stateName(task.status.state);
      }
    }
    const after = await client.getTask({ tenant: "", id: taskId, historyLength: undefined });
    out.after = stateName(after.status.state);
  } else if (scenario === "approve") {
    out.first = [];
    for await (const event of client.sendMessageStream(request(message([text("delete it")])))) out.first.push(describe(event));
    const last = out.first[out.first.length - 1];
    const callId = last.data[0].pendingApprovals[0].id;
    const decision = message([data({ approvals: { [callId]: true } })], { contextId: last.context, taskId: last.id });
    out.second = [];
    for await (const event of client.sendMessageStream(request(decision))) out.second.push(describe(event));
  } else {
    throw new Error(`unknown scenario ${scenario}`);
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((err) => {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exit(1);
});
