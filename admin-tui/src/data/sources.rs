//! Reading each source: the database and config (blocking, works with the relay
//! stopped), each process's `/metrics` and the relay's NIP-11 (HTTP, with a deadline),
//! and the background refresher that keeps a [`Snapshot`] current without ever blocking
//! the UI.

use super::figures::{Figures, Live};
use super::frontiers::{gather_frontiers, Reader};
use super::report::Report;
use super::{CommunityModeration, DbState, Process, Snapshot};
use buzz_core::config::Settings;
use buzz_core::plugin::PluginCatalog;
use buzz_core::store::inspect::{index_states, migration_times};
use buzz_core::store::moderation::{listed_members, sanctions};
use buzz_core::store::Store;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Deadline of one HTTP read (a scrape, NIP-11, a NIP-86 call).
pub const HTTP_DEADLINE: Duration = Duration::from_secs(2);

/// Read everything the database holds for the panes.
pub fn gather_db(settings: &Settings, catalog: &PluginCatalog) -> Result<DbState, String> {
    let report = Report::gather(settings, catalog).map_err(|e| format!("{e:#}"))?;
    let migrations = Store::migrations(&settings.storage.database_url, &catalog.migration_sets())
        .map_err(|e| format!("opening the database: {e}"))?;
    let migrated = !report.migrations.applied.is_empty();
    let applied_at = if migrated {
        migrations
            .with_conn(|mut conn| migration_times(&mut conn))
            .map_err(|r| format!("reading migration times: {r}"))?
    } else {
        Vec::new()
    };
    let indexes = migrations
        .with_conn(|mut conn| index_states(&mut conn))
        .map_err(|r| format!("reading index flags: {r}"))?;
    let mut moderation = Vec::new();
    if report.migrations.pending.is_empty() {
        for community in &report.communities {
            let id = community.id;
            let (s, m) = migrations
                .with_conn(|mut conn| {
                    Ok((
                        sanctions(&mut conn, id, None)?,
                        listed_members(&mut conn, id)?,
                    ))
                })
                .map_err(|r| format!("reading moderation of {}: {r}", community.host))?;
            moderation.push(CommunityModeration {
                host: community.host.clone(),
                sanctions: s,
                members: m,
            });
        }
    }
    Ok(DbState {
        report,
        applied_at,
        indexes,
        moderation,
    })
}

/// The metrics addresses the Overview watches: `[metrics] processes`, else this
/// config's own `bind` (none when metrics are disabled and no process is listed).
pub fn metrics_addrs(settings: &Settings) -> Vec<String> {
    let m = &settings.metrics;
    if !m.processes.is_empty() {
        m.processes.clone()
    } else if m.enabled {
        vec![m.bind.clone()]
    } else {
        Vec::new()
    }
}

/// Where to reach the relay over HTTP (`server.bind`, a wildcard read as loopback) and
/// the `Host` that selects its first community.
pub fn relay_http(settings: &Settings) -> (String, String) {
    let bind = settings.server.bind.as_str();
    let (ip, port) = bind.rsplit_once(':').unwrap_or((bind, "80"));
    let ip = match ip {
        "0.0.0.0" | "" => "127.0.0.1",
        "[::]" => "[::1]",
        other => other,
    };
    let host = settings
        .communities
        .first()
        .map(|c| buzz_nostr::host::normalize_host(&c.host))
        .unwrap_or_else(|| "localhost".into());
    (format!("{ip}:{port}"), format!("{host}:{port}"))
}

pub fn http_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .timeout(HTTP_DEADLINE)
        .build()
        .map_err(|e| format!("http client: {e}"))
}

/// One scrape of `addr`'s `/metrics`.
pub async fn scrape(client: &reqwest::Client, addr: &str) -> Result<Figures, String> {
    let resp = client
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .map_err(|e| format!("{addr}: {}", short(&e)))?;
    if !resp.status().is_success() {
        return Err(format!("{addr}: HTTP {}", resp.status()));
    }
    let text = resp.text().await.map_err(|e| format!("{addr}: {e}"))?;
    Figures::parse(&text).map_err(|e| format!("{addr}: {e}"))
}

/// The relay's NIP-11 document.
pub async fn nip11(
    client: &reqwest::Client,
    settings: &Settings,
) -> Result<serde_json::Value, String> {
    let (addr, host) = relay_http(settings);
    let resp = client
        .get(format!("http://{addr}/"))
        .header("host", host)
        .header("accept", "application/nostr+json")
        .send()
        .await
        .map_err(|e| format!("relay at {addr}: {}", short(&e)))?;
    resp.json()
        .await
        .map_err(|e| format!("relay at {addr}: NIP-11 is not JSON: {e}"))
}

