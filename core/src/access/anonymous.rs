//! What a reader who has not authenticated may ask for (NIP-42).
//!
//! Channel data is for authenticated readers only. An anonymous reader's filter is
//! answered from what it may read — the community-wide rows: channel rows are outside an
//! anonymous scope — and when the filter could *also* match channel data, the answer ends
//! with `CLOSED "auth-required: …"` instead of `EOSE` (NIP-01: CLOSED ends the
//! subscription, so nothing stays live). Generic clients get their public events;
//! clients that authenticate lazily (when a relay asks) learn that there is more, and ask
//! again after AUTH, instead of taking the public part for everything. Refusing the whole
//! filter broke generic clients (a REQ for kinds 1 and 7 got no notes because 7 may be a
//! channel reaction); an EOSE would hide the channels from lazy ones.
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
//!   is stored nowhere both end the answer with the same `auth-required:`.
//!
//! Any other filter (kind 0, kind 1, `authors` alone, `#t`, ...) is whole with the
//! community-wide rows: events of public kinds that carry an `h` tag are channel data and
//! are left out.
//!
//! A NIP-45 COUNT cannot carry a partial number and a CLOSED, so a count (and a NIP-77
//! reconciliation, and a plugin's own check) of a filter that could match channel data is
//! refused `auth-required:` whole ([`AccessService::check_filter`]).
//!
//! In a community that is not open, nothing is readable anonymously: every filter is
//! refused `auth-required:` before anything is read.

use super::AccessService;
use crate::ctx::ConnCtx;
use crate::error::Reason;
use crate::store::Conn;
use buzz_nostr::channel_tags::is_lowercase_uuid;
use buzz_nostr::filter::Filter;
use buzz_nostr::kinds::{requires_channel, GROUP_STATE};

/// The one refusal text, whatever the filter named.
const AUTH_FIRST: &str =
    "channel data needs NIP-42 authentication: answer the AUTH challenge, then ask again";

/// The refusal, or the end of a partial answer, for channel data before AUTH.
pub fn auth_first() -> Reason {
    Reason::AuthRequired(AUTH_FIRST.into())
}

/// How much of what a filter could match its reader may read.
pub enum Readable {
    /// All of it: the reader is authenticated (its scope decides), or the filter cannot
    /// match channel data.
    All,
    /// The community-wide part only: the filter could match channel data too, so the
    /// answer ends with [`auth_first`].
    Public,
    /// Decided by stored rows (an anonymous ids lookup): [`StoredCheck::whole`].
    Decided(StoredCheck),
}

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

    /// May `ctx` read everything this filter could match (a COUNT, a NIP-77
    /// reconciliation, a plugin's own read)? Authenticated callers always may; what they
    /// then see is their scope. Unauthenticated ones only when the filter cannot match
    /// channel data (module docs), else `auth-required:`.
    pub async fn check_filter(&self, ctx: &ConnCtx, filter: &Filter) -> Result<(), Reason> {
        match self.readable(ctx, filter)? {
            Readable::All => Ok(()),
            Readable::Public => Err(auth_first()),
            Readable::Decided(check) => {
                let whole = self
                    .store
                    .read(move |mut conn| check.whole(&mut conn))
                    .await?;
                if whole {
                    Ok(())
                } else {
                    Err(auth_first())
                }
            }
        }
    }

    /// How much of what `filter` could match `ctx` may read, as far as the filter's shape
    /// decides it; the part that needs stored rows (an anonymous ids lookup) comes back
    /// as a [`StoredCheck`] for the caller to run on the connection it reads with — the
    /// query service runs it in the same trip to the store as the query itself. `Err`
    /// when nothing may be read (a community that is not open, before AUTH).
    pub fn readable(&self, ctx: &ConnCtx, filter: &Filter) -> Result<Readable, Reason> {
        if ctx.is_authenticated() {
            return Ok(Readable::All);
        }
        if !ctx.community.open {
            return Err(auth_first());
        }
        if self.may_match_channel_data(filter) {
            return Ok(Readable::Public);
        }
        if filter.kinds.is_some() {
            // Judged by its kinds alone.
            return Ok(Readable::All);
        }
        // No kinds, channels or channel `#d`: its ids decide, if it names any.
        Ok(match filter.ids.clone().filter(|ids| !ids.is_empty()) {
            Some(ids) => Readable::Decided(StoredCheck {
                community_id: ctx.community_id(),
                ids,
            }),
            None => Readable::All,
        })
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

/// The rest of an anonymous reader's check of an ids lookup: it is whole when every id
/// is a stored community-wide event (module docs), else it could name channel events.
pub struct StoredCheck {
    community_id: i64,
    ids: Vec<String>,
}

impl StoredCheck {
    /// Are all of `checks` whole (run on the connection the query reads with)?
    pub fn all_whole(checks: &[StoredCheck], conn: &mut Conn<'_>) -> Result<bool, Reason> {
        for check in checks {
            if !check.whole(conn)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Does every id name a stored community-wide event?
    pub fn whole(&self, conn: &mut Conn<'_>) -> Result<bool, Reason> {
        crate::store::all_community_wide(conn, self.community_id, &self.ids)
    }
}
