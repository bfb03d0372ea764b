use diesel::{Connection, PgConnection, RunQueryDsl};

/// A PostgreSQL database created for one test and dropped (forcibly) when dropped.
pub struct PgDatabase {
    admin_url: String,
    name: String,
    pub url: String,
}

impl PgDatabase {
    pub fn create(admin_url: &str) -> anyhow::Result<PgDatabase> {
        let name = format!("buzz_test_{}", uuid::Uuid::new_v4().simple());
        let mut admin = PgConnection::establish(admin_url)?;
        diesel::sql_query(format!("CREATE DATABASE {name}")).execute(&mut admin)?;
        let base = admin_url
            .rsplit_once('/')
            .map(|(base, _)| base)
            .unwrap_or(admin_url);
        // Plain TCP to the test server: a test binary exits with relays (and their pooled
        // connections) still alive, and OpenSSL's exit handler freeing its state under
        // a live TLS connection crashes the process (seen: SIGSEGV in OPENSSL_cleanup
        // after every test had passed). TLS to PostgreSQL is not what these tests test.
        let url = if base.contains('?') || admin_url.contains("sslmode") {
            format!("{base}/{name}")
        } else {
            format!("{base}/{name}?sslmode=disable")
        };
        Ok(PgDatabase {
            admin_url: admin_url.to_owned(),
            url,
            name,
        })
    }
}

impl PgDatabase {
    /// Keep the database after this value is gone (to inspect it); returns its URL.
    pub fn keep(self) -> String {
        let url = self.url.clone();
        std::mem::forget(self);
        url
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        let dropped = PgConnection::establish(&self.admin_url).and_then(|mut admin| {
            diesel::sql_query(format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ))
            .execute(&mut admin)
            .map_err(|e| diesel::ConnectionError::BadConnection(e.to_string()))
        });
        if let Err(e) = dropped {
            eprintln!("warning: could not drop test database {}: {e}", self.name);
        }
    }
}
