//! The bench's relay, users and attacker floods.

use super::*;

/// A relay in this process (on the relay runtime) over fresh storage.
pub(crate) struct Bench {
    pub(crate) relay: RunningRelay,
    pub(crate) host: String,
    pub(crate) database_url: String,
    pub(crate) backend: &'static str,
    _storage: BenchStorage,
}

impl Bench {
    pub(crate) async fn start(
        args: &Args,
        rt: &tokio::runtime::Runtime,
        plugin: bool,
    ) -> anyhow::Result<Bench> {
        let storage = BenchStorage::new(args.database_url.as_deref()).await?;
        let mut settings = storage.settings.clone();
        settings.plugins.insert(
            NAME.into(),
            PluginSection {
                enabled: Some(plugin),
                // The bench makes far more requests than a client's quota allows.
                options: [("quota_requests".to_owned(), json!(u32::MAX))]
                    .into_iter()
                    .collect(),
            },
        );
        let database_url = settings.storage.database_url.clone();
        let backend = storage.backend;
        let relay = rt
            .spawn(async move {
                RelayBuilder::new(settings)
                    .without_signal_handlers()
                    .plugin(PluginEntry::of::<ReadStatePlugin>())
                    .start()
                    .await
            })
            .await
            .context("relay task")?
            .context("starting the relay")?;
        let host = format!("localhost:{}", relay.addr.port());
        Ok(Bench {
            relay,
            host,
            database_url,
            backend,
            _storage: storage,
        })
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.relay.addr
    }

    pub(crate) async fn user(&self, keys: &Keys) -> anyhow::Result<WsClient> {
        let mut ws = WsClient::connect(self.addr(), &self.host).await?;
        ws.timeout = Duration::from_secs(120);
        let (ok, msg) = ws.auth(keys).await;
        if !ok {
            bail!("AUTH refused: {msg}");
        }
        Ok(ws)
    }

    pub(crate) fn api(&self, keys: &Keys) -> Client {
        Client::new(&format!("http://{}", self.addr()), &self.host, keys.clone())
    }

    pub(crate) async fn stop(self, rt: &tokio::runtime::Runtime) -> anyhow::Result<()> {
        let relay = self.relay;
        rt.spawn(async move { relay.stop().await }).await??;
        Ok(())
    }

    /// Rows of the plugin's tables: (frontiers, mentions).
    pub(crate) fn plugin_rows(&self) -> anyhow::Result<(i64, i64)> {
        let count = |table: &str| -> anyhow::Result<i64> {
            let text = format!("SELECT COUNT(*) AS v FROM {table}");
            let rows: Vec<Count> = if self.backend == "postgres" {
                let mut c = diesel::PgConnection::establish(&self.database_url)?;
                diesel::sql_query(text).load(&mut c)?
            } else {
                let path = self
                    .database_url
                    .strip_prefix("sqlite://")
                    .unwrap_or(&self.database_url);
                let mut c = diesel::SqliteConnection::establish(path)?;
                diesel::sql_query(text).load(&mut c)?
            };
            Ok(rows.first().map_or(0, |r| r.v))
        };
        Ok((
            count("read_state_frontiers")?,
            count("read_state_mentions")?,
        ))
    }
}

#[derive(QueryableByName)]
pub(crate) struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    v: i64,
}

pub(crate) fn tag(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub(crate) async fn publish(ws: &mut WsClient, event: Event) -> anyhow::Result<Event> {
    let (ok, msg) = ws.publish(&event).await;
    if !ok {
        bail!("kind {} refused: {msg}", event.kind);
    }
    Ok(event)
}

/// Send `events` in windows of `window` and require every OK.
pub(crate) async fn flood(
    ws: &mut WsClient,
    events: &[Event],
    window: usize,
) -> anyhow::Result<()> {
    for chunk in events.chunks(window) {
        let oks = ws.burst(chunk).await;
        if let Some(bad) = chunk
            .iter()
            .find(|e| !oks.get(&e.id).is_some_and(|(ok, _)| *ok))
        {
            bail!("event refused: {:?}", oks.get(&bad.id));
        }
    }
    Ok(())
}

/// Sign on every core (signing is the client's cost, done before anything is timed).
pub(crate) fn sign_all(specs: Vec<(Keys, u32, Vec<Vec<String>>, i64)>) -> Vec<Event> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = specs.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = specs
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|(keys, kind, tags, at)| {
                            keys.sign(*kind, tags.clone(), &uuid::Uuid::new_v4().to_string(), *at)
                        })
                        .collect::<Vec<Event>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

pub(crate) async fn create_channel(
    ws: &mut WsClient,
    owner: &Keys,
    name: &str,
) -> anyhow::Result<String> {
    let id = uuid::Uuid::new_v4().to_string();
    let tags = vec![
        tag(&["h", &id]),
        tag(&["name", name]),
        tag(&["channel_type", "stream"]),
    ];
    publish(ws, owner.sign(9007, tags, "", now())).await?;
    Ok(id)
}

pub(crate) async fn join(ws: &mut WsClient, keys: &Keys, channel: &str) -> anyhow::Result<()> {
    let nonce = uuid::Uuid::new_v4().to_string();
    publish(
        ws,
        keys.sign(9021, vec![tag(&["h", channel])], &nonce, now()),
    )
    .await?;
    Ok(())
}

/// The reader's first intent: a message of its own, marked read.
pub(crate) async fn start_account(
    ws: &mut WsClient,
    api: &Client,
    keys: &Keys,
    channel: &str,
) -> anyhow::Result<()> {
    let own = publish(ws, keys.sign(9, vec![tag(&["h", channel])], "hi", now())).await?;
    let answer = api
        .intents(&[client::mark_through(channel, None, &own.id)])
        .await?;
    if answer.status != 200 || answer.body["results"][0]["status"] != "applied" {
        bail!("starting the account: {} {}", answer.status, answer.body);
    }
    Ok(())
}

/// `count` attacker threads in `channel`: a top-level message p-tagging `root_p` and a
/// reply p-tagging `reply_p`, author times spread over the last ten minutes.
pub(crate) async fn attacker_threads(
    ws: &mut WsClient,
    attacker: &Keys,
    channel: &str,
    count: usize,
    root_p: &[String],
    reply_p: &[String],
) -> anyhow::Result<()> {
    let base = now() - 700;
    let span = 600.0 / count.max(1) as f64;
    let specs = (0..count)
        .map(|i| {
            let mut tags = vec![tag(&["h", channel])];
            tags.extend(root_p.iter().map(|p| tag(&["p", p])));
            (attacker.clone(), 9, tags, base + (i as f64 * span) as i64)
        })
        .collect();
    let roots = sign_all(specs);
    flood(ws, &roots, 200).await?;
    let specs = roots
        .iter()
        .map(|root| {
            let mut tags = vec![
                tag(&["h", channel]),
                tag(&["e", &root.id, "", "root"]),
                tag(&["e", &root.id, "", "reply"]),
            ];
            tags.extend(reply_p.iter().map(|p| tag(&["p", p])));
            (attacker.clone(), 9, tags, root.created_at + 30)
        })
        .collect();
    flood(ws, &sign_all(specs), 200).await
}

/// One sidebar row (`channel_ids=`), timed.
pub(crate) async fn timed_row(
    api: &Client,
    path: &str,
) -> anyhow::Result<(Duration, u16, usize, Value)> {
    let began = Instant::now();
    let answer = api.get(path).await?;
    let took = began.elapsed();
    let bytes = answer.body.to_string().len();
    Ok((took, answer.status, bytes, answer.body))
}
