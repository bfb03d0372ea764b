// Relay memory under HTTP clients that never finish their request body, measured from
// outside: plain TCP sockets (node:net) in their own process against a running
// `buzz-relay`.
//
//   node slow-bodies.mjs --relay http://127.0.0.1:7777 --pid <relay pid> \
//       [--connections 1000] [--bytes 524288] [--path /query] [--seconds 35] [--signed 1]
//
// With --signed, each request carries a valid NIP-98 header (a fresh key per socket,
// the payload hash of the whole announced body), so the relay cannot refuse it before
// the body; without it the relay may answer 401 at once.
//
// 1. opens --connections sockets; each sends the request line and headers of a
//    `POST --path` announcing --bytes of body, then all of the body but its last byte,
//    and goes silent;
// 2. samples the relay's RSS (from /proc/<pid>/status) every second for --seconds;
// 3. reports how many sockets the relay answered (and with which status) or closed, and
//    when. The relay must bound what it buffers for unfinished bodies, answer them
//    within its body deadline, and let go of the sockets.
import { finalizeEvent, generateSecretKey } from "nostr-tools/pure";
import { createHash } from "node:crypto";
import { connect } from "node:net";
import { readFileSync } from "node:fs";
import { commandLine } from "./args.mjs";

const args = commandLine();
const relay = new URL(args.relay ?? "http://127.0.0.1:7777");
const pid = Number(args.pid);
const connections = Number(args.connections ?? 1000);
const bytes = Number(args.bytes ?? 524_288);
const path = args.path ?? "/query";
const seconds = Number(args.seconds ?? 35);
if (!pid) throw new Error("--pid <relay pid> is required (its RSS is what we measure)");

const rssMb = () => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)[1]) / 1024;
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const started = Date.now();
const before = rssMb();
const ends = []; // { status, at } per socket, when the relay answered or closed it
const body = Buffer.alloc(bytes - 1, "x".charCodeAt(0));
const payload = createHash("sha256").update(Buffer.alloc(bytes, "x".charCodeAt(0))).digest("hex");
const authorization = () => {
  if (!args.signed) return "";
  const event = finalizeEvent(
    {
      kind: 27235,
      created_at: Math.floor(Date.now() / 1000),
      tags: [["u", new URL(path, relay).href], ["method", "POST"], ["payload", payload]],
      content: "",
    },
    generateSecretKey(),
  );
  return `Authorization: Nostr ${Buffer.from(JSON.stringify(event)).toString("base64")}\r\n`;
};

function open() {
  return new Promise((resolve) => {
    const socket = connect(Number(relay.port), relay.hostname, () => {
      socket.write(
        `POST ${path} HTTP/1.1\r\nHost: ${relay.host}\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${bytes}\r\n${authorization()}\r\n`,
      );
      socket.write(body, () => resolve(socket));
    });
    let answer = "";
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      const status = /^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? "closed without an answer";
      ends.push({ status, at: (Date.now() - started) / 1000 });
    };
    socket.on("data", (chunk) => {
      answer += chunk.toString("latin1");
      if (answer.includes("\r\n\r\n")) end();
    });
    socket.on("close", end);
    socket.on("error", end);
  });
}

const sockets = [];
for (let i = 0; i < connections; i += 50) {
  const batch = [];
  for (let j = i; j < Math.min(connections, i + 50); j++) batch.push(open());
  sockets.push(...(await Promise.all(batch)));
}
console.log(`${connections} sockets sent ${bytes - 1} of ${bytes} body bytes; relay RSS ${before.toFixed(0)} MB before`);
let peak = rssMb();
for (let t = 1; t <= seconds; t++) {
  await sleep(1000);
  const rss = rssMb();
  peak = Math.max(peak, rss);
  if (t % 5 === 0) console.log(`t=${t}s relay RSS ${rss.toFixed(0)} MB (peak ${peak.toFixed(0)}), answered or closed ${ends.length}/${connections}`);
}
const byStatus = {};
for (const { status } of ends) byStatus[status] = (byStatus[status] ?? 0) + 1;
const last = ends.reduce((m, e) => Math.max(m, e.at), 0);
console.log(
  `unfinished bodies x${connections}: relay RSS ${before.toFixed(0)} -> peak ${peak.toFixed(0)} MB, ` +
    `after ${seconds}s ${rssMb().toFixed(0)} MB; answered or closed ${ends.length}/${connections} ` +
    `(last at ${last.toFixed(1)}s) ${JSON.stringify(byStatus)}`,
);
for (const s of sockets) s.destroy();
