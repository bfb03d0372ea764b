-- read_state plugin tables (PostgreSQL). Keep in step with ../../sqlite/2026-12-01-100000_read_state.
-- Signer-private read state: nothing here is ever served through Nostr queries.

-- One row per (community, signer) that sent a read intent: `started_at` (arrival
-- microseconds) floors every position, so history from before it never counts.
CREATE TABLE read_state_accounts (
    community_id BIGINT NOT NULL,
    pubkey TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    PRIMARY KEY (community_id, pubkey)
);

-- Read positions: one row per channel timeline (root_id = '') and per thread the signer
-- follows or unfollowed. `position` and `cut` are arrival times (events.received_at,
-- microseconds) and only move forward. `cut` (channel rows only) is the whole-channel
-- cut of mark_channel_read and of joining: it reads the timeline and every thread.
-- `following` is false for a sticky unfollow (thread rows only).
CREATE TABLE read_state_frontiers (
    community_id BIGINT NOT NULL,
    pubkey TEXT NOT NULL,
    channel_id TEXT NOT NULL,
    root_id TEXT NOT NULL,
    position BIGINT NOT NULL,
    cut BIGINT NOT NULL DEFAULT 0,
    following BOOLEAN NOT NULL DEFAULT TRUE,
    PRIMARY KEY (community_id, pubkey, channel_id, root_id)
);

-- Mentions (`p` tags of eligible messages), one row per mentioned signer and scope the
-- message shows in (root_id = '' for the timeline), so a count walks only the signer's
-- mentions past a position.
CREATE TABLE read_state_mentions (
    community_id BIGINT NOT NULL,
    pubkey TEXT NOT NULL,
    channel_id TEXT NOT NULL,
    root_id TEXT NOT NULL,
    received_at BIGINT NOT NULL,
    event_id TEXT NOT NULL,
    PRIMARY KEY (community_id, event_id, pubkey, root_id)
);
CREATE INDEX idx_event_mentions_scope_received
    ON read_state_mentions (community_id, pubkey, channel_id, root_id, received_at);
