//! What the HTTP exporters (`sentry`, `otlphttp`) share: reading
//! `Retry-After`, and error messages that keep the cause.

use std::time::{Duration, SystemTime};

/// `Retry-After`: delay seconds (the SDKs also accept fractions) or an HTTP date.
pub(crate) fn parse_retry_after(value: &str, wall: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return secs_to_duration(secs);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(wall).unwrap_or(Duration::ZERO))
}

/// Seconds a server asked for, capped at a day: that bounds what a server
/// may ask and keeps `Instant` arithmetic safe.
pub(crate) fn secs_to_duration(secs: f64) -> Option<Duration> {
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
}

pub(crate) use profcol_pipeline::net::error_chain;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_seconds_or_a_date_and_bounded() {
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_retry_after(" 7 ", wall), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after("1.5", wall),
            Some(Duration::from_millis(1500))
        );
        let date = httpdate::fmt_http_date(wall + Duration::from_secs(30));
        assert_eq!(
            parse_retry_after(&date, wall),
            Some(Duration::from_secs(30))
        );
        let past = httpdate::fmt_http_date(wall - Duration::from_secs(30));
        assert_eq!(parse_retry_after(&past, wall), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("1e12", wall),
            Some(Duration::from_secs(86_400))
        );
        for bad in ["-1", "NaN", "soon", ""] {
            assert_eq!(parse_retry_after(bad, wall), None, "{bad}");
        }
    }
}
