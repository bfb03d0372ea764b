//! The reader's scope: which community and which of its channels a reader may see
//! ([`Scope`], [`ChannelScope`], [`ChannelSet`]). Kept apart from the SQL so live delivery
//! (`Scope::allows`) and the access service use the same model the reads are written from.

/// Which channel-scoped rows a reader may receive. Rows without a channel are
/// community-wide and always visible to the community's readers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelScope {
    /// Every channel (relay-internal reads).
    All,
    /// No channel-scoped rows at all (e.g. unauthenticated readers).
    None,
    /// Only these channels.
    Only(ChannelSet),
}

/// A set of channel ids, shared (cheap to clone): a reader may have tens of thousands,
/// and live delivery asks "is this channel in it" for every event. Persistent
/// (structurally shared), so a change of one channel costs O(log n) even while scopes in
/// use still hold the previous version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChannelSet(imbl::HashSet<String>);

impl ChannelSet {
    pub fn contains(&self, channel: &str) -> bool {
        self.0.contains(channel)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &String> {
        self.0.iter()
    }

    /// Add `channel`; versions shared elsewhere are unaffected.
    pub fn insert(&mut self, channel: String) {
        self.0.insert(channel);
    }

    /// Remove `channel`; versions shared elsewhere are unaffected.
    pub fn remove(&mut self, channel: &str) {
        self.0.remove(channel);
    }
}

impl FromIterator<String> for ChannelSet {
    fn from_iter<I: IntoIterator<Item = String>>(ids: I) -> Self {
        ChannelSet(ids.into_iter().collect())
    }
}

/// Where a query looks: one community, and within it what the reader may see.
#[derive(Debug, Clone)]
pub struct Scope {
    pub community_id: i64,
    /// Rows without a channel (community-wide events).
    pub community_wide: bool,
    pub channels: ChannelScope,
    /// TTL channels in scope → when they expire (unix seconds); live delivery stops then.
    pub expiry: std::collections::HashMap<String, i64>,
}

impl Scope {
    /// May a reader with this scope see `event` (a live event) at `now`?
    pub fn allows(&self, event: &crate::stored::StoredEvent, now: i64) -> bool {
        if event.community_id != self.community_id {
            return false;
        }
        let channel = event.channel.as_deref();
        match (channel, &self.channels) {
            (None, _) => self.community_wide,
            (Some(_), ChannelScope::All) => true,
            (Some(_), ChannelScope::None) => false,
            (Some(ch), ChannelScope::Only(list)) => {
                list.contains(ch) && self.expiry.get(ch).is_none_or(|t| *t > now)
            }
        }
    }

    /// Is `channel` readable in this scope?
    pub fn has_channel(&self, channel: &str) -> bool {
        match &self.channels {
            ChannelScope::All => true,
            ChannelScope::None => false,
            ChannelScope::Only(list) => list.contains(channel),
        }
    }
}
