//! What a reader who has not authenticated may ask for (NIP-42).
//!
//! Channel data is for authenticated readers only. A filter that could match it is
//! refused with `auth-required:` before anything is read — not served with the channel
//! rows left out — because clients that authenticate lazily (when a relay asks) would
//! otherwise take an empty answer for "no channels here" and never ask again.
//!
//! "Could match" is judged from the filter's shape, never from what is stored, so the
//! answer cannot tell a private channel from one that does not exist:
//! - it names channels (`#h`);
//! - it names a channel kind: messages, reactions, edits, channel administration, the
//!   relay's group state (39000–39002) and every kind a built plugin declares
//!   channel-scoped (its reserved kinds and its `CHANNEL_KINDS`);
//! - it names no kinds but a `#d` that is channel-id shaped (a lowercase UUID: the `d` of
//!   group state);
//! - it names no kinds but ids, and not every one of them is a stored community-wide
//!   event. That lookup says nothing about channels: a channel event's id and an id that
//!   is stored nowhere both get `auth-required:`.
//!
//! Any other filter (kind 0, kind 1, `authors` alone, `#t`, ...) is served from the
//! community-wide rows: events of public kinds that carry an `h` tag are channel data
//! and are left out.
//!
//! In a community that is not open, nothing is readable anonymously.

use super::AccessService;
use crate::channels::validate::is_lowercase_uuid;
use crate::ctx::ConnCtx;
use crate::error::Reason;
use crate::store::Conn;
use buzz_nostr::filter::Filter;
use buzz_nostr::kinds::{requires_channel, GROUP_STATE};

/// The one refusal text, whatever the filter named.
const AUTH_FIRST: &str =
    "channel data needs NIP-42 authentication: answer the AUTH challenge, then ask again";

impl AccessService {
    /// Kinds the built plugins declare channel-scoped; set once, when the relay starts.
    pub fn declare_plugin_channel_kinds(&self, kinds: Vec<u32>) {
        // Set once at start; a second call (never made) would keep the first list.
        let _ = self.plugin_channel_kinds.set(kinds);
    }

    /// Is `kind` always scoped to a channel?
    pub fn is_channel_kind(&self, kind: u32) -> bool {
        requires_channel(kind)
            || GROUP_STATE.contains(&kind)
            || self
                .plugin_channel_kinds
                .get()
                .is_some_and(|kinds| kinds.contains(&kind))
    }

    /// May `ctx` run this filter at all (REQ, COUNT, `POST /query`, and any plugin verb
    /// reading through the query service)? Authenticated callers always may; what they
    /// then see is their scope. Unauthenticated ones only when the filter cannot match
    /// channel data (module docs).
    pub async fn check_filter(&self, ctx: &ConnCtx, filter: &Filter) -> Result<(), Reason> {
        match self.check_filter_shape(ctx, filter)? {
            None => Ok(()),
            Some(check) => self.store.read(move |mut conn| check.run(&mut conn)).await,
        }
    }

    /// [`Self::check_filter`] as far as the filter's shape decides it; the part that
    /// needs stored rows (an anonymous ids lookup) comes back as a [`StoredCheck`] for
    /// the caller to run on the connection it reads with — the query service runs it in
    /// the same trip to the store as the query itself, before anything is read.
    pub fn check_filter_shape(
        &self,
        ctx: &ConnCtx,
        filter: &Filter,
    ) -> Result<Option<StoredCheck>, Reason> {
        if ctx.is_authenticated() {
            return Ok(None);
        }
        if !ctx.community.open || self.may_match_channel_data(filter) {
            return Err(Reason::AuthRequired(AUTH_FIRST.into()));
        }
        if filter.kinds.is_some() {
            // Judged by its kinds alone.
            return Ok(None);
        }
        // No kinds, channels or channel `#d`: its ids decide, if it names any.
        Ok(filter
            .ids
            .clone()
            .filter(|ids| !ids.is_empty())
            .map(|ids| StoredCheck {
                community_id: ctx.community_id(),
                ids,
            }))
    }

    /// Could the filter match channel data, judged from its shape alone (an ids lookup
    /// is judged by [`StoredCheck`])?
    fn may_match_channel_data(&self, filter: &Filter) -> bool {
        if filter.channels().is_some() {
            return true;
        }
        if let Some(kinds) = &filter.kinds {
            return kinds.iter().any(|k| self.is_channel_kind(*k));
        }
        filter
            .tags
            .get("d")
            .is_some_and(|values| values.iter().any(|v| is_lowercase_uuid(v)))
    }
}

/// The rest of an anonymous reader's check of an ids lookup: every id must be a stored
/// community-wide event (module docs), else `auth-required:`.
pub struct StoredCheck {
    community_id: i64,
    ids: Vec<String>,
}

impl StoredCheck {
    /// Run every check of a query on the connection it is about to read with.
    pub fn run_all(checks: &[StoredCheck], conn: &mut Conn<'_>) -> Result<(), Reason> {
        checks.iter().try_for_each(|check| check.run(conn))
    }

    pub fn run(&self, conn: &mut Conn<'_>) -> Result<(), Reason> {
        if crate::store::all_community_wide(conn, self.community_id, &self.ids)? {
            Ok(())
        } else {
            Err(Reason::AuthRequired(AUTH_FIRST.into()))
        }
    }
}
