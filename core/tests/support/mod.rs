//! Helpers shared by integration tests that need more than `testkit`.

pub mod freeze_proxy;
