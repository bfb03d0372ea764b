//! Channel state rows, changed inside the event's storage transaction: `channels.rs` the
//! channel rows, `members.rs` channel membership. A whole community's members and
//! sanctions are `community_standing.rs`'s.

mod channels;
mod members;

pub use channels::*;
pub use members::*;
