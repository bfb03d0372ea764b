//! Host names as communities are keyed by them: one community per host name, whatever
//! case, port or trailing dot a client sends in `Host`.

/// A `Host` value split into its name and optional port.
fn split_host_port(host: &str) -> (&str, Option<&str>) {
    if let Some(rest) = host.strip_prefix('[') {
        // IPv6 literal: "[::1]:7777"
        return match rest.split_once(']') {
            Some((addr, tail)) => (
                &host[..addr.len() + 2],
                tail.strip_prefix(':').filter(|p| !p.is_empty()),
            ),
            None => (host, None),
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') => (name, Some(port).filter(|p| !p.is_empty())),
        _ => (host, None),
    }
}

/// Lowercase, port dropped, trailing dot stripped; loopback literals read as `localhost`.
pub fn normalize_host(host: &str) -> String {
    let (name, _) = split_host_port(host.trim());
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    match name.as_str() {
        "127.0.0.1" | "[::1]" => "localhost".to_owned(),
        _ => name,
    }
}

/// The authority used in NIP-98 URLs and NIP-CW bindings: the normalized host plus
/// `:port` when the port is not the scheme's default.
pub fn authority(host_header: &str, scheme: &str) -> String {
    let (_, port) = split_host_port(host_header.trim());
    let host = normalize_host(host_header);
    let default_port = if scheme.eq_ignore_ascii_case("https") {
        "443"
    } else {
        "80"
    };
    match port {
        Some(p) if p != default_port => format!("{host}:{p}"),
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_normalize_per_design() {
        let table = [
            ("LocalHost", "localhost"),
            ("localhost:7777", "localhost"),
            ("example.COM.", "example.com"),
            ("example.com.:443", "example.com"),
            ("127.0.0.1:7777", "localhost"),
            ("[::1]:7777", "localhost"),
            ("[::1]", "localhost"),
        ];
        for (input, want) in table {
            assert_eq!(normalize_host(input), want, "{input}");
        }
    }

    #[test]
    fn authority_keeps_non_default_ports() {
        assert_eq!(authority("LOCALHOST:7777", "http"), "localhost:7777");
        assert_eq!(authority("example.com:80", "http"), "example.com");
        assert_eq!(authority("example.com:443", "https"), "example.com");
        assert_eq!(authority("example.com:443", "http"), "example.com:443");
        assert_eq!(authority("127.0.0.1:9000", "http"), "localhost:9000");
    }
}
