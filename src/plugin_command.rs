//! `buzz-relay <plugin> <command>`: a plugin's maintenance command
//! ([`buzz_core::plugin::PluginManifest::COMMANDS`]), run on one connection of the
//! configured database on a thread of its own; its summary is printed on stdout.

use anyhow::Context;
use buzz_core::config::Settings;
use buzz_core::plugin::PluginCatalog;
use buzz_core::store::Store;

pub(crate) async fn run(
    settings: Settings,
    catalog: PluginCatalog,
    args: Vec<String>,
) -> anyhow::Result<()> {
    let plugin = args.first().cloned().unwrap_or_default();
    let entry = catalog
        .entries()
        .iter()
        .find(|e| e.name == plugin)
        .cloned()
        .with_context(|| {
            let names: Vec<&str> = catalog.entries().iter().map(|e| e.name).collect();
            format!("unknown command {plugin:?} (plugins: {})", names.join(", "))
        })?;
    let command = match &args[1..] {
        [command] => command.clone(),
        _ => {
            let known: Vec<String> = entry
                .commands
                .iter()
                .map(|(name, what)| format!("{name}: {what}"))
                .collect();
            anyhow::bail!(
                "`buzz-relay {plugin} <command>` takes one command; {plugin}'s: {}",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join("; ")
                }
            )
        }
    };
    let summary = tokio::task::spawn_blocking(move || {
        let section = settings.plugin(entry.name);
        let url = settings.storage.database_url.clone();
        Store::with_database(&url, |mut conn| {
            Ok(entry.run_command(&command, &section, &settings, &mut conn))
        })
        .context("opening the database")?
    })
    .await
    .context("the command's thread")?
    .with_context(|| format!("{plugin} {}", args.join(" ")))?;
    println!("{summary}");
    Ok(())
}
