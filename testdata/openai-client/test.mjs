// Checks `arborist serve` with the official openai client (npm package
// "openai", pinned in package.json): completions and chat completions,
// whole and streamed; greedy output equal to `arborist run` with the same
// config and prompt; malformed, oversized and unsupported requests
// answered with JSON errors while the server keeps serving; /health and
// /metrics; and a clean exit on SIGTERM with a stream in flight, which
// finishes. scripts/openai-client-test.sh runs it (make test).
//
// usage: node test.mjs ARBORIST CONFIG.yaml CHAT_TEMPLATE WORKDIR

import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import OpenAI from "openai";

const [arborist, config, template, work] = process.argv.slice(2);
if (!work) {
  console.error("usage: node test.mjs ARBORIST CONFIG.yaml CHAT_TEMPLATE WORKDIR");
  process.exit(2);
}
const db = `${work}/serve.db`;
const maxBody = 65536;
const N = 32;
let checks = 0;
const ok = (what) => {
  checks++;
  console.log(`ok ${checks} - ${what}`);
};

// run executes arborist with args and returns its stdout.
function run(args) {
  return new Promise((resolve, reject) => {
    const p = spawn(arborist, args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "", err = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (err += d));
    p.on("error", reject);
    p.on("close", (code) => (code === 0 ? resolve(out) : reject(new Error(`arborist ${args.join(" ")}: exit ${code}\n${err}`))));
  });
}

// runText is the text `arborist run --config` decodes after prompt: its
// output is the prompt, the text, a newline, then the report, which
// starts "\n\nLABEL: N tokens in ...".
async function runText(prompt, n) {
  const out = await run(["run", "--config", config, "--prompt", prompt, "-n", String(n), "--no-store", "--db", db]);
  assert.ok(out.startsWith(prompt), `run's output does not start with the prompt: ${JSON.stringify(out)}`);
  const reports = [...out.matchAll(/\n\n[^\n]*: \d+ tokens in [\d.]+ ms: /g)];
  assert.ok(reports.length > 0, `no report in run's output: ${JSON.stringify(out)}`);
  return out.slice(prompt.length, reports[reports.length - 1].index);
}

// start launches the server on a free port and resolves with its base URL.
function start() {
  const p = spawn(arborist, ["serve", "--config", config, "--port", "0", "--chat-template", template, "--db", db,
    "--max-body", String(maxBody), "--max-tokens", "128", "--quiet"], { stdio: ["ignore", "pipe", "pipe"] });
  createInterface({ input: p.stderr }).on("line", (line) => console.log(`# ${line}`));
  const exited = new Promise((resolve) => p.on("exit", (code, signal) => resolve({ code, signal })));
  const url = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("arborist serve printed no address in 120 s")), 120000);
    createInterface({ input: p.stdout }).on("line", (line) => {
      console.log(`# ${line}`);
      const m = line.match(/ at (http:\/\/\S+)\/v1 /);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    exited.then(({ code }) => reject(new Error(`arborist serve exited ${code} before serving`)));
  });
  return { proc: p, url, exited };
}

// expectAPIError runs f and checks it fails with an OpenAI API error of
// the status (and code).
async function expectAPIError(f, status, code, what) {
  try {
    await f();
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIError, `${what}: not an API error: ${e}`);
    assert.equal(e.status, status, `${what}: status ${e.status}: ${e.message}`);
    if (code) assert.equal(e.code, code, `${what}: code ${e.code}: ${e.message}`);
    assert.ok(e.message.length > 0);
    ok(`${what}: ${status} ${e.code}`);
    return;
  }
  assert.fail(`${what}: no error`);
}

// raw posts a body and checks the JSON error it gets.
async function rawError(url, body, status, code, what) {
  const resp = await fetch(`${url}/v1/completions`, { method: "POST", headers: { "Content-Type": "application/json" }, body });
  assert.equal(resp.status, status, what);
  const v = await resp.json();
  assert.equal(typeof v.error?.message, "string", `${what}: ${JSON.stringify(v)}`);
  assert.equal(v.error.code, code, `${what}: ${JSON.stringify(v)}`);
  ok(`${what}: ${status} ${code}`);
}

