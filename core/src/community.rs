//! Communities: one per host name. The HTTP `Host` header selects the community of
//! every request; nothing crosses from one community to another.

use crate::config::CommunitySettings;
use buzz_nostr::host::normalize_host;
use std::collections::HashMap;
use std::sync::Arc;

/// A community as configured, with its storage id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Community {
    /// Row id in the `communities` table; every stored row carries it.
    pub id: i64,
    /// Normalized host name (no port).
    pub host: String,
    pub name: String,
    /// Pubkeys with community-admin rights.
    pub owners: Vec<String>,
    /// Any authenticated pubkey is a member.
    pub open: bool,
}

impl Community {
    pub fn from_settings(id: i64, s: &CommunitySettings) -> Self {
        Community {
            id,
            host: normalize_host(&s.host),
            name: s.name.clone(),
            owners: s.owners.clone(),
            open: s.open,
        }
    }
}

/// Host name → community, built once at start.
#[derive(Debug, Clone, Default)]
pub struct Communities {
    by_host: HashMap<String, Arc<Community>>,
}

impl Communities {
    pub fn new(list: &[Arc<Community>]) -> Self {
        Communities {
            by_host: list.iter().map(|c| (c.host.clone(), c.clone())).collect(),
        }
    }

    /// The community a `Host` header value selects, if any.
    pub fn resolve(&self, host_header: &str) -> Option<Arc<Community>> {
        self.by_host.get(&normalize_host(host_header)).cloned()
    }
}
