//! Diesel table definitions, identical for SQLite and PostgreSQL (see `migrations/`).

diesel::table! {
    communities (id) {
        id -> BigInt,
        host -> Text,
        name -> Text,
    }
}

diesel::table! {
    events (seq) {
        seq -> BigInt,
        community_id -> BigInt,
        id -> Text,
        pubkey -> Text,
        created_at -> BigInt,
        kind -> Integer,
        tags -> Text,
        content -> Text,
        sig -> Text,
        received_at -> BigInt,
        channel_id -> Nullable<Text>,
        deleted_at -> Nullable<BigInt>,
        d_tag -> Nullable<Text>,
        replace_key -> Nullable<Text>,
        expires_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    event_tags (event_seq, position) {
        event_seq -> BigInt,
        position -> Integer,
        community_id -> BigInt,
        name -> Text,
        value -> Text,
        created_at -> BigInt,
    }
}

diesel::table! {
    channels (community_id, id) {
        community_id -> BigInt,
        id -> Text,
        name -> Text,
        about -> Text,
        private -> Bool,
        channel_type -> Text,
        archived -> Bool,
        ttl_seconds -> Nullable<BigInt>,
        created_by -> Text,
        created_at -> BigInt,
        expires_at -> Nullable<BigInt>,
        deleted_at -> Nullable<BigInt>,
        last_timeline_received_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    channel_members (community_id, channel_id, pubkey) {
        community_id -> BigInt,
        channel_id -> Text,
        pubkey -> Text,
        role -> Text,
        added_at -> BigInt,
    }
}

diesel::table! {
    thread_metadata (community_id, event_id) {
        community_id -> BigInt,
        event_id -> Text,
        channel_id -> Text,
        pubkey -> Text,
        created_at -> BigInt,
        parent_id -> Nullable<Text>,
        root_id -> Nullable<Text>,
        depth -> Integer,
        broadcast -> Bool,
        path -> Text,
        deleted -> Bool,
        reply_count -> BigInt,
        descendant_count -> BigInt,
        last_reply_at -> Nullable<BigInt>,
        last_reply_received_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    community_members (community_id, pubkey) {
        community_id -> BigInt,
        pubkey -> Text,
        added_by -> Text,
        added_at -> BigInt,
    }
}

diesel::table! {
    community_sanctions (community_id, pubkey, sanction) {
        community_id -> BigInt,
        pubkey -> Text,
        sanction -> Text,
        until_at -> Nullable<BigInt>,
        reason -> Text,
        created_by -> Text,
        created_at -> BigInt,
    }
}

diesel::table! {
    relay_identity (id) {
        id -> Integer,
        pubkey -> Text,
    }
}

diesel::joinable!(event_tags -> events (event_seq));
diesel::allow_tables_to_appear_in_same_query!(
    communities,
    events,
    event_tags,
    channels,
    channel_members,
    thread_metadata,
    community_members,
    community_sanctions,
    relay_identity
);
