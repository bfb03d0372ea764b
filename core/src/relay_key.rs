//! The relay's key file: `<data_dir>/relay.key`, 64 hex characters, created once with
//! mode 0600 and read on every later start.

use anyhow::Context;
use buzz_nostr::keys::Keys;
use std::path::Path;

/// Read the key kept at `path`, or generate one and keep it there (mode 0600).
pub fn load_or_generate(path: &Path) -> anyhow::Result<Keys> {
    if path.exists() {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading relay key {}", path.display()))?;
        return Keys::from_hex(&text)
            .with_context(|| format!("parsing relay key {}", path.display()));
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let keys = Keys::generate();
    write_private(path, &keys.secret_hex())
        .with_context(|| format!("writing relay key {}", path.display()))?;
    Ok(keys)
}

#[cfg(unix)]
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

#[cfg(not(unix))]
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    std::fs::write(path, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_file_is_created_once_and_reused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("relay.key");
        let a = load_or_generate(&path).expect("generate");
        let b = load_or_generate(&path).expect("reload");
        assert_eq!(a.pubkey(), b.pubkey());
    }
}
