//! Sentry ids (UUIDs written as 32 hex digits) and the OTLP byte ids they map to.

/// Parses a Sentry event/chunk/profiler id: 32 hex digits, hyphenated or
/// not, in braces or after `urn:uuid:`, as Relay's `EventId` (a `Uuid`)
/// accepts; the nil id is no id.
pub fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    uuid::Uuid::try_parse(s.trim())
        .ok()
        .filter(|u| !u.is_nil())
        .map(uuid::Uuid::into_bytes)
}

/// Formats an id the way Sentry SDKs send it: 32 lowercase hex digits.
pub fn format_uuid(id: &[u8; 16]) -> String {
    hex::encode(id)
}

/// A fresh random (v4) id.
pub fn random_uuid() -> [u8; 16] {
    uuid::Uuid::new_v4().into_bytes()
}

/// A deterministic id derived from `parts` (FNV-1a, 128 bits), marked as a
/// version 8 (custom) UUID. Same parts, same id, across processes.
pub fn stable_uuid(parts: &[&[u8]]) -> [u8; 16] {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut a: u64 = 0xcbf2_9ce4_8422_2325;
    let mut b: u64 = 0x6c62_272e_07bb_0142;
    for part in parts {
        for &byte in part.iter() {
            a = (a ^ byte as u64).wrapping_mul(PRIME);
            b = (b ^ byte as u64).wrapping_mul(PRIME).rotate_left(29);
        }
        // Separator, so ("ab","c") and ("a","bc") differ.
        a = (a ^ 0xff).wrapping_mul(PRIME);
        b = (b ^ 0xff).wrapping_mul(PRIME).rotate_left(29);
    }
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&a.to_be_bytes());
    out[8..].copy_from_slice(&b.to_be_bytes());
    out[6] = (out[6] & 0x0f) | 0x80;
    out[8] = (out[8] & 0x3f) | 0x80;
    out
}

/// Parses a hex byte string such as a trace or span id; `None` unless it
/// holds exactly `N` bytes.
pub fn parse_hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let mut out = [0u8; N];
    hex::decode_to_slice(s.trim(), &mut out).ok()?;
    Some(out)
}

/// Sentry's debug id for an ELF build id: the first 16 bytes read as a
/// little-endian GUID (what `symbolic` does), hyphenated.
pub fn debug_id_from_build_id(build_id: &[u8]) -> Option<String> {
    if build_id.is_empty() {
        return None;
    }
    let mut b = [0u8; 16];
    let n = build_id.len().min(16);
    b[..n].copy_from_slice(&build_id[..n]);
    b[..4].reverse();
    b[4..6].reverse();
    b[6..8].reverse();
    let h = hex::encode(b);
    Some(format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_forms() {
        let want = parse_uuid("6e5283e1ce434eec8378198a9c1cc556").unwrap();
        assert_eq!(
            parse_uuid("6e5283e1-ce43-4eec-8378-198a9c1cc556"),
            Some(want)
        );
        assert_eq!(
            parse_uuid("{6E5283E1-CE43-4EEC-8378-198A9C1CC556}"),
            Some(want)
        );
        assert_eq!(format_uuid(&want), "6e5283e1ce434eec8378198a9c1cc556");
        assert_eq!(parse_uuid("6e5283e1ce434eec8378198a9c1cc5"), None);
        assert_eq!(parse_uuid("6e5283e1ce434eec8378198a9c1cc556aa"), None);
        assert_eq!(parse_uuid("zz5283e1ce434eec8378198a9c1cc556"), None);
        assert_eq!(parse_uuid("00000000000000000000000000000000"), None);
    }

    #[test]
    fn stable_ids_are_stable_and_distinct() {
        let a = stable_uuid(&[b"svc", b"host"]);
        assert_eq!(a, stable_uuid(&[b"svc", b"host"]));
        assert_ne!(a, stable_uuid(&[b"svch", b"ost"]));
        assert_eq!(a[6] >> 4, 8, "version 8");
    }

    #[test]
    fn elf_debug_id() {
        let build_id = hex::decode("dfb85de42daffd09640c8fe377d572de3e168920").unwrap();
        assert_eq!(
            debug_id_from_build_id(&build_id).unwrap(),
            "e45db8df-af2d-09fd-640c-8fe377d572de"
        );
    }
}
