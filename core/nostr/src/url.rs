//! Relay and request URLs as NIP-42 and NIP-98 compare them.

/// Compare two URLs the way NIP-42 and NIP-98 need: scheme and host case-insensitive,
/// one trailing slash ignored, everything else exact.
pub fn same_url(a: &str, b: &str) -> bool {
    normalize_url(a) == normalize_url(b)
}

fn normalize_url(url: &str) -> String {
    let url = url.trim();
    let (scheme, rest) = match url.split_once("://") {
        Some(parts) => parts,
        None => return url.to_owned(),
    };
    let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (host, tail) = rest.split_at(split);
    let mut tail = tail.to_owned();
    // "/path/" == "/path" and "" == "/"; also before a query string.
    if let Some(q) = tail.find('?') {
        let (path, query) = tail.split_at(q);
        tail = format!("{}{}", path.trim_end_matches('/'), query);
    } else {
        tail = tail.trim_end_matches('/').to_owned();
    }
    format!(
        "{}://{}{}",
        scheme.to_ascii_lowercase(),
        host.to_ascii_lowercase(),
        tail
    )
}

#[cfg(test)]
mod tests {
    use super::same_url;

    #[test]
    fn url_comparison_rules() {
        assert!(same_url(
            "HTTP://LocalHost:7777/query",
            "http://localhost:7777/query/"
        ));
        assert!(same_url("ws://localhost:7777/", "ws://localhost:7777"));
        assert!(same_url("http://h/q?a=1", "http://h/q/?a=1"));
        assert!(!same_url("http://h/Query", "http://h/query"));
        assert!(!same_url("https://h/q", "http://h/q"));
        assert!(!same_url("http://h:1/q", "http://h:2/q"));
    }
}
