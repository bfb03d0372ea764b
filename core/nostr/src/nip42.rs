//! NIP-42: the client proves its pubkey by signing the connection's challenge.

use crate::error::Refusal;
use crate::event::{Event, EventLimits};
use crate::url::same_url;

pub const AUTH_KIND: u32 = 22_242;
/// Allowed distance of the auth event's `created_at` from relay time, seconds.
pub const AUTH_WINDOW_SECS: i64 = 60;

/// A fresh random challenge for one connection.
pub fn new_challenge() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The relay URL a client must name: `ws://` or `wss://` plus the `Host` it connected to.
pub fn relay_url(public_scheme: &str, host_header: &str) -> String {
    let scheme = if public_scheme.eq_ignore_ascii_case("https") {
        "wss"
    } else {
        "ws"
    };
    format!("{scheme}://{host_header}/")
}

/// Check an `AUTH` event; on success the event's pubkey is authenticated.
pub fn verify(
    event: &Event,
    challenge: &str,
    relay_url: &str,
    now_secs: i64,
) -> Result<(), Refusal> {
    let limits = EventLimits {
        max_clock_skew_secs: AUTH_WINDOW_SECS,
        ..EventLimits::default()
    };
    if event.kind != AUTH_KIND {
        return Err(Refusal::invalid("auth event must be kind 22242"));
    }
    limits.check(event, now_secs)?;
    if event.tag_value("challenge") != Some(challenge) {
        return Err(Refusal::invalid(
            "auth challenge does not match this connection's",
        ));
    }
    match event.tag_value("relay") {
        Some(url) if same_url(url, relay_url) => Ok(()),
        _ => Err(Refusal::invalid(format!(
            "auth relay tag must be {relay_url}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Keys;

    fn auth(keys: &Keys, challenge: &str, relay: &str, at: i64) -> Event {
        keys.sign(
            AUTH_KIND,
            vec![
                vec!["relay".into(), relay.into()],
                vec!["challenge".into(), challenge.into()],
            ],
            "",
            at,
        )
    }

    #[test]
    fn auth_rules() {
        let keys = Keys::generate();
        let now = 1_700_000_000;
        let url = relay_url("http", "localhost:7777");
        assert!(verify(
            &auth(&keys, "c1", "ws://LOCALHOST:7777", now),
            "c1",
            &url,
            now
        )
        .is_ok());
        let cases = [
            (auth(&keys, "c2", &url, now), "challenge"),
            (auth(&keys, "c1", "ws://other:7777/", now), "relay"),
            (auth(&keys, "c1", &url, now - 61), "created_at"),
            (keys.sign(1, vec![], "", now), "22242"),
        ];
        for (event, needle) in cases {
            let err = verify(&event, "c1", &url, now)
                .expect_err("must be refused")
                .to_string();
            assert!(
                err.starts_with("invalid: ") && err.contains(needle),
                "{err}"
            );
        }
    }
}
