//! The built-in configuration: every key's default (`config.example.toml` documents
//! the same values; a test keeps the two equal), and the one open `localhost` community
//! a relay without `[[communities]]` serves.

pub(super) const DEFAULTS: &str = r#"
[server]
bind = "127.0.0.1:7777"
public_scheme = "http"
workers = 0
shutdown_timeout_secs = 10

[storage]
database_url = "sqlite://./data/buzz.db"
redis_url = ""
auto_migrate = true
pool_size = 8
redis_prefix = "buzz"
redis_timeout_ms = 2000
statement_timeout_ms = 8000
lock_timeout_ms = 2000
read_timeout_ms = 8000
slow_read_ms = 100
expired_purge_interval_secs = 60
expired_purge_batch = 1000

[relay]
data_dir = "./data"
private_key = ""
name = "Buzz relay"
description = "Team chat over Nostr: communities, channels, threads."
contact = ""

[policies]
enabled = true
access = "policies/access.lua"
moderation = "policies/moderation.lua"
instruction_budget = 1000000
memory_bytes = 8388608
call_timeout_ms = 50
load_timeout_ms = 1000
reload_poll_ms = 1000

[limits]
max_message_bytes = 524288
max_content_bytes = 262144
max_event_tags = 2000
max_tag_values = 10000
max_clock_skew_secs = 900
max_subscriptions = 64
max_filters = 16
max_limit = 500
max_outbound_queue = 1024
max_outbound_bytes = 4194304
max_outbound_bytes_total = 268435456
outbound_stall_secs = 30
max_inflight_events = 64
refusals_per_sec = 20
max_filter_values = 2000
max_query_values = 4000
max_filter_bytes = 1048576
max_pending_body_bytes = 67108864
body_timeout_secs = 10
max_reads_per_client = 4
max_count = 10000
max_expiring_bytes_per_pubkey = 33554432

[metrics]
enabled = true
bind = "127.0.0.1:7778"
processes = []

[log]
format = "text"
level = "info,actix_server=warn"
"#;

pub(super) const DEFAULT_COMMUNITY: &str = r#"
[[communities]]
host = "localhost"
name = "Local"
owners = []
open = true
"#;
