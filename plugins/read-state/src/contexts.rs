//! `GET /buzz/v1/me/read-state?targets=<URL-encoded JSON array>`: the read status of up
//! to 20 explicit contexts and 100 message selectors, all from one snapshot. Not event
//! history, and not an export of positions: the answer names statuses only.
//!
//! Context status: `available` (with `messages`) or `unavailable` (missing, forbidden
//! or a root that is not a thread root of the channel — alike). Message status, decided
//! in this order: ancestry and context (`unavailable` when missing, elsewhere or
//! forbidden); eligibility (`not_counted` for your own, deleted, or arrived before your
//! account started — and everything before your first intent); the frontier (`read`,
//! no membership lookup); then the reason it is `unread`: `timeline` (a top-level
//! message), `broadcast` (a broadcast reply in the timeline), `mention`, or
//! `conversation` (a reply in a thread you follow). A thread reply with no reason is
//! `not_counted`: the follow table decides membership of your conversations exactly, so
//! it is never undecided here.

use crate::frontiers::{self, Key, TIMELINE};
use crate::http::{self, check_url, query_pairs};
use crate::ingest::is_hex64;
use crate::plugin::{snapshot, ReadState};
use crate::scope::{self, Message};
use crate::sql::{first, OptI64, Val};
use crate::{MAX_CONTEXTS, MAX_CONTEXT_MESSAGES, MAX_URL_BYTES};
use buzz_core::error::Reason;
use buzz_core::plugin::{PluginRequest, PluginResponse, RouteHandler};
use buzz_core::store::Conn;
use buzz_nostr::channel_tags::is_lowercase_uuid;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

pub(crate) struct Contexts(pub(crate) Arc<ReadState>);

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    target: Target,
    #[serde(default)]
    message_ids: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Target {
    channel_id: String,
    #[serde(default)]
    root_id: Option<String>,
}

fn parse(query: &str) -> Result<Vec<Entry>, Reason> {
    let pairs = query_pairs(query, &["targets"])?;
    let Some((_, raw)) = pairs.first() else {
        return Err(Reason::invalid("targets is required"));
    };
    let entries: Vec<Entry> =
        serde_json::from_str(raw).map_err(|e| Reason::invalid(format!("targets: {e}")))?;
    if entries.is_empty() || entries.len() > MAX_CONTEXTS {
        return Err(Reason::invalid(format!(
            "targets must hold 1 to {MAX_CONTEXTS} contexts"
        )));
    }
    let selectors: usize = entries.iter().map(|e| e.message_ids.len()).sum();
    if selectors > MAX_CONTEXT_MESSAGES {
        return Err(Reason::invalid(format!(
            "at most {MAX_CONTEXT_MESSAGES} message_ids in all"
        )));
    }
    for entry in &entries {
        if !is_lowercase_uuid(&entry.target.channel_id) {
            return Err(Reason::invalid("channel_id must be a lowercase UUID"));
        }
        let ids = entry.target.root_id.iter().chain(entry.message_ids.iter());
        if ids.into_iter().any(|id| !is_hex64(id)) {
            return Err(Reason::invalid(
                "root_id and message_ids must be 64 lowercase hex",
            ));
        }
    }
    Ok(entries)
}

#[async_trait::async_trait]
impl RouteHandler for Contexts {
    async fn handle(&self, request: PluginRequest) -> Result<PluginResponse, Reason> {
        check_url(&request, MAX_URL_BYTES)?;
        let entries = parse(&request.query)?;
        let rs = &self.0;
        let me = rs.admit(&request.ctx).await?;
        let mut channels: Vec<String> = entries
            .iter()
            .map(|e| e.target.channel_id.clone())
            .collect();
        channels.sort();
        channels.dedup();
        let readable = rs.readable(&request.ctx, channels).await?;
        let cid = request.ctx.community_id();
        let now = rs.now_micros();
        let (started, contexts) = rs
            .services
            .store
            .read(move |mut conn| {
                snapshot(&mut conn, |conn| {
                    let started = frontiers::started_at(conn, cid, &me)?;
                    let floor = started.unwrap_or(now);
                    let contexts = entries
                        .iter()
                        .map(|entry| {
                            let open = readable.contains(&entry.target.channel_id);
                            context(conn, cid, &me, floor, open, entry)
                        })
                        .collect::<Result<Vec<_>, Reason>>()?;
                    Ok((started.is_some(), contexts))
                })
            })
            .await?;
        http::ok(
            &json!({ "account": { "started": started }, "contexts": contexts }),
            rs.config.max_response_bytes,
        )
    }

