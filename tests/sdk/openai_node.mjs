// What a user of the Node `openai` package does against Agentplane's Responses API. Prints one
// JSON object of what it read; tests/openai_sdk.rs checks it.
// Env: AP_BASE, AP_KEY, AP_AGENT; NODE_PATH names the node_modules holding `openai`.
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const OpenAI = require(require.resolve("openai", { paths: [process.env.NODE_PATH] }));
const client = new OpenAI({ baseURL: process.env.AP_BASE, apiKey: process.env.AP_KEY, maxRetries: 0 });
const model = process.env.AP_AGENT;
const seen = {};

const first = await client.responses.create({ model, input: "hi from node" });
seen.create = { id: first.id, text: first.output_text, total_tokens: first.usage.total_tokens };

const stream = await client.responses.create({ model, input: "stream from node", stream: true });
const types = [];
let text = "";
let completed = null;
for await (const event of stream) {
  types.push(event.type);
  if (event.type === "response.output_text.delta") text += event.delta;
  if (event.type === "response.completed") completed = event.response;
}
seen.stream = { types, text, completed_text: completed?.output_text ?? null, id: completed?.id ?? null };

const again = await client.responses.create({ model, input: "more", previous_response_id: first.id });
seen.continued = { id: again.id, text: again.output_text };

try {
  await client.responses.create({ model, input: "x", text: { format: { type: "json_object" } } });
  seen.refused = "no error";
} catch (e) {
  seen.refused = [e.status, e.param ?? e.error?.param ?? null];
}
console.log(JSON.stringify(seen));
