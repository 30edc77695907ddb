//! Sentry's rate limits, remembered per data category as the SDKs do
//! (sentry-python `HttpTransport._update_rate_limits`, sentry-rust
//! `RateLimiter`): `X-Sentry-Rate-Limits` on any response wins; otherwise a
//! 429 limits everything until `Retry-After` (seconds or an HTTP date),
//! 60 s when the header is missing or unreadable. A new limit never
//! shortens one in effect: the later expiry of the two is kept (sentry-java
//! and sentry-dart `applyRetryAfterOnlyIfLonger`).

use std::time::{Duration, Instant, SystemTime};

use crate::http_common::{parse_retry_after, secs_to_duration};

use profcol_sentry::ProfileType;

/// Data category of a `profile_chunk`.
pub const PROFILE_CHUNK: &str = "profile_chunk";
/// Data category of a `profile_chunk` from a UI platform.
pub const PROFILE_CHUNK_UI: &str = "profile_chunk_ui";

/// What the SDKs wait after a 429 that says nothing more.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(60);

/// The category Relay counts a chunk of `platform` under.
pub fn category_for_platform(platform: &str) -> &'static str {
    ProfileType::from_platform(platform).chunk_category()
}

/// Deadlines of the limits that can concern this exporter: all categories,
/// and the two profile chunk categories (others are ignored, so this stays
/// a few fields whatever the server sends).
#[derive(Debug, Default, Clone)]
pub struct RateLimits {
    all: Option<Instant>,
    profile_chunk: Option<Instant>,
    profile_chunk_ui: Option<Instant>,
}

impl RateLimits {
    /// Updates from one response. `now` is the monotonic clock, `wall` the
    /// wall clock (for an HTTP-date `Retry-After`).
    pub fn update(
        &mut self,
        status: u16,
        sentry_rate_limits: Option<&str>,
        retry_after: Option<&str>,
        now: Instant,
        wall: SystemTime,
    ) {
        if let Some(h) = sentry_rate_limits {
            for (categories, wait) in parse_sentry_rate_limits(h) {
                let until = now + wait;
                if categories.is_empty() {
                    extend(&mut self.all, until);
                }
                for c in categories.split(';') {
                    match c {
                        PROFILE_CHUNK => extend(&mut self.profile_chunk, until),
                        PROFILE_CHUNK_UI => extend(&mut self.profile_chunk_ui, until),
                        _ => {}
                    }
                }
            }
        } else if status == 429 {
            let wait = retry_after
                .and_then(|v| parse_retry_after(v, wall))
                .unwrap_or(DEFAULT_RETRY_AFTER);
            extend(&mut self.all, now + wait);
        }
    }

    /// How long `category` stays limited from `now`, if it is.
    pub fn remaining(&self, category: &str, now: Instant) -> Option<Duration> {
        let own = match category {
            PROFILE_CHUNK => self.profile_chunk,
            PROFILE_CHUNK_UI => self.profile_chunk_ui,
            _ => None,
        };
        [self.all, own]
            .into_iter()
            .flatten()
            .filter(|&until| until > now)
            .max()
            .map(|until| until - now)
    }
}

/// Limits until `until`, unless already limited for longer.
fn extend(limit: &mut Option<Instant>, until: Instant) {
    *limit = Some(limit.map_or(until, |old| old.max(until)));
}

/// `retry_after:categories:scope:reason_code:namespaces`, comma separated;
/// yields (categories, wait). Malformed groups are skipped, as the SDKs do.
pub fn parse_sentry_rate_limits(header: &str) -> impl Iterator<Item = (&str, Duration)> {
    header.split(',').filter_map(|group| {
        let mut parts = group.trim().split(':');
        let secs: f64 = parts.next()?.trim().parse().ok()?;
        let categories = parts.next()?.trim();
        Some((categories, secs_to_duration(secs)?))
    })
}
