//! The relay's log: stderr (stdout carries command output such as `migrate --status`),
//! text or JSON lines as `[log]` says, filtered by `[log] level` unless `RUST_LOG` is set.

use anyhow::Context;
use buzz_core::config::{LogFormat, LogSettings};
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

/// What commands that run before a configuration is read (`policy …`) log.
const BEFORE_CONFIG: &str = "info,actix_server=warn";

/// Install the process's log writer; `None`: before (or without) a configuration.
pub(crate) fn init(settings: Option<&LogSettings>) -> anyhow::Result<()> {
    let level = settings.map_or(BEFORE_CONFIG, |s| s.level.as_str());
    let filter = match std::env::var("RUST_LOG") {
        Ok(from_env) if !from_env.is_empty() => EnvFilter::builder()
            .parse(&from_env)
            .with_context(|| format!("RUST_LOG {from_env:?} is not a tracing filter"))?,
        _ => EnvFilter::builder()
            .parse(level)
            .with_context(|| format!("log.level {level:?} is not a tracing filter"))?,
    };
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colours only for a terminal: a file or a pipe gets plain text.
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(filter);
    let installed = match settings.map_or(LogFormat::Text, |s| s.format) {
        LogFormat::Text => builder.try_init(),
        // Fields flattened beside `message`, so a JSON line carries what the text line
        // says under the same names.
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    installed.map_err(|err| anyhow::anyhow!("installing the log writer: {err}"))
}
