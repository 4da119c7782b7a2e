// Runs inside a child `node` process started by e2e/openai_sdk_https.test.mjs,
// so that NODE_EXTRA_CA_CERTS (read by Node only at process start) can carry
// the test CA — exactly how a real deployment would trust a private CA.
//
//   node openai_https_child.mjs '{"baseURL": "...", "apiKey": "...", "case": NAME}'
//
// Prints one JSON line: {ok: true, ...what the case observed} or
// {ok: false, error: {name, status, code, message, cause}}.

import OpenAI from 'openai';

const job = JSON.parse(process.argv[2]);
// Never outlive the test that started this, whatever happens.
setTimeout(() => {
  process.stdout.write(`${JSON.stringify({ ok: false, error: { name: 'ChildTimeout', message: 'gave up after 25 s' } })}\n`);
  process.exit(3);
}, 25_000).unref();

const client = new OpenAI({ apiKey: job.apiKey, baseURL: job.baseURL, maxRetries: 0, timeout: 20_000 });
const messages = [{ role: 'user', content: job.content ?? 'hi' }];

const cases = {
  async create() {
    const { data, response } = await client.chat.completions
      .create({ model: 'kimi-agent-swarm', messages })
      .withResponse();
    return {
      object: data.object,
      content: data.choices[0].message.content,
      finishReason: data.choices[0].finish_reason,
      totalTokens: data.usage?.total_tokens,
      upstream: response.headers.get('x-relay-upstream'),
      requestId: response.headers.get('x-request-id'),
    };
  },

  async stream() {
    const stream = await client.chat.completions.create(
      { model: 'kimi-agent-swarm', messages, stream: true, stream_options: { include_usage: true } },
      { headers: { 'x-mock-chunks': '9', 'x-mock-chunk-delay-ms': '20' } },
    );
    const pieces = [];
    let finishReason = null;
    let usage = null;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks += 1;
      if (chunk.object !== 'chat.completion.chunk') throw new Error(`chunk object ${chunk.object}`);
      const choice = chunk.choices[0];
      if (choice?.delta?.content) pieces.push(choice.delta.content);
      finishReason = choice?.finish_reason ?? finishReason;
      usage = chunk.usage ?? usage;
    }
    return { chunks, pieces, finishReason, usage };
  },

  // The caller stops reading after two chunks (a user pressing "stop").
  async streamAbort() {
    const stream = await client.chat.completions.create(
      { model: 'kimi-agent-swarm', messages, stream: true },
      { headers: { 'x-mock-chunks': '80', 'x-mock-chunk-delay-ms': '50' } },
    );
    let chunks = 0;
    for await (const _chunk of stream) {
      chunks += 1;
      if (chunks === 2) break;
    }
    // Stay alive a while: the cancellation must come from the SDK's abort,
    // not from this process exiting.
    await new Promise((resolve) => setTimeout(resolve, job.holdMs ?? 0));
    return { chunks };
  },

  async models() {
    const ids = [];
    for await (const model of client.models.list()) ids.push(model.id);
    return { ids };
  },
};

try {
  const result = await cases[job.case]();
  process.stdout.write(`${JSON.stringify({ ok: true, ...result })}\n`);
} catch (err) {
  const cause = err?.cause;
  process.stdout.write(
    `${JSON.stringify({
      ok: false,
      error: {
        name: err?.constructor?.name,
        status: err?.status,
        code: err?.code,
        requestId: err?.requestID,
        message: String(err?.message),
        cause: cause
          ? [cause.code, cause.message, cause.cause?.code, cause.cause?.message].filter(Boolean).join(' ')
          : null,
      },
    })}\n`,
  );
}
process.exit(0);
