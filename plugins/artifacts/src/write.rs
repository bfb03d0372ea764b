//! Checks of a revision before its transaction ("Identity and edits", "Moving and
//! deleting"): everything that depends only on the revision its `prev` names (immutable
//! once accepted). The transaction then re-checks that `prev` is still current with the
//! compare-and-swap (`heads::advance`), so a check here can never be outdated there.
//!
//! Only a sender who reads the home of the current revision gets the precise refusals
//! (type, h, op, root, write in a move's source); anyone else gets the conflict a `prev`
//! that does not exist gets, decided before any comparison (`tests/unreadable_prev.rs`).

use crate::envelope::{Envelope, Op};
use crate::heads::{self, IDENTITY_TAKEN, NOT_CURRENT};
use crate::Artifacts;
use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use buzz_core::store::schema::events;
use buzz_core::with_conn;
use buzz_nostr::event::Event;
use buzz_nostr::kinds::is_conversation;
use diesel::prelude::*;

impl Artifacts {
    /// Everything about `event` (a checked envelope `env`) that can be decided before
    /// its transaction. Write permission in `h` was decided by the access service already
    /// (as for a kind-9 message there); a move also needs it in the source.
    pub(crate) async fn check_revision(
        &self,
        ctx: &ConnCtx,
        event: &Event,
        env: &Envelope,
    ) -> Result<(), Reason> {
        let community = ctx.community_id();
        let d = env.d.clone();
        let head = self
            .store
            .read(move |mut conn| heads::head(&mut conn, community, &d))
            .await?;
        if env.op == Op::Create {
            // Taken (live, deleted or retired): the same answer whoever asks, so it says
            // nothing of the artifact's home, type, title or revision.
            if head.is_some() {
                return Err(Reason::Conflict(IDENTITY_TAKEN.into()));
            }
            if let Some(root) = &env.root {
                self.check_root(community, root, &env.h).await?;
            }
            return Ok(());
        }
        // Whether the sender reads the artifact's home is decided first, before anything
        // is compared with it, and whenever the identity exists (current prev or not), so
        // neither the answer nor the work done differs between a stale prev and a current
        // one the sender cannot read.
        let readable = match &head {
            Some(h) => self.reads(ctx, &h.channel_id).await?,
            None => false,
        };
        // A prev that is not current, an identity that does not exist and a current
        // revision the sender cannot read get the same answer: none tells a sender
        // anything about an artifact it cannot read (NIP-AR: errors disclose no
        // inaccessible artifact details). Only readers get the precise refusals below.
        let Some(head) = head
            .filter(|h| env.prev.as_deref() == Some(h.revision_id.as_str()))
            .filter(|_| readable)
        else {
            return Err(Reason::Conflict(NOT_CURRENT.into()));
        };
        if head.artifact_type != env.artifact_type {
            return Err(Reason::invalid("type is immutable: it must equal prev's"));
        }
        let deleted = head.op == Op::Delete.as_str();
        match env.op {
            Op::Restore if !deleted => {
                return Err(Reason::invalid(
                    "only a deleted artifact is restored: prev must be its deletion",
                ))
            }
            Op::Update | Op::Move | Op::Delete if deleted => {
                return Err(Reason::invalid(
                    "this artifact is deleted: only op=restore is accepted",
                ))
            }
            _ => {}
        }
        if env.op == Op::Move {
            if env.h == head.channel_id {
                return Err(Reason::invalid("a move changes h; an update keeps it"));
            }
            // Write permission in the source too, decided exactly as for a kind-9
            // message there: the same revision, homed in the source.
            let mut in_source = event.clone();
            for tag in &mut in_source.tags {
                if tag.first().map(String::as_str) == Some("h") {
                    tag[1] = head.channel_id.clone();
                }
            }
            self.access.check_write(ctx, &in_source).await?;
            if let Some(root) = &env.root {
                self.check_root(community, root, &env.h).await?;
            }
            return Ok(());
        }
        if env.h != head.channel_id {
            return Err(Reason::invalid(format!(
                "op={} keeps h; use op=move to change it",
                env.op.as_str()
            )));
        }
        if env.op == Op::Delete && env.root != head.root_id {
            return Err(Reason::invalid("a delete keeps the current root"));
        }
        // Only a root that changed must exist now: losing an anchor later never blocks
        // edits.
        if env.root != head.root_id {
            if let Some(root) = &env.root {
                self.check_root(community, root, &env.h).await?;
            }
        }
        Ok(())
    }

    /// May the sender read `channel` (the home of the revision its prev names)? Only that
    /// one channel is decided.
    async fn reads(&self, ctx: &ConnCtx, channel: &str) -> Result<bool, Reason> {
        let scope = self
            .access
            .scope_for(ctx, Some(vec![channel.to_owned()]))
            .await?;
        Ok(scope.has_channel(channel))
    }

    /// `root` must be an existing, undeleted conversation message in `channel`. One text
    /// for every failure: it does not say whether the event exists elsewhere.
    async fn check_root(&self, community: i64, root: &str, channel: &str) -> Result<(), Reason> {
        let id = root.to_owned();
        let found: Option<(Option<String>, i32)> = self
            .store
            .read(move |mut conn| {
                Ok(with_conn!(&mut conn, |c| events::table
                    .filter(events::community_id.eq(community))
                    .filter(events::id.eq(&id))
                    .filter(events::deleted_at.is_null())
                    .select((events::channel_id, events::kind))
                    .first(c)
                    .optional())?)
            })
            .await?;
        match found {
            Some((Some(ch), kind))
                if ch == channel && u32::try_from(kind).is_ok_and(is_conversation) =>
            {
                Ok(())
            }
            _ => Err(Reason::invalid(
                "root must be an existing, undeleted conversation message in h",
            )),
        }
    }

    /// Kind 5 may not delete artifact revisions (they are soft-deleted with op=delete and
    /// removed by moderators with kind 9005).
    pub(crate) async fn refuse_revision_deletion(
        &self,
        ctx: &ConnCtx,
        event: &Event,
    ) -> Result<(), Reason> {
        let ids: Vec<String> = event.tag_values("e").map(str::to_owned).collect();
        if ids.is_empty() {
            return Ok(());
        }
        let community = ctx.community_id();
        let author = event.pubkey.clone();
        // Only the sender's own revisions: kind 5 touches nothing else, and whether
        // someone else's event is a revision is not the sender's to learn.
        let hits: Vec<String> = self
            .store
            .read(move |mut conn| {
                let revisions = heads::revisions_among(&mut conn, community, &ids)?;
                Ok(with_conn!(&mut conn, |c| events::table
                    .filter(events::community_id.eq(community))
                    .filter(events::id.eq_any(&revisions))
                    .filter(events::pubkey.eq(&author))
                    .select(events::id)
                    .load(c))?)
            })
            .await?;
        if !hits.is_empty() {
            return Err(Reason::invalid(
                "kind 5 cannot delete artifact revisions: publish a revision with op=delete \
                 (or ask a moderator for a kind-9005 removal)",
            ));
        }
        Ok(())
    }
}
