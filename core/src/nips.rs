//! NIP-11 `supported_nips`: exactly what the running relay implements — core's own list
//! and what each enabled plugin's manifest declares (`PluginManifest::SUPPORTED_NIPS`).

/// The NIPs core itself implements, each exercised over the wire by a suite:
/// 1 (basic protocol), 9 (deletion), 11 (this document), 29 (relay-based groups:
/// channels), 40 (expiration), 42 (AUTH), 45 (COUNT), 86 (management API), 98 (HTTP auth).
pub const CORE: [u32; 9] = [1, 9, 11, 29, 40, 42, 45, 86, 98];

/// Core's NIPs and the enabled plugins' declarations, ascending, each once.
pub fn supported<'a>(enabled_plugins: impl IntoIterator<Item = &'a [u32]>) -> Vec<u32> {
    let mut nips: Vec<u32> = CORE.to_vec();
    for declared in enabled_plugins {
        nips.extend_from_slice(declared);
    }
    nips.sort_unstable();
    nips.dedup();
    nips
}

#[cfg(test)]
mod tests {
    #[test]
    fn plugins_add_to_core_once_each() {
        assert_eq!(super::supported([]), super::CORE.to_vec());
        let got = super::supported([&[50u32, 1][..], &[50, 77][..]]);
        assert_eq!(got, vec![1, 9, 11, 29, 40, 42, 45, 50, 77, 86, 98]);
    }
}
