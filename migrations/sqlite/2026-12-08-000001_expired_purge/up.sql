-- NIP-40: the background purge (core/src/expiry.rs) finds expired events by this index,
-- which holds only the rows that expire at all, so it stays small and a tick with
-- nothing to purge reads one index entry.
-- Keep in step with ../../postgres/2026-12-08-000001_expired_purge.
CREATE INDEX events_expiring ON events (expires_at) WHERE expires_at IS NOT NULL;
-- limits.max_expiring_bytes_per_pubkey: one author's expiring events, read at ingest of
-- an expiring event, without walking the author's other events.
CREATE INDEX events_expiring_by_author ON events (community_id, pubkey)
    WHERE expires_at IS NOT NULL;
