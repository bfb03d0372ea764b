// One heavy-read loop of read-hogs.mjs, in a thread of its own so that reading the
// answers never delays the bystander's timer (its event loop is the main thread's).
// Runs `shape` until the main thread says stop, then posts what it got: answers and
// refusals by prefix, timeouts.
import { parentPort, workerData } from "node:worker_threads";
import { Client, newKey, postQuery } from "./wire.mjs";

const { url, httpBase, shape, filters, parallel } = workerData;
const outcomes = {};
const tally = (key) => (outcomes[key] = (outcomes[key] ?? 0) + 1);
const prefixOf = (text) => (typeof text === "string" ? text.split(":")[0] : String(text));
let running = true;
parentPort.on("message", () => (running = false));

async function loop(read) {
  while (running) {
    try {
      tally(await read());
    } catch {
      tally("timeout");
    }
  }
}

if (shape === "http-query") {
  // `parallel` requests at a time from one key.
  const key = newKey();
  await Promise.all(
    Array.from({ length: parallel }, () =>
      loop(async () => {
        const [status, body] = await postQuery(httpBase, key, filters);
        return status === 200 ? "200" : `${status} ${prefixOf(JSON.parse(body).error ?? "")}`;
      }),
    ),
  );
} else {
  const client = await Client.connect(url, newKey(), { light: true });
  await loop(async () => {
    if (shape === "wide-req") return prefixOf((await client.req(filters)).end);
    const answer = await client.count(filters);
    return answer.refused ? prefixOf(answer.refused) : answer.approximate ? "approximate" : "counted";
  });
  client.close();
}
parentPort.postMessage(outcomes);
