//! One database, one relay identity: a relay whose key differs from the one recorded by
//! the first relay to open the database refuses to start, on both backends.

use buzz_core::both_backends;

use buzz_core::relay::RelayBuilder;
use buzz_core::testkit::{TestBackend, TestRelay};
use buzz_nostr::keys::Keys;

both_backends!(a_second_relay_key_is_refused);

async fn a_second_relay_key_is_refused(backend: TestBackend, name: &str) {
    let first = Keys::generate();
    let key = first.secret_hex();
    let Some(relay) =
        TestRelay::start_with(backend, name, |s| s.relay.private_key = key, Vec::new()).await
    else {
        return;
    };
    assert_eq!(relay.running().pubkey(), first.pubkey());

    let second = Keys::generate();
    let mut settings = relay.settings.clone();
    settings.relay.private_key = second.secret_hex();
    let err = match RelayBuilder::new(settings)
        .without_signal_handlers()
        .start()
        .await
    {
        Ok(_) => panic!("a relay with another key must not start on this database"),
        Err(err) => format!("{err:#}"),
    };
    assert!(
        err.contains(first.pubkey()) && err.contains(second.pubkey()),
        "{err}"
    );
    assert!(err.contains("buzz-relay identity --reset"), "{err}");

    // The first relay is unaffected.
    let mut ws = relay.ws().await;
    let note = first.sign(1, vec![], "still here", buzz_core::testkit::now());
    assert_eq!(ws.publish(&note).await, (true, String::new()));
    relay.stop().await;
}
