//! The Frontiers pane's data (issue #14): one reader's read state in one community, as
//! the read-state plugin reads it from the database (`buzz_read_state::reader_frontiers`:
//! started_at, channel positions and cuts, thread rows, the sidebar it would answer
//! now). Read by the refresher thread, like every other pane's data, for the reader the
//! operator asked about; the console is the only place positions are shown.

use buzz_core::config::Settings;
use buzz_core::plugin::PluginCatalog;
use buzz_core::store::{community_stats, Store};
use buzz_read_state::ReaderFrontiers;

/// Which reader the operator asked about: a community (host) and a hex pubkey.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reader {
    pub host: String,
    pub pubkey: String,
}

/// What the pane draws: the reader asked about and what the database says of them.
#[derive(Debug, Clone)]
pub struct Frontiers {
    pub reader: Reader,
    pub view: ReaderFrontiers,
}

/// A pubkey as typed or pasted: 64 hex digits (any case) or an `npub1…` (NIP-19);
/// the lowercase hex the database keys rows by.
pub fn parse_pubkey(text: &str) -> Result<String, String> {
    let text = text.trim();
    if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(text.to_ascii_lowercase());
    }
    if text.to_ascii_lowercase().starts_with("npub1") {
        let (hrp, data) = bech32::decode(text).map_err(|e| format!("not a valid npub: {e}"))?;
        if hrp.to_lowercase() != "npub" || data.len() != 32 {
            return Err("not a valid npub: it does not hold a 32-byte key".into());
        }
        return Ok(data.iter().map(|b| format!("{b:02x}")).collect());
    }
    Err("a pubkey is 64 hex digits or an npub1…".into())
}

/// Read `reader`'s frontiers from the configured database (blocking; the refresher
/// runs it on a blocking thread).
pub fn gather_frontiers(
    settings: &Settings,
    catalog: &PluginCatalog,
    reader: &Reader,
) -> Result<Frontiers, String> {
    let store = Store::migrations(&settings.storage.database_url, &catalog.migration_sets())
        .map_err(|e| format!("opening the database: {e}"))?;
    let now = buzz_core::clock::Clock::now_micros(&buzz_core::clock::SystemClock);
    let skew = settings.limits.max_clock_skew_secs;
    let view = store
        .with_conn(|mut conn| {
            let community = community_stats(&mut conn)?
                .into_iter()
                .find(|c| c.host == reader.host)
                .ok_or_else(|| {
                    buzz_core::error::Reason::NotFound(format!(
                        "no community {} stored",
                        reader.host
                    ))
                })?;
            buzz_read_state::reader_frontiers(&mut conn, community.id, &reader.pubkey, now, skew)
        })
        .map_err(|r| format!("reading frontiers of {}: {r}", reader.host))?;
    Ok(Frontiers {
        reader: reader.clone(),
        view,
    })
}

/// A relay arrival time (microseconds) as `YYYY-MM-DD HH:MM:SS` UTC.
pub fn utc(micros: i64) -> String {
    let secs = micros.div_euclid(1_000_000);
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (proleptic Gregorian, 400-year eras).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pubkeys_parse_as_hex_or_npub() {
        let hex = "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d";
        assert_eq!(parse_pubkey(&hex.to_uppercase()).as_deref(), Ok(hex));
        // NIP-19's own example.
        let npub = "npub180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w6";
        assert_eq!(parse_pubkey(npub).as_deref(), Ok(hex));
        assert!(
            parse_pubkey("npub180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w7")
                .is_err()
        );
        assert!(parse_pubkey("nsec1xyz").is_err());
        assert!(parse_pubkey(&hex[..63]).is_err());
    }

    #[test]
    fn arrival_times_read_as_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400_000_000), "2000-02-29 00:00:00");
        assert_eq!(utc(1_798_761_599_999_999), "2026-12-31 23:59:59");
    }
}
