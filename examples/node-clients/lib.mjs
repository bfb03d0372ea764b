// Shared by the client suites: which relay, a WebSocket for Node, keys, waiting.
import WebSocket from 'ws'
import { randomUUID } from 'node:crypto'

/** The relay under test, e.g. ws://127.0.0.1:7777 (the Rust harness sets it). */
export const RELAY = process.env.BUZZ_RELAY_URL
if (!RELAY) {
  throw new Error('set BUZZ_RELAY_URL to the relay under test (ws://host:port)')
}

export { WebSocket }

/** A channel id as this relay takes them: a lowercase UUID. */
export const channelId = () => randomUUID()

/** Reject after `ms` with `what`, so a client that hangs fails the check instead. */
export function within (ms, what, promise) {
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

/** NIP-11 document of the relay. */
export async function relayInfo () {
  const response = await fetch(RELAY.replace(/^ws/, 'http'), {
    headers: { Accept: 'application/nostr+json' }
  })
  return response.json()
}
