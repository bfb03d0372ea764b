//! SQLite: the reader's channel set as an SQL function, `buzz_readable(channel_id)`.
//!
//! A reader may see tens of thousands of channels. Handing them to SQLite as a list
//! (bound variables, or one JSON array) costs every query what the list costs — building
//! it, parsing it, an ephemeral index over it — even when the answer is 20 rows. Instead
//! every pooled connection has this function, which looks the channel up in the set of the
//! query running on the calling thread: the same shared `ChannelSet` live delivery uses.
//! A query then costs per row it examines, not per channel its reader may see, and the
//! set it checks is exactly the one the access service decided (no second copy that
//! could drift from it). SQLite calls application functions on the thread that steps
//! the statement, which is the thread that installed the set.

use super::query::ChannelSet;
use diesel::sql_types::{Nullable, Text};
use diesel::sqlite::SqliteConnection;
use std::cell::RefCell;

diesel::define_sql_function! {
    /// Whether `channel` is in the channel set installed for the query running on this
    /// thread (false for NULL, and false when no set is installed: fail closed).
    fn buzz_readable(channel: Nullable<Text>) -> Bool;
}

thread_local! {
    static CURRENT: RefCell<Option<ChannelSet>> = const { RefCell::new(None) };
}

/// Give a new SQLite connection the function.
pub(super) fn register(conn: &mut SqliteConnection) -> diesel::QueryResult<()> {
    buzz_readable_utils::register_nondeterministic_impl(conn, |channel: Option<String>| {
        channel.is_some_and(|channel| {
            CURRENT.with(|current| {
                current
                    .borrow()
                    .as_ref()
                    .is_some_and(|set| set.contains(&channel))
            })
        })
    })
}

/// The set `buzz_readable` answers from while this guard lives (the previous one, if any,
/// comes back when it drops, so a nested query cannot leave a wider set behind).
pub(super) struct Installed {
    previous: Option<ChannelSet>,
}

pub(super) fn install(set: ChannelSet) -> Installed {
    let previous = CURRENT.with(|current| current.replace(Some(set)));
    Installed { previous }
}

impl Drop for Installed {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|current| *current.borrow_mut() = previous);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use diesel::prelude::*;

    fn conn() -> SqliteConnection {
        let mut conn = SqliteConnection::establish(":memory:").expect("in-memory SQLite");
        register(&mut conn).expect("register buzz_readable");
        conn
    }

    fn readable(conn: &mut SqliteConnection, channel: Option<&str>) -> bool {
        diesel::select(buzz_readable(channel.map(str::to_owned)))
            .get_result(conn)
            .expect("select buzz_readable")
    }

    #[test]
    fn answers_from_the_installed_set_only() {
        let mut conn = conn();
        assert!(!readable(&mut conn, Some("a")), "no set installed: closed");
        {
            let _outer = install(["a".to_owned(), "b".to_owned()].into_iter().collect());
            assert!(readable(&mut conn, Some("a")));
            assert!(!readable(&mut conn, Some("c")));
            assert!(
                !readable(&mut conn, None),
                "NULL is never a readable channel"
            );
            {
                let _inner = install(["c".to_owned()].into_iter().collect());
                assert!(readable(&mut conn, Some("c")));
                assert!(!readable(&mut conn, Some("a")));
            }
            assert!(readable(&mut conn, Some("a")), "outer set restored");
        }
        assert!(
            !readable(&mut conn, Some("a")),
            "closed again after the guard"
        );
    }

    #[test]
    fn another_threads_set_is_not_seen() {
        let _here = install(["a".to_owned()].into_iter().collect());
        let seen_elsewhere = std::thread::spawn(|| {
            let mut conn = conn();
            readable(&mut conn, Some("a"))
        })
        .join()
        .expect("thread");
        assert!(!seen_elsewhere);
    }
}
