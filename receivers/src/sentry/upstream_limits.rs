//! The upstream's rate limits, kept as Relay keeps them for its own
//! upstream: per data category and scope from `X-Sentry-Rate-Limits`
//! (`retry_after:categories:scope:reason_code:namespaces`), so that a queued
//! envelope whose items are limited is discarded before it is sent, as
//! Relay discards buffered envelopes under a limit.
//!
//! Scopes: a `key` limit holds for the DSN key it was answered to; a
//! `project` or `organization` limit for the project (profcol does not know
//! a project's organization: it enforces less than Relay would, never more,
//! and an envelope it lets through is answered 429 and discarded then).

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Scopes remembered at once; a limit beyond them is not kept (enforced
/// only by the upstream's next 429).
const MAX_SCOPES: usize = 4096;

/// Longest limit kept: a malformed header must not stop forwarding for days.
const MAX_LIMIT: Duration = Duration::from_secs(24 * 3600);

#[derive(Default)]
pub(super) struct UpstreamLimits {
    /// Scope key -> (category, `""` for all) -> until.
    scopes: HashMap<String, HashMap<String, Instant>>,
}

/// The scopes an envelope belongs to: its project and its DSN key.
pub(super) struct Scoping<'a> {
    pub project: &'a str,
    pub key: Option<&'a str>,
}

impl Scoping<'_> {
    fn project_scope(&self) -> String {
        format!("p:{}", self.project)
    }

    fn key_scope(&self) -> String {
        match self.key {
            Some(k) => format!("k:{k}"),
            None => self.project_scope(),
        }
    }
}

impl UpstreamLimits {
    /// Records the limits of an `X-Sentry-Rate-Limits` value answered for
    /// `scoping`; malformed groups are skipped, as the SDKs and Relay do.
    pub(super) fn record(&mut self, header: &str, scoping: &Scoping<'_>, now: Instant) {
        self.scopes
            .retain(|_, cats| cats.values().any(|&until| until > now));
        for group in header.split(',') {
            let mut parts = group.trim().split(':');
            let Some(secs) = parts.next().and_then(|s| s.trim().parse::<f64>().ok()) else {
                continue;
            };
            if !secs.is_finite() || secs <= 0.0 {
                continue;
            }
            let until = now + Duration::from_secs_f64(secs).min(MAX_LIMIT);
            let categories = parts.next().unwrap_or("").trim();
            let scope = match parts.next().map(str::trim) {
                Some("key") => scoping.key_scope(),
                _ => scoping.project_scope(),
            };
            if !self.scopes.contains_key(&scope) && self.scopes.len() >= MAX_SCOPES {
                continue;
            }
            let cats = self.scopes.entry(scope).or_default();
            let names: Vec<&str> = if categories.is_empty() {
                vec![""]
            } else {
                categories.split(';').map(str::trim).collect()
            };
            for c in names {
                let e = cats.entry(c.to_owned()).or_insert(until);
                *e = (*e).max(until);
            }
        }
    }

    /// Whether an item of `item_type` is limited for `scoping` at `now`.
    pub(super) fn is_limited(&self, item_type: &str, scoping: &Scoping<'_>, now: Instant) -> bool {
        let Some(categories) = categories(item_type) else {
            return false;
        };
        if self.scopes.is_empty() {
            return false;
        }
        [scoping.project_scope(), scoping.key_scope()]
            .iter()
            .filter_map(|s| self.scopes.get(s))
            .any(|cats| {
                std::iter::once("")
                    .chain(categories.iter().copied())
                    .any(|c| cats.get(c).is_some_and(|&until| until > now))
            })
    }
}

/// Relay's data categories of an envelope item type; `None` for items no
/// limit applies to (client reports).
fn categories(item_type: &str) -> Option<&'static [&'static str]> {
    Some(match item_type {
        "client_report" => return None,
        "event" => &["error", "default"],
        "transaction" => &["transaction", "transaction_indexed"],
        "security" | "raw_security" | "nel" => &["security"],
        "attachment" => &["attachment"],
        "session" | "sessions" => &["session"],
        "profile" => &["profile", "profile_indexed"],
        "profile_chunk" => &["profile_chunk", "profile_chunk_ui"],
        "replay_event" | "replay_recording" | "replay_video" => &["replay"],
        "check_in" => &["monitor"],
        "span" | "otel_span" => &["span", "span_indexed"],
        "log" | "otel_log" => &["log_item"],
        "feedback" | "user_report" => &["user_report_v2", "feedback"],
        "statsd" | "metric_buckets" => &["metric_bucket"],
        _ => &[],
    })
}

/// `Retry-After` in seconds (an HTTP date is not read: the backoff applies).
pub(super) fn retry_after_secs(v: &str) -> Option<Duration> {
    let secs: f64 = v.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs).min(MAX_LIMIT))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_hold_per_category_and_scope() {
        let mut l = UpstreamLimits::default();
        let now = Instant::now();
        let a = Scoping {
            project: "1",
            key: Some("ka"),
        };
        let b = Scoping {
            project: "2",
            key: Some("kb"),
        };
        let a2 = Scoping {
            project: "1",
            key: Some("other"),
        };
        l.record(
            "60:error;transaction:project:org_quota, 30::key, bad",
            &a,
            now,
        );
        assert!(l.is_limited("event", &a, now));
        assert!(l.is_limited("transaction", &a2, now));
        // The key limit (all categories) holds for that key only.
        assert!(l.is_limited("session", &a, now));
        assert!(!l.is_limited("session", &a2, now));
        // Another project is not limited, nor are client reports.
        assert!(!l.is_limited("event", &b, now));
        assert!(!l.is_limited("client_report", &a, now));
        // Limits pass.
        assert!(!l.is_limited("event", &a, now + Duration::from_secs(61)));
        assert!(!l.is_limited("session", &a, now + Duration::from_secs(31)));
    }
}
