//! Names and types: `/<sha256>[.ext]` parsed strictly (64 lowercase hex, then at most one
//! short alphanumeric extension; anything else is a 400 naming why), MIME types checked
//! against `allowed_types`, and the extension a descriptor's URL carries.

use crate::error::MediaError;

/// Longest extension accepted after the hash (`.jpeg`, `.webm`, `.tar.gz` is not one).
const MAX_EXT: usize = 10;

/// Whether `s` is a blob hash as Blossom writes it: 64 lowercase hex characters.
pub(crate) fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The hash a `/<sha256>[.ext]` path segment names. The extension is ignored (BUD-01: the
/// stored type is served whatever it says) but must be plain.
pub(crate) fn blob_of(segment: &str) -> Result<String, MediaError> {
    let (hash, ext) = match segment.split_once('.') {
        Some((hash, ext)) => (hash, Some(ext)),
        None => (segment, None),
    };
    if !is_sha256(hash) {
        return Err(MediaError::BadRequest(
            "the path must be /<sha256>[.ext]: 64 lowercase hex characters".into(),
        ));
    }
    if let Some(ext) = ext {
        let plain = !ext.is_empty()
            && ext.len() <= MAX_EXT
            && ext.bytes().all(|b| b.is_ascii_alphanumeric());
        if !plain {
            return Err(MediaError::BadRequest(format!(
                "a blob's extension is 1 to {MAX_EXT} letters or digits"
            )));
        }
    }
    Ok(hash.to_owned())
}

/// A hex pubkey as BUD-12 names it in `/list/<pubkey>`.
pub(crate) fn pubkey_of(segment: &str) -> Result<String, MediaError> {
    if is_sha256(segment) {
        Ok(segment.to_owned())
    } else {
        Err(MediaError::BadRequest(
            "the path must be /list/<pubkey>: 64 lowercase hex characters".into(),
        ))
    }
}

/// Whether `t` may stand in `allowed_types`: `type/subtype` or `type/*`.
pub(crate) fn check_type_pattern(t: &str) -> Result<(), String> {
    match t.split_once('/') {
        Some((top, sub)) if is_token(top) && (sub == "*" || is_token(sub)) => Ok(()),
        _ => Err(format!("{t:?} is not a MIME type (type/subtype or type/*)")),
    }
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
}

/// A declared `Content-Type` reduced to `type/subtype`, lowercase (parameters dropped);
/// `None` when it is not one.
pub(crate) fn media_type(declared: &str) -> Option<String> {
    let essence = declared.split(';').next()?.trim().to_ascii_lowercase();
    check_type_pattern(&essence).ok()?;
    (!essence.ends_with("/*")).then_some(essence)
}

/// Whether `mime` is allowed (`allowed` empty: everything is).
pub(crate) fn type_allowed(allowed: &[String], mime: &str) -> bool {
    allowed.is_empty()
        || allowed.iter().any(|a| match a.strip_suffix("/*") {
            Some(top) => mime
                .split_once('/')
                .is_some_and(|(t, _)| t.eq_ignore_ascii_case(top)),
            None => a.eq_ignore_ascii_case(mime),
        })
}

/// The extension a descriptor's URL carries for `mime` (BUD-02 wants one).
pub(crate) fn extension_for(mime: &str) -> &'static str {
    match mime {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "application/pdf" => "pdf",
        "text/plain" => "txt",
        "application/json" => "json",
        "video/mp4" => "mp4",
        "video/webm" => "webm",
        "audio/mpeg" => "mp3",
        "audio/ogg" => "ogg",
        "application/zip" => "zip",
        "application/gzip" => "gz",
        _ => "bin",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "b1674191a88ec5cdd733e4240a81803105dc412d6c6708d53ab94fc248f4f553";

    #[test]
    fn only_lowercase_full_hashes_with_a_plain_extension_are_blobs() {
        assert_eq!(blob_of(HASH).ok().as_deref(), Some(HASH));
        assert_eq!(blob_of(&format!("{HASH}.pdf")).ok().as_deref(), Some(HASH));
        for bad in [
            HASH.to_uppercase(),
            HASH[..63].to_owned(),
            format!("{HASH}0"),
            format!("{HASH}."),
            format!("{HASH}.a/b"),
            format!("{HASH}.tar.gz"),
            format!("{HASH}.%2e%2e"),
            "..".to_owned(),
            String::new(),
        ] {
            assert!(blob_of(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn wildcards_match_a_whole_top_level_type() {
        let allowed = vec!["image/*".to_owned(), "application/pdf".to_owned()];
        assert!(type_allowed(&allowed, "image/png"));
        assert!(type_allowed(&allowed, "application/pdf"));
        assert!(!type_allowed(&allowed, "application/zip"));
        assert!(!type_allowed(&allowed, "imagex/png"));
        assert!(type_allowed(&[], "anything/else"));
        assert!(check_type_pattern("image/*").is_ok());
        assert!(check_type_pattern("*/*").is_err());
        assert!(check_type_pattern("image").is_err());
        assert_eq!(
            media_type("Text/Plain; charset=utf-8").as_deref(),
            Some("text/plain")
        );
        assert_eq!(media_type("garbage"), None);
    }
}
