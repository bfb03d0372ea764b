//! Helpers shared by integration tests that need more than `testkit`.

pub(crate) mod freeze_proxy;
