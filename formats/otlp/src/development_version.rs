//! The OTLP Profiles development version: transport metadata that names
//! the incompatible form of `profiles/v1development` a request is written
//! in, so that a server can refuse one it does not read before decoding it
//! (opentelemetry-proto's specification, "Profiles development version";
//! the Collector checks and sends it from v0.165.0).
//!
//! - The key is `otlp-profiles-development-version` in gRPC metadata and
//!   `OTLP-Profiles-Development-Version` over HTTP (one header name, case
//!   aside).
//! - The value is a positive base-10 integer without leading zeros. Version
//!   `1` is the form of opentelemetry-proto v1.10.0 and v1.11.0, profcol's
//!   model; a missing key means `1`, so every producer older than the
//!   mechanism sends version 1.
//! - A server refuses malformed, repeated or unsupported values before
//!   decoding, with `INVALID_ARGUMENT` (gRPC) or 400 (HTTP): not retryable.
//! - A client sends exactly one value, that of the form it writes.

/// The metadata key, as gRPC metadata and `http::HeaderMap` hold it.
pub const HEADER: &str = "otlp-profiles-development-version";

/// The version of profcol's model ([`crate::revisions::Revision::CURRENT`]).
pub const CURRENT: &str = "1";

/// Checks the values a request carries under [`HEADER`] (every one, in
/// order): none, or exactly [`CURRENT`]. The error says what was wrong and
/// which version is read here.
pub fn check<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Result<(), String> {
    let mut values = values.into_iter();
    let Some(value) = values.next() else {
        return Ok(());
    };
    if values.next().is_some() {
        return Err(format!("{HEADER} must be given exactly once"));
    }
    // An exact match: also refuses "01", " 1", "" and "1, 1" (two values an
    // HTTP intermediary joined).
    if value == CURRENT.as_bytes() {
        return Ok(());
    }
    Err(format!(
        "unsupported {HEADER} {:?}: profcol reads version {CURRENT} (opentelemetry-proto v1.10.0 and v1.11.0)",
        String::from_utf8_lossy(value)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_all(values: &[&str]) -> Result<(), String> {
        check(values.iter().map(|v| v.as_bytes()))
    }

    #[test]
    fn a_request_without_the_key_is_version_1() {
        assert_eq!(check_all(&[]), Ok(()));
    }

    #[test]
    fn version_1_is_read() {
        assert_eq!(check_all(&["1"]), Ok(()));
    }

    #[test]
    fn other_malformed_and_repeated_values_are_refused() {
        for v in ["2", "0", "01", " 1", "1 ", "", "1, 1", "1,2", "v1", "+1"] {
            let e = check_all(&[v]).unwrap_err();
            assert!(
                e.contains("unsupported") && e.contains("version 1"),
                "{v:?}: {e}"
            );
        }
        for vs in [&["1", "1"][..], &["1", "2"], &["2", "1"]] {
            let e = check_all(vs).unwrap_err();
            assert!(e.contains("exactly once"), "{vs:?}: {e}");
        }
    }
}
