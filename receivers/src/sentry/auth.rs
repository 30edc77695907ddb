//! Where a Sentry SDK puts its public key, read as Relay reads it.

use http::HeaderMap;

/// `Sentry sentry_key=abc, sentry_version=7, sentry_client=...` from
/// `X-Sentry-Auth`, or `Authorization` with the `Sentry` scheme; else
/// `Authorization: Basic base64(KEY:secret)`, the key being the user part
/// (Relay's `auth_from_parts`).
pub(super) fn key_from_headers(headers: &HeaderMap) -> Option<String> {
    for name in ["x-sentry-auth", "authorization"] {
        for v in headers.get_all(name) {
            let Ok(v) = v.to_str() else { continue };
            let rest = v.trim();
            let rest = match rest.split_once(char::is_whitespace) {
                Some((scheme, rest)) if scheme.eq_ignore_ascii_case("sentry") => rest,
                _ if name == "x-sentry-auth" => rest,
                _ => continue,
            };
            if let Some(k) = param(rest, "sentry_key") {
                return Some(k);
            }
        }
    }
    headers.get_all("authorization").iter().find_map(|v| {
        let (scheme, creds) = v.to_str().ok()?.trim().split_once(char::is_whitespace)?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return None;
        }
        let decoded = String::from_utf8(base64_decode(creds.trim())?).ok()?;
        let (key, _secret) = decoded.split_once(':')?;
        (!key.is_empty()).then(|| key.to_owned())
    })
}

/// Standard base64 (RFC 4648), `=` padding optional; `None` when malformed.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    use base64::engine::{general_purpose, DecodePaddingMode, GeneralPurpose};
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        general_purpose::PAD.with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    base64::Engine::decode(&LENIENT, s).ok()
}

fn param(list: &str, key: &str) -> Option<String> {
    list.split(',').find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"').to_owned())
    })
}

/// `sentry_key` from the query string (what browser and Node SDKs send).
pub(super) fn key_from_query(query: Option<&str>) -> Option<String> {
    url::form_urlencoded::parse(query?.as_bytes())
        .find(|(k, _)| k == "sentry_key")
        .map(|(_, v)| v.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_place_sdks_put_the_key() {
        let mut h = HeaderMap::new();
        h.insert(
            "x-sentry-auth",
            "Sentry sentry_key=abc, sentry_version=7, sentry_client=sentry.python/2.75.0"
                .parse()
                .unwrap(),
        );
        assert_eq!(key_from_headers(&h).as_deref(), Some("abc"));

        let mut h = HeaderMap::new();
        h.insert(
            "authorization",
            "Sentry sentry_version=7,sentry_key=def".parse().unwrap(),
        );
        assert_eq!(key_from_headers(&h).as_deref(), Some("def"));

        let mut h = HeaderMap::new();
        h.insert("authorization", "Bearer xyz".parse().unwrap());
        assert_eq!(key_from_headers(&h), None);

        // Basic auth: base64("publickey:") and base64("k:secret").
        for (value, want) in [
            ("Basic cHVibGlja2V5Og==", Some("publickey")),
            ("basic cHVibGlja2V5Og", Some("publickey")),
            ("Basic azpzZWNyZXQ=", Some("k")),
            ("Basic cHVibGlja2V5", None), // no ':'
            ("Basic Og==", None),         // empty key
            ("Basic !!!", None),
        ] {
            let mut h = HeaderMap::new();
            h.insert("authorization", value.parse().unwrap());
            assert_eq!(key_from_headers(&h).as_deref(), want, "{value}");
        }

        assert_eq!(
            key_from_query(Some("sentry_version=7&sentry_key=publickey&sentry_client=sentry.javascript.node%2F11.1.0"))
                .as_deref(),
            Some("publickey")
        );
        assert_eq!(key_from_query(Some("")), None);
    }
}
