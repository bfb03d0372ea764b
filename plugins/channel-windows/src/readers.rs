//! What the reader may read, as decided by core's one access service.
//!
//! Channel windows ask the access service about their own channel only (cheap, and the
//! answer does not grow with the community). An aux event from another channel — only
//! legacy data can hold one, since ingest keeps reactions, edits and removals in their
//! target's channel — makes [`Readable::learn`] ask about that channel too, once.

use buzz_core::access::AccessService;
use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use buzz_core::store::{ChannelScope, Scope};
use std::collections::HashSet;

/// The reader's read rights, as far as this request asked.
#[derive(Debug, Clone)]
pub(crate) struct Readable {
    community_wide: bool,
    all_channels: bool,
    channels: HashSet<String>,
    /// Channels the access service was asked about (readable or not).
    asked: HashSet<String>,
    /// `true` when the scope covered every channel, so nothing is left to ask.
    complete: bool,
}

impl Readable {
    /// From a scope over `asked` channels (`None`: every channel of the community).
    pub(crate) fn from_scope(scope: &Scope, asked: Option<&[String]>) -> Readable {
        let mut readable = Readable {
            community_wide: scope.community_wide,
            all_channels: false,
            channels: HashSet::new(),
            asked: asked.unwrap_or_default().iter().cloned().collect(),
            complete: asked.is_none(),
        };
        readable.absorb(scope);
        readable
    }

    fn absorb(&mut self, scope: &Scope) {
        match &scope.channels {
            ChannelScope::All => self.all_channels = true,
            ChannelScope::None => {}
            ChannelScope::Only(list) => self.channels.extend(list.iter().cloned()),
        }
    }

    /// May the reader read an event of `channel` (`None`: a community-wide event)?
    pub(crate) fn can_read(&self, channel: Option<&str>) -> bool {
        match channel {
            None => self.community_wide,
            Some(ch) => self.all_channels || self.channels.contains(ch),
        }
    }

    /// Ask the access service about the `channels` not asked yet.
    pub(crate) async fn learn<'a>(
        &mut self,
        access: &AccessService,
        ctx: &ConnCtx,
        channels: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), Reason> {
        if self.complete || self.all_channels {
            return Ok(());
        }
        let mut unknown: Vec<String> = channels
            .into_iter()
            .filter(|ch| !self.asked.contains(*ch))
            .map(str::to_owned)
            .collect();
        unknown.sort_unstable();
        unknown.dedup();
        if unknown.is_empty() {
            return Ok(());
        }
        let scope = access.scope_for(ctx, Some(unknown.clone())).await?;
        self.asked.extend(unknown);
        self.absorb(&scope);
        Ok(())
    }
}

/// Did the reader's read rights stay the same between two full scopes?
pub(crate) fn same_access(before: &Scope, after: &Scope) -> bool {
    fn channels(scope: &Scope) -> Option<Vec<&str>> {
        match &scope.channels {
            ChannelScope::All => None,
            ChannelScope::None => Some(Vec::new()),
            ChannelScope::Only(list) => {
                let mut list: Vec<&str> = list.iter().map(String::as_str).collect();
                list.sort_unstable();
                list.dedup();
                Some(list)
            }
        }
    }
    before.community_id == after.community_id
        && before.community_wide == after.community_wide
        && channels(before) == channels(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(community_wide: bool, channels: ChannelScope) -> Scope {
        Scope {
            community_id: 1,
            community_wide,
            channels,
            expiry: Default::default(),
        }
    }

    #[test]
    fn readability_and_access_comparison() {
        let only = |l: &[&str]| ChannelScope::Only(l.iter().map(|s| s.to_string()).collect());
        let r = Readable::from_scope(&scope(false, only(&["a"])), Some(&["a".into()]));
        assert!(r.can_read(Some("a")) && !r.can_read(Some("b")) && !r.can_read(None));
        let all = Readable::from_scope(&scope(true, ChannelScope::All), None);
        assert!(all.can_read(Some("z")) && all.can_read(None));

        assert!(same_access(
            &scope(true, only(&["a", "b"])),
            &scope(true, only(&["b", "a"]))
        ));
        assert!(!same_access(
            &scope(true, only(&["a", "b"])),
            &scope(true, only(&["a"]))
        ));
        assert!(!same_access(
            &scope(true, only(&["a"])),
            &scope(false, only(&["a"]))
        ));
    }
}
