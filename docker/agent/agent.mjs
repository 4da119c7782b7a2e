// A stand-in for an agent of the swarm: every AGENT_INTERVAL_MS it asks the
// relay (OPENAI_BASE_URL, http://localhost:8080/v1 in the sidecar pattern) for
// one completion and one streamed completion, and logs what came back.
import OpenAI from 'openai';

const client = new OpenAI({
  baseURL: process.env.OPENAI_BASE_URL ?? 'http://localhost:8080/v1',
  apiKey: process.env.OPENAI_API_KEY,
  maxRetries: 2,
  timeout: 60_000,
});
const model = process.env.AGENT_MODEL ?? 'kimi-k2';
const intervalMs = Number(process.env.AGENT_INTERVAL_MS ?? 5000);

let stopping = false;
let wake = () => {};
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    stopping = true;
    wake();
  });
}

for (let n = 1; !stopping; n += 1) {
  try {
    const { data: reply, response } = await client.chat.completions
      .create({ model, messages: [{ role: 'user', content: `task ${n}` }] })
      .withResponse();
    const upstream = response.headers.get('x-relay-upstream');
    console.log(`#${n} ${upstream}: ${reply.choices[0].message.content} (${reply.usage?.total_tokens} tokens)`);

    const stream = await client.chat.completions.create({
      model,
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: `stream ${n}` }],
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    console.log(`#${n} streamed: ${text}`);
  } catch (err) {
    console.error(`#${n} failed: ${err.status ?? ''} ${err.message}`);
  }
  await new Promise((resolve) => {
    wake = resolve;
    setTimeout(resolve, intervalMs);
  });
}
