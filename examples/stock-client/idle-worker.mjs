// One worker thread of idle-connections.mjs: holds its share of the connections, each
// authenticated (NIP-42, a key of its own) with one REQ open, and notes when each live
// event reaches each of them. Several workers share the client's load so that reading
// 10,000 frames per published event is not one event loop's queue.
import WebSocket from "ws";
import { parentPort, workerData } from "node:worker_threads";
import { generateSecretKey } from "nostr-tools/pure";
import { authEvent } from "./wire.mjs";

const { url, count, batch } = workerData;
// Wall-clock milliseconds, comparable across the threads of one process.
const now = () => performance.timeOrigin + performance.now();
const arrivals = new Map(); // event id -> arrival times
const sockets = [];

// Open one connection, answer the relay's AUTH challenge, open one subscription, and
// resolve at its EOSE. Live events are noted by id without parsing the frame.
function connect() {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    const key = generateSecretKey();
    let authId = null;
    ws.on("error", reject);
    ws.on("message", (data) => {
      if (data.length > 9 && data.toString("latin1", 0, 9) === '["EVENT",') {
        const at = now();
        const text = data.toString("latin1");
        const i = text.indexOf('"id":"');
        if (i >= 0) {
          const id = text.slice(i + 6, i + 70);
          const list = arrivals.get(id);
          if (list) list.push(at);
          else arrivals.set(id, [at]);
        }
        return;
      }
      const message = JSON.parse(data);
      if (message[0] === "AUTH" && authId === null) {
        const event = authEvent(url, message[1], key);
        authId = event.id;
        // The REQ follows at once: both relays serve a connection's messages in order, and
        // nostr-rs-relay sends no OK for an accepted AUTH (only for a refused one).
        ws.send(JSON.stringify(["AUTH", event]));
        ws.send(JSON.stringify(["REQ", "live", { kinds: [1], limit: 1 }]));
      } else if (message[0] === "OK" && message[1] === authId && !message[2]) {
        reject(new Error(`AUTH refused: ${message[3]}`));
      } else if (message[0] === "EOSE") {
        resolve(ws);
      } else if (message[0] === "CLOSED") {
        reject(new Error(`subscription closed: ${message[2]}`));
      }
    });
  });
}

parentPort.on("message", async (command) => {
  try {
    if (command === "open") {
      for (let i = 0; i < count; i += batch) {
        const n = Math.min(batch, count - i);
        sockets.push(...(await Promise.all(Array.from({ length: n }, connect))));
        parentPort.postMessage({ opened: sockets.length });
      }
      parentPort.postMessage({ ready: true });
    } else if (command === "report") {
      const closed = sockets.filter((ws) => ws.readyState !== WebSocket.OPEN).length;
      parentPort.postMessage({ arrivals: [...arrivals], closed });
    } else if (command === "close") {
      sockets.forEach((ws) => ws.terminate());
      parentPort.postMessage({ done: true });
    }
  } catch (e) {
    parentPort.postMessage({ error: e.message });
  }
});
