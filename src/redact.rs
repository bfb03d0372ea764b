//! Database URLs fit for a log line or a summary: a password in one is never printed.

/// A database URL fit for a log: a password in it is replaced by `***`.
pub(crate) fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((credentials, host)) = rest.split_once('@') else {
        return url.to_owned();
    };
    match credentials.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::without_password;

    #[test]
    fn passwords_never_reach_the_log() {
        assert_eq!(
            without_password("postgres://buzz:s3cret@db:5432/buzz"),
            "postgres://buzz:***@db:5432/buzz"
        );
        assert_eq!(
            without_password("postgres://postgres@127.0.0.1/x"),
            "postgres://postgres@127.0.0.1/x"
        );
        assert_eq!(
            without_password("sqlite://./data/buzz.db"),
            "sqlite://./data/buzz.db"
        );
    }
}