const server = start();
let failed = false;
try {
  const url = await server.url;
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 });

  const models = await client.models.list();
  assert.equal(models.data.length, 1);
  const model = models.data[0].id;
  ok(`models: ${model}`);

  const prompt = "Once upon a time";
  const want = await runText(prompt, N);
  assert.ok(want.length > 0);
  const c = await client.completions.create({ model, prompt, max_tokens: N, temperature: 0 });
  assert.equal(c.choices[0].text, want, "completion != arborist run");
  assert.equal(c.object, "text_completion");
  assert.ok(c.usage.completion_tokens > 0 && c.usage.prompt_tokens > 0);
  ok(`completion equals arborist run (${c.usage.completion_tokens} tokens)`);

  let streamed = "", finish = null;
  for await (const chunk of await client.completions.create({ model, prompt, max_tokens: N, stream: true })) {
    streamed += chunk.choices[0]?.text ?? "";
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(streamed, want, "streamed completion != arborist run");
  assert.ok(finish === "length" || finish === "stop");
  ok("streamed completion equals arborist run");

  // the chat template renders "user: TEXT\nassistant:" after BOS
  const chatWant = await runText(`user: ${prompt}\nassistant:`, N);
  const chat = await client.chat.completions.create({ model, messages: [{ role: "user", content: prompt }], max_tokens: N });
  assert.equal(chat.choices[0].message.role, "assistant");
  assert.equal(chat.choices[0].message.content, chatWant, "chat != arborist run on the rendered template");
  ok("chat completion equals arborist run on the rendered chat template");

  let chatStreamed = "", usage = null;
  for await (const chunk of await client.chat.completions.create({ model, messages: [{ role: "user", content: prompt }], max_tokens: N,
    stream: true, stream_options: { include_usage: true } })) {
    chatStreamed += chunk.choices[0]?.delta?.content ?? "";
    usage = chunk.usage ?? usage;
  }
  assert.equal(chatStreamed, chatWant, "streamed chat != arborist run");
  assert.ok(usage && usage.completion_tokens > 0, "no usage with include_usage");
  ok("streamed chat completion equals arborist run, with usage");

  // bad requests: JSON errors, and the server goes on serving
  await rawError(url, '{"prompt": "Once', 400, "invalid_json", "malformed JSON");
  await rawError(url, JSON.stringify({ prompt: "x".repeat(maxBody + 1) }), 413, "request_too_large", "oversized body");
  await expectAPIError(() => client.completions.create({ model, prompt, max_tokens: 100000 }), 400, "invalid_value", "max_tokens above the limit");
  await expectAPIError(() => client.completions.create({ model, prompt: "the cat sat on the mat. ".repeat(200), max_tokens: 8 }), 400,
    "context_length_exceeded", "prompt beyond the context");
  await expectAPIError(() => client.completions.create({ model, prompt, n: 2 }), 400, "unsupported_parameter", "n = 2");
  await expectAPIError(() => client.chat.completions.create({ model, messages: [{ role: "wizard", content: "hi" }] }), 400, "invalid_value", "unknown role");
  await expectAPIError(() => client.completions.create({ model, prompt, temperature: 5 }), 400, "invalid_value", "temperature 5");
  const again = await client.completions.create({ model, prompt, max_tokens: N, temperature: 0 });
  assert.equal(again.choices[0].text, want);
  ok("still serving, with the same output, after the bad requests");

  const health = await (await fetch(`${url}/health`)).json();
  assert.equal(health.status, "ok");
  const metrics = await (await fetch(`${url}/metrics`)).text();
  for (const m of ["arborist_tokens_per_second ", "arborist_acceptance ", "arborist_aal "]) assert.ok(metrics.includes(m), `metrics lack ${m}`);
  const mj = await (await fetch(`${url}/metrics?format=json`)).json();
  assert.equal(mj.completed, 5);
  assert.ok(mj.tokens_per_s > 0 && mj.aal >= 1);
  ok(`health and metrics (${mj.tokens_per_s.toFixed(1)} tokens/s, AAL ${mj.aal.toFixed(2)}, acceptance ${(100 * mj.acceptance).toFixed(0)}%)`);

  // SIGTERM with a stream in flight: the stream finishes, the server exits 0
  const inflight = await client.completions.create({ model, prompt, max_tokens: 96, stream: true });
  let text = "", chunks = 0, last = null;
  for await (const chunk of inflight) {
    if (chunks++ === 0) server.proc.kill("SIGTERM");
    text += chunk.choices[0]?.text ?? "";
    last = chunk.choices[0]?.finish_reason ?? last;
  }
  assert.ok(last === "length" || last === "stop", `the stream in flight at SIGTERM did not finish (${chunks} chunks)`);
  assert.equal(text, await runText(prompt, 96));
  const { code, signal } = await server.exited;
  assert.equal(code, 0, `exit code ${code}, signal ${signal}`);
  ok("SIGTERM: the stream in flight finished, the server exited 0");
} catch (e) {
  failed = true;
  console.error(`not ok - ${e.stack ?? e}`);
  server.proc.kill("SIGKILL");
}
const version = JSON.parse(readFileSync(new URL("./node_modules/openai/package.json", import.meta.url))).version;
console.log(`${failed ? "FAILED after" : "passed:"} ${checks} checks of arborist serve with the openai client ${version} on Node.js ${process.versions.node}`);
process.exit(failed ? 1 : 0);
