/// How NIP-01 says a kind is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindClass {
    /// Stored; every event kept.
    Regular,
    /// 0, 3, 10000–19999: only the newest per (pubkey, kind).
    Replaceable,
    /// 20000–29999: delivered live, never stored.
    Ephemeral,
    /// 30000–39999: only the newest per (pubkey, kind, d).
    Addressable,
}

impl KindClass {
    pub fn of(kind: u32) -> Self {
        match kind {
            0 | 3 | 10_000..=19_999 => KindClass::Replaceable,
            20_000..=29_999 => KindClass::Ephemeral,
            30_000..=39_999 => KindClass::Addressable,
            _ => KindClass::Regular,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::KindClass::{self, *};

    #[test]
    fn classes_follow_nip01_ranges() {
        let table = [
            (0, Replaceable),
            (1, Regular),
            (3, Replaceable),
            (5, Regular),
            (9_999, Regular),
            (10_000, Replaceable),
            (19_999, Replaceable),
            (20_000, Ephemeral),
            (29_999, Ephemeral),
            (30_000, Addressable),
            (39_999, Addressable),
            (40_000, Regular),
        ];
        for (kind, class) in table {
            assert_eq!(KindClass::of(kind), class, "kind {kind}");
        }
    }
}
