// blossom-client-sdk, unchanged, against the relay's media plugin: the relay's http URL
// is the Blossom server. Upload (BUD-06 preflight first, then PUT), list, download,
// delete, each with the SDK's own kind-24242 authorization.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { generateSecretKey, getPublicKey, finalizeEvent } from 'nostr-tools/pure'
import {
  Actions, createUploadAuth, createListAuth, createDownloadAuth, createDeleteAuth
} from 'blossom-client-sdk'
import { RELAY } from '../lib.mjs'

const SERVER = RELAY.replace(/^ws/, 'http')

function member () {
  const secret = generateSecretKey()
  return { pubkey: getPublicKey(secret), sign: async (draft) => finalizeEvent(draft, secret) }
}

test('blossom-client-sdk uploads, lists, fetches and deletes through the relay', async () => {
  const alice = member()
  const text = `meeting notes ${randomUUID()}`
  const blob = new Blob([text], { type: 'text/plain' })

  const descriptor = await Actions.uploadBlob(SERVER, blob, {
    onAuth: (_server, sha256) => createUploadAuth(alice.sign, sha256)
  })
  assert.equal(descriptor.size, Buffer.byteLength(text))
  assert.equal(descriptor.type, 'text/plain')
  assert.match(descriptor.url, new RegExp(`/${descriptor.sha256}\\.txt$`))

  const listed = await Actions.listBlobs(SERVER, alice.pubkey, {
    onAuth: () => createListAuth(alice.sign)
  })
  assert.deepEqual(listed.map((d) => d.sha256), [descriptor.sha256])

  const download = await Actions.downloadBlob(SERVER, descriptor.sha256, {
    onAuth: (_server, sha256) => createDownloadAuth(alice.sign, sha256)
  })
  assert.equal(await download.text(), text)

  // Nothing is readable anonymously, and the SDK's refusal carries the relay's reason.
  const anonymous = await fetch(`${SERVER}/${descriptor.sha256}`)
  assert.equal(anonymous.status, 401)
  assert.ok(anonymous.headers.get('x-reason'))

  const deleted = await Actions.deleteBlob(SERVER, descriptor.sha256, {
    onAuth: (_server, sha256) => createDeleteAuth(alice.sign, sha256)
  })
  assert.equal(deleted, true)
  await assert.rejects(Actions.downloadBlob(SERVER, descriptor.sha256, {
    onAuth: (_server, sha256) => createDownloadAuth(alice.sign, sha256)
  }))
})
