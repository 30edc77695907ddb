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

/// The namespace of [`stable_uuid`]'s name-based ids (itself a v5 id of
/// "profcol" in the URL namespace).
const NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x477a_58f6_a9c9_5c99_ac4e_d014_f9db_2295);

/// A deterministic id derived from `parts`: a name-based (v5) UUID of
/// the parts, each length-prefixed so that ("ab", "c") and ("a", "bc")
/// differ. Same parts, same id, across processes and hosts.
pub fn stable_uuid(parts: &[&[u8]]) -> [u8; 16] {
    let mut name = Vec::with_capacity(parts.iter().map(|p| p.len() + 8).sum());
    for part in parts {
        name.extend_from_slice(&(part.len() as u64).to_be_bytes());
        name.extend_from_slice(part);
    }
    uuid::Uuid::new_v5(&NAMESPACE, &name).into_bytes()
}

/// Parses a hex byte string such as a trace or span id; `None` unless it
/// holds exactly `N` bytes.
pub fn parse_hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let mut out = [0u8; N];
    hex::decode_to_slice(s.trim(), &mut out).ok()?;
    Some(out)
}

/// Sentry's debug id for an ELF build id: its first 16 bytes (padded with
/// zeros) read as a little-endian GUID, as `symbolic` does.
pub fn debug_id_from_build_id(build_id: &[u8]) -> Option<String> {
    if build_id.is_empty() {
        return None;
    }
    let mut guid = [0u8; 16];
    let n = build_id.len().min(16);
    guid[..n].copy_from_slice(&build_id[..n]);
    debugid::DebugId::from_guid_age(&guid, 0)
        .ok()
        .map(|id| id.to_string())
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
        assert_ne!(a, stable_uuid(&[b"svc"]));
        let u = uuid::Uuid::from_bytes(a);
        assert_eq!(u.get_version_num(), 5);
        assert_eq!(u.get_variant(), uuid::Variant::RFC4122);
    }

    #[test]
    fn elf_debug_id() {
        let build_id = hex::decode("dfb85de42daffd09640c8fe377d572de3e168920").unwrap();
        assert_eq!(
            debug_id_from_build_id(&build_id).unwrap(),
            "e45db8df-af2d-09fd-640c-8fe377d572de"
        );
        // A short (8-byte Go) build id is padded.
        assert_eq!(
            debug_id_from_build_id(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap(),
            "04030201-0605-0807-0000-000000000000"
        );
        assert_eq!(debug_id_from_build_id(&[]), None);
    }
}