    fn error_response(&self, reason: &Reason) -> PluginResponse {
        http::error(reason)
    }
}

fn unavailable() -> Value {
    json!({ "status": "unavailable" })
}

fn context(
    conn: &mut Conn<'_>,
    cid: i64,
    me: &str,
    floor: i64,
    open: bool,
    entry: &Entry,
) -> Result<Value, Reason> {
    if !open {
        return Ok(unavailable());
    }
    let channel = entry.target.channel_id.as_str();
    let root = entry.target.root_id.as_deref();
    if let Some(root) = root {
        let is_root = scope::message(conn, cid, root)?
            .is_some_and(|m| m.channel_id == channel && m.depth == 0);
        if !is_root {
            return Ok(unavailable());
        }
    }
    let key = |root_id| Key {
        community_id: cid,
        pubkey: me,
        channel_id: channel,
        root_id,
    };
    let timeline = frontiers::load(conn, key(TIMELINE))?;
    let cut = timeline.map_or(0, |f| f.cut);
    // A thread's frontier includes the whole-channel cut.
    let (position, following) = match root {
        None => (timeline.map_or(0, |f| f.position), true),
        Some(root) => {
            frontiers::load(conn, key(root))?.map_or((0, false), |f| (f.position, f.following))
        }
    };
    let frontier = position.max(cut).max(floor);
    let messages = entry
        .message_ids
        .iter()
        .map(|id| {
            let msg = scope::message(conn, cid, id)?;
            let status = status(
                conn, cid, me, channel, root, floor, frontier, following, msg,
            )?;
            let mut out = json!({ "message_id": id });
            if let (Some(map), Value::Object(fields)) = (out.as_object_mut(), status) {
                map.extend(fields);
            }
            Ok(out)
        })
        .collect::<Result<Vec<_>, Reason>>()?;
    Ok(json!({ "status": "available", "messages": messages }))
}

#[allow(clippy::too_many_arguments)]
fn status(
    conn: &mut Conn<'_>,
    cid: i64,
    me: &str,
    channel: &str,
    root: Option<&str>,
    floor: i64,
    frontier: i64,
    following: bool,
    msg: Option<Message>,
) -> Result<Value, Reason> {
    // 1. Ancestry and context.
    let Some(msg) = msg else {
        return Ok(json!({ "status": "unavailable" }));
    };
    let in_context = msg.channel_id == channel
        && match root {
            None => msg.in_timeline(),
            Some(root) => msg.in_thread(root),
        };
    if !in_context {
        return Ok(json!({ "status": "unavailable" }));
    }
    // 2. Eligibility.
    if msg.pubkey == me || msg.deleted_at.is_some() || msg.received_at <= floor {
        return Ok(json!({ "status": "not_counted" }));
    }
    // 3. The frontier.
    if msg.received_at <= frontier {
        return Ok(json!({ "status": "read" }));
    }
    // 4. Why it is unread.
    let reason = match root {
        None if msg.depth == 0 => Some("timeline"),
        None => Some("broadcast"),
        Some(root) if mentions(conn, cid, me, channel, root, &msg.id)? => Some("mention"),
        Some(_) if following => Some("conversation"),
        Some(_) => None,
    };
    Ok(match reason {
        Some(reason) => json!({ "status": "unread", "reason": reason }),
        None => json!({ "status": "not_counted" }),
    })
}

/// Does `event_id` mention the signer in the thread `root`?
fn mentions(
    conn: &mut Conn<'_>,
    cid: i64,
    me: &str,
    channel: &str,
    root: &str,
    event_id: &str,
) -> Result<bool, Reason> {
    let found: Option<OptI64> = first(
        conn,
        "SELECT received_at AS v FROM read_state_mentions WHERE community_id = ? \
         AND event_id = ? AND pubkey = ? AND channel_id = ? AND root_id = ?",
        &[
            Val::I(cid),
            Val::T(event_id),
            Val::T(me),
            Val::T(channel),
            Val::T(root),
        ],
    )?;
    Ok(found.is_some())
}
