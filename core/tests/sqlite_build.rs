//! The bundled SQLite is compiled for concurrent readers (`.cargo/config.toml`): no
//! shared page cache behind a global mutex, no memory statistics lock. A build that lost
//! those flags still works, only slower under concurrent reads, so nothing else would
//! notice.

use diesel::{sql_query, Connection, QueryableByName, RunQueryDsl, SqliteConnection};

#[derive(QueryableByName)]
struct CompileOption {
    #[diesel(sql_type = diesel::sql_types::Text)]
    compile_options: String,
}

#[test]
fn sqlite_is_built_without_the_shared_page_cache_lock() {
    let mut conn = SqliteConnection::establish(":memory:").expect("an in-memory database");
    let options: Vec<String> = sql_query("PRAGMA compile_options")
        .load::<CompileOption>(&mut conn)
        .expect("compile options")
        .into_iter()
        .map(|o| o.compile_options)
        .collect();
    assert!(
        !options.iter().any(|o| o == "ENABLE_MEMORY_MANAGEMENT"),
        "SQLite built with ENABLE_MEMORY_MANAGEMENT (one page cache mutex for all \
         connections): {options:?}"
    );
    assert!(
        options.iter().any(|o| o == "DEFAULT_MEMSTATUS=0"),
        "SQLite built with memory statistics on (a mutex around every allocation): \
         {options:?}"
    );
}
