//! Dry-run of a pasted event against the scripts a community runs, with the facts in
//! the database (membership, roles, bans, channels): the same access service the relay
//! uses, opened read-only here — nothing is stored.

use buzz_core::access::{AccessService, CommunityPolicies};
use buzz_core::clock::SystemClock;
use buzz_core::community::Community;
use buzz_core::config::Settings;
use buzz_core::ctx::{ConnCtx, Transport};
use buzz_core::plugin::PluginCatalog;
use buzz_core::store::{community_stats, Store};
use buzz_nostr::event::Event;
use std::sync::Arc;

/// What the scripts say about `event_json` written in community `host` by its author
/// (authenticated as that author, as the relay requires).
pub async fn dry_run(
    settings: &Settings,
    catalog: &PluginCatalog,
    host: &str,
    event_json: &str,
) -> Result<String, String> {
    let event: Event =
        serde_json::from_str(event_json.trim()).map_err(|e| format!("not a Nostr event: {e}"))?;
    let configured = settings
        .communities
        .iter()
        .find(|c| buzz_nostr::host::normalize_host(&c.host) == host)
        .ok_or_else(|| format!("no community {host} in the configuration"))?;
    let policies = CommunityPolicies::load(settings).map_err(|e| format!("{e:#}"))?;
    let store = Store::open(
        &settings.storage.database_url,
        1,
        false,
        &catalog.migration_sets(),
    )
    .await
    .map_err(|e| format!("opening the database: {e}"))?;
    let result = async {
        let wanted = host.to_owned();
        let id = store
            .read(move |mut conn| community_stats(&mut conn))
            .await
            .map_err(|r| r.to_string())?
            .into_iter()
            .find(|c| c.host == wanted)
            .map(|c| c.id)
            .ok_or_else(|| format!("community {host} is not stored yet (start the relay once)"))?;
        let access = AccessService::new(
            store.clone(),
            Some(Arc::new(policies)),
            Arc::new(SystemClock),
        );
        let ctx = ConnCtx {
            community: Arc::new(Community::from_settings(id, configured)),
            pubkey: Some(event.pubkey.clone()),
            ip: None,
            transport: Transport::Http,
            host_header: host.to_owned(),
            authority: host.to_owned(),
        };
        Ok(match access.check_write(&ctx, &event).await {
            Ok(()) => format!(
                "kind {} by {}…: allowed",
                event.kind,
                event.pubkey.chars().take(8).collect::<String>()
            ),
            // Operators see the cause (a policy failure's script error included).
            Err(reason) => format!("kind {}: refused — {reason}", event.kind),
        })
    }
    .await;
    store.shutdown().await;
    result
}
