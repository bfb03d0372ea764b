//! Channel and community state rows, changed inside the event's storage transaction:
//! `channels.rs` the channel rows, `members.rs` channel membership, `community.rs`
//! community members and sanctions.

mod channels;
mod community;
mod members;

pub use channels::*;
pub use community::*;
pub use members::*;
