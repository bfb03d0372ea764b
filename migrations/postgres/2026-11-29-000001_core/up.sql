-- Core relay tables (PostgreSQL). Keep in step with ../../sqlite/2026-11-29-000001_core.
CREATE TABLE communities (
    id BIGSERIAL PRIMARY KEY,
    host TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL
);

-- Every stored event. `seq` is the storage order; (community_id, id) is the identity.
CREATE TABLE events (
    seq BIGSERIAL PRIMARY KEY,
    community_id BIGINT NOT NULL REFERENCES communities(id),
    id TEXT NOT NULL,
    pubkey TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    kind INTEGER NOT NULL,
    tags TEXT NOT NULL,
    content TEXT NOT NULL,
    sig TEXT NOT NULL,
    received_at BIGINT NOT NULL,          -- relay arrival, microseconds
    channel_id TEXT,                      -- value of the single `h` tag
    deleted_at BIGINT,                    -- soft deletion time, seconds
    d_tag TEXT,                           -- addressable kinds only
    replace_key TEXT                      -- kind:pubkey[:d] for replaceable/addressable
);
CREATE UNIQUE INDEX events_identity ON events (community_id, id);
-- Partial indexes: rows without a replace key or channel (most notes) cost nothing here.
CREATE UNIQUE INDEX events_replace_key ON events (community_id, replace_key)
    WHERE replace_key IS NOT NULL;
CREATE INDEX events_by_time ON events (community_id, created_at DESC, id);
CREATE INDEX events_by_kind ON events (community_id, kind, created_at DESC);
CREATE INDEX events_by_author ON events (community_id, pubkey, created_at DESC);
CREATE INDEX events_by_channel ON events (community_id, channel_id, created_at DESC, id)
    WHERE channel_id IS NOT NULL;

-- Tag index: every tag with a name and a first value, any name length.
CREATE TABLE event_tags (
    event_seq BIGINT NOT NULL REFERENCES events(seq) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    community_id BIGINT NOT NULL,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (event_seq, position)
);
CREATE INDEX event_tags_lookup ON event_tags (community_id, name, value, event_seq);

CREATE TABLE channels (
    community_id BIGINT NOT NULL REFERENCES communities(id),
    id TEXT NOT NULL,
    name TEXT NOT NULL,
    about TEXT NOT NULL DEFAULT '',
    private BOOLEAN NOT NULL DEFAULT FALSE,
    channel_type TEXT NOT NULL DEFAULT 'stream',
    archived BOOLEAN NOT NULL DEFAULT FALSE,
    ttl_seconds BIGINT,
    created_by TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT,                    -- created_at + ttl for TTL channels
    deleted_at BIGINT,
    PRIMARY KEY (community_id, id)
);

CREATE TABLE channel_members (
    community_id BIGINT NOT NULL,
    channel_id TEXT NOT NULL,
    pubkey TEXT NOT NULL,
    role TEXT NOT NULL,
    added_at BIGINT NOT NULL,
    PRIMARY KEY (community_id, channel_id, pubkey),
    FOREIGN KEY (community_id, channel_id) REFERENCES channels(community_id, id)
);

-- Thread position of conversation events, computed at ingest in the event's transaction.
-- No row = stored before metadata existed (treated as top-level by windows).
CREATE TABLE thread_metadata (
    community_id BIGINT NOT NULL,
    event_id TEXT NOT NULL,
    channel_id TEXT NOT NULL,
    pubkey TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    parent_id TEXT,
    root_id TEXT,
    depth INTEGER NOT NULL,
    broadcast BOOLEAN NOT NULL DEFAULT FALSE,
    path TEXT NOT NULL,                   -- '/' || ancestor ids root-first || '/', '/' for depth 0
    deleted BOOLEAN NOT NULL DEFAULT FALSE,
    reply_count BIGINT NOT NULL DEFAULT 0,
    descendant_count BIGINT NOT NULL DEFAULT 0,
    last_reply_at BIGINT,
    PRIMARY KEY (community_id, event_id)
);
CREATE INDEX thread_metadata_by_root ON thread_metadata (community_id, root_id, created_at DESC, event_id);

-- Community membership for closed communities (open = false).
CREATE TABLE community_members (
    community_id BIGINT NOT NULL REFERENCES communities(id),
    pubkey TEXT NOT NULL,
    added_by TEXT NOT NULL,
    added_at BIGINT NOT NULL,
    PRIMARY KEY (community_id, pubkey)
);

-- Bans and timeouts per community (kinds 9042-9044).
CREATE TABLE community_sanctions (
    community_id BIGINT NOT NULL REFERENCES communities(id),
    pubkey TEXT NOT NULL,
    sanction TEXT NOT NULL,               -- 'ban' or 'timeout'
    until_at BIGINT,                      -- timeouts: end, unix seconds; bans: NULL
    reason TEXT NOT NULL DEFAULT '',
    created_by TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (community_id, pubkey, sanction)
);
