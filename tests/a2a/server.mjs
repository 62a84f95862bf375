// A reference A2A server written with the official JS SDK (@a2a-js/sdk, express), for
// A2AAgent's interop tests. Listens on 127.0.0.1 (a free port); prints {"url": ...} first,
// then one JSON line per thing the test waits on: {"started": id}, {"canceled": id}.
// A message containing "slow" works until CancelTask; "confirm" asks a question
// (input-required) and answers with what the client said; any other is answered in chunks.
import express from "express";
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server";
import { UserBuilder, agentCardHandler, jsonRpcHandler } from "@a2a-js/sdk/server/express";
import { Role, TaskState } from "@a2a-js/sdk";

const say = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
const text = (value) => ({ content: { $case: "text", value }, metadata: undefined });
const agentMessage = (taskId, contextId, value) => ({
  messageId: crypto.randomUUID(),
  contextId,
  taskId,
  role: Role.ROLE_AGENT,
  parts: [text(value)],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});
const status = (taskId, contextId, state, message) => ({
  taskId,
  contextId,
  status: { state, message, timestamp: new Date().toISOString() },
  metadata: undefined,
});
const chunk = (taskId, contextId, value, append, lastChunk) => ({
  taskId,
  contextId,
  artifact: { artifactId: "answer", name: "answer", description: "", parts: [text(value)], metadata: undefined, extensions: [] },
  append,
  lastChunk,
  metadata: undefined,
});

class GeoExecutor {
  constructor() {
    this.stops = new Map(); // task id -> resolve() of its wait
  }

  async execute(ctx, bus) {
    const { taskId, contextId } = ctx;
    const question = ctx.userMessage.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");
    if (!ctx.task) {
      bus.publish(
        AgentEvent.task({
          id: taskId,
          contextId,
          status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() },
          artifacts: [],
          history: [ctx.userMessage],
          metadata: undefined,
        }),
      );
    }
    if (ctx.task?.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED) {
      // The client's answer to our question, in the same task.
      bus.publish(AgentEvent.task(ctx.task)); // a stream starts with its task
      bus.publish(AgentEvent.artifactUpdate(chunk(taskId, contextId, `you said: ${question}`, false, true)));
      bus.publish(AgentEvent.statusUpdate(status(taskId, contextId, TaskState.TASK_STATE_COMPLETED, undefined)));
      bus.finished();
      return;
    }
    bus.publish(AgentEvent.statusUpdate(status(taskId, contextId, TaskState.TASK_STATE_WORKING, agentMessage(taskId, contextId, "looking it up"))));
    if (question.includes("confirm")) {
      const ask = agentMessage(taskId, contextId, "Really delete the file?");
      bus.publish(AgentEvent.statusUpdate(status(taskId, contextId, TaskState.TASK_STATE_INPUT_REQUIRED, ask)));
      bus.finished();
      return;
    }
    if (question.includes("slow")) {
      say({ started: taskId });
      await new Promise((resolve) => this.stops.set(taskId, resolve));
      return; // cancelTask published the final status
    }
    bus.publish(AgentEvent.artifactUpdate(chunk(taskId, contextId, "Paris is ", false, false)));
    bus.publish(AgentEvent.artifactUpdate(chunk(taskId, contextId, "the capital.", true, false)));
    bus.publish(AgentEvent.artifactUpdate(chunk(taskId, contextId, "Paris is the capital.", false, true)));
    bus.publish(AgentEvent.statusUpdate(status(taskId, contextId, TaskState.TASK_STATE_COMPLETED, undefined)));
    bus.finished();
  }

  async cancelTask(taskId, bus) {
    say({ canceled: taskId });
    const stop = this.stops.get(taskId);
    this.stops.delete(taskId);
    bus.publish(AgentEvent.statusUpdate(status(taskId, "", TaskState.TASK_STATE_CANCELED, undefined)));
    bus.finished();
    stop?.();
  }
}

const card = {
  name: "geo",
  description: "Answers geography questions (an @a2a-js/sdk server).",
  supportedInterfaces: [{ url: "", protocolBinding: "JSONRPC", protocolVersion: "1.0", tenant: "" }],
  provider: undefined,
  version: "1.0.0",
  capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ["text/plain"],
  defaultOutputModes: ["text/plain"],
  skills: [{ id: "geo", name: "geo", description: "Capitals.", tags: ["geo"], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
  signatures: [],
  iconUrl: undefined,
};

const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new GeoExecutor());
const app = express();
app.use("/.well-known/agent-card.json", agentCardHandler({ agentCardProvider: handler }));
app.use("/", jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
const server = app.listen(0, "127.0.0.1", () => {
  const url = `http://127.0.0.1:${server.address().port}`;
  card.supportedInterfaces[0].url = `${url}/`;
  say({ url });
});
process.stdin.on("end", () => process.exit(0)); // the test closed our stdin: stop
process.stdin.resume();
