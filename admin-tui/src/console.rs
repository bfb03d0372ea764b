//! The terminal loop: draw the snapshot, read a key (never waiting more than a quarter
//! second, so refreshed data shows without a key press), run what it asks. NIP-86 calls
//! and dry-runs run on a runtime of their own and report back through a channel: the
//! UI never waits on I/O.

use crate::data::dryrun::dry_run;
use crate::data::nip86::Nip86Client;
use crate::data::sources::Refresher;
use crate::ui::{Action, App};
use anyhow::Context;
use buzz_core::config::Settings;
use buzz_core::plugin::PluginCatalog;
use buzz_nostr::keys::Keys;
use ratatui::crossterm::event::{self, Event, KeyEventKind};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

/// How often live figures (metrics, NIP-11) are read.
const LIVE_EVERY: Duration = Duration::from_secs(2);
/// How often the database is read.
const DB_EVERY: Duration = Duration::from_secs(5);

pub fn run(settings: Settings, catalog: PluginCatalog, owner: Option<Keys>) -> anyhow::Result<()> {
    let refresher = Refresher::start(settings.clone(), catalog.clone(), LIVE_EVERY, DB_EVERY)
        .map_err(|e| anyhow::anyhow!(e))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("action runtime")?;
    let client = match owner {
        Some(keys) => Some(Arc::new(
            Nip86Client::new(&settings, keys).map_err(|e| anyhow::anyhow!(e))?,
        )),
        None => None,
    };
    let settings = Arc::new(settings);
    let catalog = Arc::new(catalog);
    let (answers, answered) = mpsc::channel::<(usize, String)>();
    let mut app = App::new(client.as_ref().map(|c| c.pubkey().to_owned()));

    let mut terminal = ratatui::init();
    let _ = ratatui::crossterm::execute!(
        std::io::stdout(),
        ratatui::crossterm::event::EnableBracketedPaste
    );
    let result = (|| -> anyhow::Result<()> {
        loop {
            while let Ok((pane, text)) = answered.try_recv() {
                app.answer(pane, text);
                refresher.refresh_now();
            }
            {
                let snapshot = refresher
                    .snapshot
                    .lock()
                    .map_err(|_| anyhow::anyhow!("refresh thread panicked"))?;
                terminal.draw(|frame| app.draw(frame, &snapshot))?;
            }
            if !event::poll(Duration::from_millis(250))? {
                continue;
            }
            let action = match event::read()? {
                Event::Key(key) if key.kind == KeyEventKind::Press => {
                    let snapshot = refresher
                        .snapshot
                        .lock()
                        .map_err(|_| anyhow::anyhow!("refresh thread panicked"))?;
                    app.handle_key(key, &snapshot)
                }
                Event::Paste(text) => {
                    app.paste(&text);
                    None
                }
                _ => None,
            };
            let pane = app.active();
            match action {
                None | Some(Action::Prompt { .. }) | Some(Action::Notify(_)) => {}
                Some(Action::Quit) => return Ok(()),
                Some(Action::WatchFrontiers(reader)) => {
                    app.set_status(format!("reading frontiers in {}…", reader.host));
                    refresher.watch_frontiers(reader);
                }
                Some(Action::Refresh) => {
                    refresher.refresh_now();
                    app.set_status("refreshing…");
                }
                Some(Action::Nip86 {
                    community,
                    method,
                    params,
                }) => {
                    let Some(client) = client.clone() else {
                        app.set_status("read-only: no owner key");
                        continue;
                    };
                    app.set_status(format!("{method} in {community}…"));
                    let answers = answers.clone();
                    runtime.spawn(async move {
                        let text = match client.call(&community, &method, params).await {
                            Ok(result) => format!("{method} in {community}: {result}"),
                            Err(e) => format!("{method} in {community} failed: {e}"),
                        };
                        let _ = answers.send((pane, text));
                    });
                }
                Some(Action::DryRun { community, event }) => {
                    let (answers, settings, catalog) =
                        (answers.clone(), settings.clone(), catalog.clone());
                    runtime.spawn(async move {
                        let text = match dry_run(&settings, &catalog, &community, &event).await {
                            Ok(verdict) => verdict,
                            Err(e) => format!("dry-run failed: {e}"),
                        };
                        let _ = answers.send((pane, text));
                    });
                }
            }
        }
    })();
    let _ = ratatui::crossterm::execute!(
        std::io::stdout(),
        ratatui::crossterm::event::DisableBracketedPaste
    );
    ratatui::restore();
    result
}