/// A connection error's innermost cause (reqwest's outer text says only "error sending
/// request").
fn short(e: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// The snapshot plugin's captures: from Redis when the relay keeps them there, else
/// from its database (on a blocking thread).
pub async fn gather_captures(
    settings: &Arc<Settings>,
    catalog: &Arc<PluginCatalog>,
) -> Result<super::captures::CapturesView, String> {
    use super::captures;
    if captures::in_redis(settings) {
        return captures::from_redis(settings).await;
    }
    let (s, c) = (settings.clone(), catalog.clone());
    tokio::task::spawn_blocking(move || {
        Store::migrations(&s.storage.database_url, &c.migration_sets())
            .map_err(|e| format!("opening the database: {e}"))?
            .with_conn(|mut conn| captures::from_database(&s, &mut conn))
            .map_err(|r| format!("reading captures: {r}"))
    })
    .await
    .unwrap_or_else(|e| Err(format!("reading captures failed: {e}")))
}

/// Keeps `snapshot` current: metrics and NIP-11 every `every`, the database every
/// `db_every`. Runs on its own thread; the UI only locks the snapshot to draw it.
pub struct Refresher {
    pub snapshot: Arc<Mutex<Snapshot>>,
    wake: tokio::sync::mpsc::UnboundedSender<()>,
    /// The reader the Frontiers pane watches, read with each database refresh.
    reader: Arc<Mutex<Option<Reader>>>,
}

impl Refresher {
    pub fn start(
        settings: Settings,
        catalog: PluginCatalog,
        every: Duration,
        db_every: Duration,
    ) -> Result<Refresher, String> {
        let addrs = metrics_addrs(&settings);
        let snapshot = Arc::new(Mutex::new(Snapshot {
            processes: addrs.iter().map(Process::new).collect(),
            ..Snapshot::default()
        }));
        let (wake, mut woken) = tokio::sync::mpsc::unbounded_channel();
        let shared = snapshot.clone();
        let reader = Arc::new(Mutex::new(None::<Reader>));
        let watched = reader.clone();
        let client = http_client()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("refresh runtime: {e}"))?;
        std::thread::Builder::new()
            .name("buzz-admin-refresh".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let settings = Arc::new(settings);
                    let catalog = Arc::new(catalog);
                    let mut previous: Vec<Option<(Figures, Instant)>> = vec![None; addrs.len()];
                    let mut last_db: Option<Instant> = None;
                    loop {
                        for (i, addr) in addrs.iter().enumerate() {
                            let result = scrape(&client, addr).await;
                            let at = Instant::now();
                            let live = result.map(|f| {
                                let live = Live::from(f.clone(), at, previous[i].as_ref());
                                previous[i] = Some((f, at));
                                live
                            });
                            if let Ok(mut s) = shared.lock() {
                                s.processes[i].record(at, live);
                            }
                        }
                        let doc = nip11(&client, &settings).await;
                        if let Ok(mut s) = shared.lock() {
                            s.nip11.update(doc);
                        }
                        if last_db.is_none_or(|t| t.elapsed() >= db_every) {
                            let (s, c) = (settings.clone(), catalog.clone());
                            let db = tokio::task::spawn_blocking(move || gather_db(&s, &c))
                                .await
                                .unwrap_or_else(|e| Err(format!("database read failed: {e}")));
                            if let Ok(mut s) = shared.lock() {
                                s.db.update(db);
                            }
                            let captures = gather_captures(&settings, &catalog).await;
                            if let Ok(mut s) = shared.lock() {
                                s.captures.update(captures);
                            }
                            let asked = watched.lock().ok().and_then(|r| r.clone());
                            if let Some(asked) = asked {
                                let (s, c, r) = (settings.clone(), catalog.clone(), asked.clone());
                                let read = tokio::task::spawn_blocking(move || {
                                    gather_frontiers(&s, &c, &r)
                                })
                                .await
                                .unwrap_or_else(|e| Err(format!("frontiers read failed: {e}")));
                                // Kept only if the operator still asks about this reader.
                                let current = watched.lock().ok().and_then(|r| r.clone());
                                if current.as_ref() == Some(&asked) {
                                    if let Ok(mut s) = shared.lock() {
                                        s.frontiers.update(read);
                                    }
                                }
                            }
                            last_db = Some(Instant::now());
                        }
                        tokio::select! {
                            _ = tokio::time::sleep(every) => {}
                            woke = woken.recv() => {
                                if woke.is_none() {
                                    return;
                                }
                                last_db = None;
                            }
                        }
                    }
                })
            })
            .map_err(|e| format!("refresh thread: {e}"))?;
        Ok(Refresher {
            snapshot,
            wake,
            reader,
        })
    }

    /// Watch `reader` in the Frontiers pane from now on (the previous reader's data is
    /// dropped at once), and read it now.
    pub fn watch_frontiers(&self, reader: Reader) {
        if let Ok(mut r) = self.reader.lock() {
            *r = Some(reader);
        }
        if let Ok(mut s) = self.snapshot.lock() {
            s.frontiers = super::Sourced::default();
        }
        self.refresh_now();
    }

    /// Refresh everything now (the `r` key, and after an action).
    pub fn refresh_now(&self) {
        let _ = self.wake.send(());
    }
}
