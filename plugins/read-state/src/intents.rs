//! `POST /buzz/v1/me/read-state`: 1–100 fixed-operand intents, each committed on its own
//! and answered with its own outcome, in request order:
//! `{"status":"applied"}`, `{"status":"blocked","reason":…}`,
//! `{"status":"invalid","reason":…}`, or — storage failed or the shared deadline passed,
//! so whether it committed is not known — `{"status":"unknown","retryable":true}` (and
//! every later intent too). Earlier committed outcomes stand.
//!
//! Marks read everything displayed at or before a fixed anchor in its scope: the
//! position becomes the last arrival among those messages (`scope::last_arrival_through`)
//! and never moves back. `mark_channel_read` is the one whole-channel cut (timeline and
//! every thread); thread marks and channel `mark_through` never set it. Marking a thread
//! you do not follow changes nothing (blocked `not_following`).

use crate::frontiers::{self, Key, Upsert, TIMELINE};
use crate::http::{self, check_url};
use crate::ingest::is_hex64;
use crate::plugin::ReadState;
use crate::scope::{self, Scope};
use crate::tips::Tip;
use crate::{MAX_BODY_BYTES, MAX_INTENTS, MAX_URL_BYTES};
use buzz_core::error::Reason;
use buzz_core::plugin::{PluginRequest, PluginResponse, RouteHandler};
use buzz_core::store::Conn;
use buzz_nostr::channel_tags::is_lowercase_uuid;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) struct Intents(pub(crate) Arc<ReadState>);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    intents: Vec<Intent>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum Intent {
    MarkThrough {
        target: Target,
        message_id: String,
    },
    MarkChannelRead {
        channel_id: String,
        message_id: String,
    },
    Follow {
        target: Target,
    },
    Unfollow {
        target: Target,
    },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Target {
    channel_id: String,
    #[serde(default)]
    root_id: Option<String>,
}

/// One intent's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Applied,
    Blocked(&'static str),
    Invalid(&'static str),
    Unknown,
}

impl Outcome {
    fn to_json(&self) -> Value {
        match self {
            Outcome::Applied => json!({ "status": "applied" }),
            Outcome::Blocked(reason) => json!({ "status": "blocked", "reason": reason }),
            Outcome::Invalid(reason) => json!({ "status": "invalid", "reason": reason }),
            Outcome::Unknown => json!({ "status": "unknown", "retryable": true }),
        }
    }
}

/// An intent whose operands are well-formed.
#[derive(Debug, Clone)]
enum Checked {
    Mark {
        channel: String,
        root: Option<String>,
        anchor: String,
    },
    Cut {
        channel: String,
        anchor: String,
    },
    Follow {
        channel: String,
        root: String,
        follow: bool,
    },
}

impl Checked {
    fn channel(&self) -> &str {
        match self {
            Checked::Mark { channel, .. }
            | Checked::Cut { channel, .. }
            | Checked::Follow { channel, .. } => channel,
        }
    }
}

fn check(intent: Intent) -> Result<Checked, &'static str> {
    let channel = |id: String| {
        if is_lowercase_uuid(&id) {
            Ok(id)
        } else {
            Err("channel_id must be a lowercase UUID")
        }
    };
    let event = |id: String, what: &'static str| if is_hex64(&id) { Ok(id) } else { Err(what) };
    match intent {
        Intent::MarkThrough { target, message_id } => Ok(Checked::Mark {
            channel: channel(target.channel_id)?,
            root: target
                .root_id
                .map(|r| event(r, "root_id must be 64 lowercase hex"))
                .transpose()?,
            anchor: event(message_id, "message_id must be 64 lowercase hex")?,
        }),
        Intent::MarkChannelRead {
            channel_id,
            message_id,
        } => Ok(Checked::Cut {
            channel: channel(channel_id)?,
            anchor: event(message_id, "message_id must be 64 lowercase hex")?,
        }),
        Intent::Follow { target } | Intent::Unfollow { target } if target.root_id.is_none() => {
            Err("follow and unfollow need a thread target (root_id)")
        }
        Intent::Follow { target } => Ok(Checked::Follow {
            channel: channel(target.channel_id)?,
            root: event(
                target.root_id.unwrap_or_default(),
                "root_id must be 64 lowercase hex",
            )?,
            follow: true,
        }),
        Intent::Unfollow { target } => Ok(Checked::Follow {
            channel: channel(target.channel_id)?,
            root: event(
                target.root_id.unwrap_or_default(),
                "root_id must be 64 lowercase hex",
            )?,
            follow: false,
        }),
    }
}

#[async_trait::async_trait]
impl RouteHandler for Intents {
    async fn handle(&self, request: PluginRequest) -> Result<PluginResponse, Reason> {
        check_url(&request, MAX_URL_BYTES)?;
        if !request.query.is_empty() {
            return Err(Reason::invalid("this request takes no query parameters"));
        }
        if request.body.len() > MAX_BODY_BYTES {
            return Err(Reason::TooLarge(format!(
                "body exceeds {MAX_BODY_BYTES} bytes"
            )));
        }
        let body: Body = serde_json::from_slice(&request.body)
            .map_err(|e| Reason::invalid(format!("request body: {e}")))?;
        if body.intents.is_empty() || body.intents.len() > MAX_INTENTS {
            return Err(Reason::invalid(format!(
                "intents must hold 1 to {MAX_INTENTS} entries"
            )));
        }
        let rs = &self.0;
        let me = rs.admit(&request.ctx).await?;
        // The deadline starts after admission and is shared by every intent.
        let deadline = Instant::now() + Duration::from_millis(rs.config.intent_deadline_ms);
        let mut outcomes = Vec::with_capacity(body.intents.len());
        let mut settled = true;
        for intent in body.intents {
            if !settled {
                outcomes.push(Outcome::Unknown);
                continue;
            }
            let checked = match check(intent) {
                Ok(checked) => checked,
                Err(reason) => {
                    outcomes.push(Outcome::Invalid(reason));
                    continue;
                }
            };
            let left = deadline.saturating_duration_since(Instant::now());
            let outcome =
                match tokio::time::timeout(left, apply(rs, &request, &me, checked, deadline)).await
                {
                    Ok(Ok(outcome)) => outcome,
                    Ok(Err(reason)) => {
                        tracing::warn!(error = %reason, "read-state intent failed");
                        Outcome::Unknown
                    }
                    Err(_) => Outcome::Unknown,
                };
            // After an ambiguous failure nothing later is attempted: its order relative
            // to the unknown one could not be promised.
            settled = outcome != Outcome::Unknown;
            outcomes.push(outcome);
        }
        http::ok(
            &json!({
                "results": outcomes.iter().map(Outcome::to_json).collect::<Vec<_>>(),
                "projection_status": "not_requested",
            }),
            rs.config.max_response_bytes,
        )
    }

    fn error_response(&self, reason: &Reason) -> PluginResponse {
        http::error(reason)
    }
}

async fn apply(
    rs: &ReadState,
    request: &PluginRequest,
    me: &str,
    intent: Checked,
    deadline: Instant,
) -> Result<Outcome, Reason> {
    let channel = intent.channel().to_owned();
    if rs.readable(&request.ctx, vec![channel]).await?.is_empty() {
        // Missing and forbidden channels answer alike.
        return Ok(Outcome::Blocked("unavailable"));
    }
    let cid = request.ctx.community_id();
    let me = me.to_owned();
    let now = rs.now_micros();
    let skew = rs.skew;
    // The shared deadline reaches into the database: an intent whose job waited past it
    // in the writer's queue does not run, and each statement is bounded by the time
    // left when the job began (PostgreSQL cancels it), so a stalled intent frees the
    // writer instead of holding it after the request answered "unknown".
    let cap = rs.services.settings.storage.statement_timeout_ms;
    // Read state is the plugin's own rows: sets kept by readers stay valid.
    rs.services
        .store
        .write_own_rows(move |conn| {
            conn.before_deadline(deadline, cap, "read-state intent", |conn| {
                write(conn, cid, &me, now, skew, &intent)
            })
        })
        .await
}

/// One intent's transaction.
fn write(
    conn: &mut Conn<'_>,
    cid: i64,
    me: &str,
    now: i64,
    skew: scope::Skew,
    intent: &Checked,
) -> Result<Outcome, Reason> {
    let key = |channel_id, root_id| Key {
        community_id: cid,
        pubkey: me,
        channel_id,
        root_id,
    };
    match intent {
        Checked::Mark {
            channel,
            root: None,
            anchor,
        } => {
            let Some(msg) = scope::message(conn, cid, anchor)? else {
                return Ok(Outcome::Blocked("unavailable"));
            };
            if msg.channel_id != *channel || !msg.in_timeline() {
                return Ok(Outcome::Blocked("unavailable"));
            }
            frontiers::ensure_account(conn, cid, me, now)?;
            let scope = Scope::Timeline { channel };
            let position = scope::last_arrival_through(conn, cid, scope, &msg, skew)?;
            frontiers::upsert(
                conn,
                key(channel, TIMELINE),
                position,
                0,
                Upsert::Advance,
                Tip::default(),
            )?;
            Ok(Outcome::Applied)
        }
        Checked::Mark {
            channel,
            root: Some(root),
            anchor,
        } => {
            let Some(msg) = scope::message(conn, cid, anchor)? else {
                return Ok(Outcome::Blocked("unavailable"));
            };
            if msg.channel_id != *channel || !(msg.in_thread(root) || msg.id == *root) {
                return Ok(Outcome::Blocked("unavailable"));
            }
            let following = frontiers::load(conn, key(channel, root))?.is_some_and(|f| f.following);
            if !following {
                return Ok(Outcome::Blocked("not_following"));
            }
            frontiers::ensure_account(conn, cid, me, now)?;
            let scope = Scope::Thread { channel, root };
            let position = scope::last_arrival_through(conn, cid, scope, &msg, skew)?;
            frontiers::upsert(
                conn,
                key(channel, root),
                position,
                0,
                Upsert::Advance,
                Tip::default(),
            )?;
            Ok(Outcome::Applied)
        }
        Checked::Cut { channel, anchor } => {
            let Some(msg) = scope::message(conn, cid, anchor)? else {
                return Ok(Outcome::Blocked("unavailable"));
            };
            if msg.channel_id != *channel {
                return Ok(Outcome::Blocked("unavailable"));
            }
            frontiers::ensure_account(conn, cid, me, now)?;
            let scope = Scope::Channel { channel };
            let cut = scope::last_arrival_through(conn, cid, scope, &msg, skew)?;
            frontiers::upsert(
                conn,
                key(channel, TIMELINE),
                0,
                cut,
                Upsert::Advance,
                Tip::default(),
            )?;
            // Into the thread positions too: threads the cut reads leave the sidebar's
            // walk (the reads are the same either way).
            frontiers::raise_threads(conn, cid, me, Some(channel), cut)?;
            Ok(Outcome::Applied)
        }
        Checked::Follow {
            channel,
            root,
            follow,
        } => {
            let Some(msg) = scope::message(conn, cid, root)? else {
                return Ok(Outcome::Blocked("unavailable"));
            };
            if msg.channel_id != *channel || msg.depth != 0 {
                return Ok(Outcome::Blocked("unavailable"));
            }
            frontiers::ensure_account(conn, cid, me, now)?;
            if *follow {
                // Following starts caught up at the thread's last reply.
                let position = scope::thread_last_arrival(conn, cid, &msg)?;
                frontiers::upsert(
                    conn,
                    key(channel, root),
                    position,
                    0,
                    Upsert::AdvanceAndFollow,
                    Tip::after_reply(&msg),
                )?;
            } else {
                frontiers::upsert(
                    conn,
                    key(channel, root),
                    0,
                    0,
                    Upsert::Unfollow,
                    Tip::default(),
                )?;
            }
            Ok(Outcome::Applied)
        }
    }
}
