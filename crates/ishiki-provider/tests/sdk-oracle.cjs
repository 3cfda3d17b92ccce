// The official SDKs' own stream accumulators as an oracle: reads a recorded server-sent-events
// stream from FILE, hands it to the SDK as the HTTP response (a custom `fetch`, no network) and
// prints what the SDK assembled — `MessageStream.finalMessage()` (@anthropic-ai/sdk; its beta
// `BetaMessageStream` with `anthropic-beta`),
// `ChatCompletionStream.finalChatCompletion()` and `ResponseStream.finalResponse()` (openai) —
// as one JSON line, or {"error": "..."} when the SDK refuses the stream.
//
// Usage (cwd: the directory whose node_modules holds the pinned SDKs, see provider-schemas.sh):
//   node sdk-oracle.cjs anthropic|anthropic-beta|openai|openai-responses FILE
'use strict';
const { readFileSync } = require('node:fs');
const { createRequire } = require('node:module');
const { join } = require('node:path');

const local = createRequire(join(process.cwd(), 'oracle.js'));
const [protocol, file] = process.argv.slice(2);
const body = readFileSync(file);
const fetch = async () =>
  new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream' } });

async function main() {
  if (protocol === 'anthropic' || protocol === 'anthropic-beta') {
    const Anthropic = local('@anthropic-ai/sdk').default ?? local('@anthropic-ai/sdk');
    const client = new Anthropic({ apiKey: 'test', baseURL: 'http://127.0.0.1:9', fetch, maxRetries: 0 });
    const params = { model: 'm', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] };
    // The beta accumulator knows the beta blocks (a compaction request's `compaction_delta`).
    const stream = protocol === 'anthropic'
      ? client.messages.stream(params)
      : client.beta.messages.stream({ ...params, compaction: { type: 'summarize' } });
    return await stream.finalMessage();
  }
  const OpenAI = local('openai').default ?? local('openai');
  const client = new OpenAI({ apiKey: 'test', baseURL: 'http://127.0.0.1:9', fetch, maxRetries: 0 });
  if (protocol === 'openai') {
    const stream = client.chat.completions.stream({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    return await stream.finalChatCompletion();
  }
  const stream = client.responses.stream({ model: 'm', input: 'hi' });
  return await stream.finalResponse();
}

main().then(
  (value) => process.stdout.write(JSON.stringify(value) + '\n'),
  (error) => process.stdout.write(JSON.stringify({ error: String(error && error.message || error) }) + '\n'),
);
