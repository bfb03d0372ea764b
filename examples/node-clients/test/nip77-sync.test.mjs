// nostr-tools 2 `NegentropySync` (NIP-77) against a Buzz relay with the sync plugin (on by
// default in buzz-relay): a client holding part of a channel, plus messages the relay
// never saw, learns exactly which ids it needs and which the relay lacks; a stranger
// reconciling a private channel learns nothing.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { SimplePool, useWebSocketImplementation } from 'nostr-tools/pool'
import { generateSecretKey, finalizeEvent } from 'nostr-tools/pure'
import { RELAY, WebSocket, channelId, within } from '../lib.mjs'

useWebSocketImplementation(WebSocket)

// nostr-tools ships nip77 without a package export entry: load the file itself.
const { NegentropySync, NegentropyStorageVector } = await import(
  new URL('../node_modules/nostr-tools/lib/esm/nip77.js', import.meta.url)
)

const alice = generateSecretKey()
const bob = generateSecretKey()
const signer = (sk) => (template) => finalizeEvent(template, sk)
let stamp = Math.floor(Date.now() / 1000) - 300
const sign = (sk, template) => finalizeEvent({ created_at: stamp++, content: '', tags: [], ...template }, sk)
const url = RELAY
const open = channelId()
const secret = channelId()
let pool, bobPool
let posted = []
let hidden = []

async function publish (p, sk, event) {
  const [result] = p.publish([url], event, { onauth: signer(sk) })
  return within(5000, `publish kind ${event.kind}`, result)
}

/** Reconcile `filter` on `relay` holding `events`: the ids it needs and the relay lacks. */
function reconcile (relay, filter, events) {
  const storage = new NegentropyStorageVector()
  for (const e of events) storage.insert(e.created_at, e.id)
  storage.seal()
  const need = new Set()
  const have = new Set()
  const done = new Promise((resolve) => {
    const sync = new NegentropySync(relay, storage, filter, {
      onneed: (id) => need.add(id),
      onhave: (id) => have.add(id),
      onclose: resolve
    })
    sync.start()
  })
  return within(5000, 'NegentropySync', done).then(() => ({ need, have }))
}

before(async () => {
  pool = new SimplePool()
  bobPool = new SimplePool()
  await publish(pool, alice, sign(alice, { kind: 9007, tags: [['h', open]] }))
  await publish(pool, alice, sign(alice, { kind: 9007, tags: [['h', secret], ['private']] }))
  for (let i = 0; i < 25; i++) {
    const event = sign(alice, { kind: 9, content: `posted ${i}`, tags: [['h', open]] })
    await publish(pool, alice, event)
    posted.push(event)
  }
  for (let i = 0; i < 6; i++) {
    const event = sign(alice, { kind: 9, content: `secret ${i}`, tags: [['h', secret]] })
    await publish(pool, alice, event)
    hidden.push(event)
  }
})

after(() => {
  pool.destroy()
  bobPool.destroy()
})

test('NegentropySync learns exactly what the client lacks and what the relay lacks', async () => {
  const relay = await pool.ensureRelay(url)
  const offline = [0, 1].map((i) => sign(alice, { kind: 9, content: `offline ${i}`, tags: [['h', open]] }))
  const held = [...posted.slice(0, 10), ...offline]
  const { need, have } = await reconcile(relay, { kinds: [9], '#h': [open] }, held)
  assert.deepEqual([...need].sort(), posted.slice(10).map((e) => e.id).sort())
  assert.deepEqual([...have].sort(), offline.map((e) => e.id).sort())
})

test('a private channel reconciles like an empty one for a stranger', async () => {
  const relay = await bobPool.ensureRelay(url)
  // Wait for the challenge, then authenticate this connection as bob.
  await within(5000, 'AUTH challenge', (async () => {
    while (!relay.challenge) await new Promise((resolve) => setTimeout(resolve, 20))
  })())
  await relay.auth(signer(bob))
  const { need, have } = await reconcile(relay, { kinds: [9], '#h': [secret] }, hidden.slice(0, 2))
  assert.equal(need.size, 0)
  assert.deepEqual([...have].sort(), hidden.slice(0, 2).map((e) => e.id).sort())
  // Community-wide: bob learns the open channel's messages only.
  const wide = await reconcile(relay, { kinds: [9] }, [])
  assert.deepEqual([...wide.need].sort(), posted.map((e) => e.id).sort())
})
