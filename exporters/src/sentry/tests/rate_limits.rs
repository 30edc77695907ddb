use std::time::{Duration, Instant, SystemTime};

use super::super::client::{classify, Reply};
use super::super::rate_limits::*;

fn secs(d: Option<Duration>) -> Option<u64> {
    d.map(|d| d.as_secs_f64().round() as u64)
}

#[test]
fn sentry_rate_limits_header_per_category() {
    let now = Instant::now();
    let mut rl = RateLimits::default();
    rl.update(
        200,
        Some("60:profile_chunk;transaction:organization:quota_exceeded, 2700:profile_chunk_ui:project, 10:error"),
        None,
        now,
        SystemTime::now(),
    );
    assert_eq!(secs(rl.remaining(PROFILE_CHUNK, now)), Some(60));
    assert_eq!(secs(rl.remaining(PROFILE_CHUNK_UI, now)), Some(2700));
    assert_eq!(
        rl.remaining(PROFILE_CHUNK, now + Duration::from_secs(61)),
        None,
        "expires"
    );

    // Empty categories: everything.
    let mut rl = RateLimits::default();
    rl.update(
        429,
        Some("5::organization"),
        Some("999"),
        now,
        SystemTime::now(),
    );
    assert_eq!(
        secs(rl.remaining(PROFILE_CHUNK, now)),
        Some(5),
        "the header wins over Retry-After"
    );
    assert_eq!(secs(rl.remaining(PROFILE_CHUNK_UI, now)), Some(5));
    rl.update(200, Some("1:profile_chunk"), None, now, SystemTime::now());
    assert_eq!(
        secs(rl.remaining(PROFILE_CHUNK, now)),
        Some(5),
        "all still limits it"
    );

    // A shorter limit does not shorten a longer one in effect, of the same
    // category or of all; a longer one extends it.
    let mut rl = RateLimits::default();
    rl.update(200, Some("60:profile_chunk"), None, now, SystemTime::now());
    rl.update(200, Some("1:profile_chunk"), None, now, SystemTime::now());
    assert_eq!(secs(rl.remaining(PROFILE_CHUNK, now)), Some(60));
    rl.update(200, Some("90:profile_chunk"), None, now, SystemTime::now());
    assert_eq!(secs(rl.remaining(PROFILE_CHUNK, now)), Some(90));
    rl.update(429, Some("30::org"), None, now, SystemTime::now());
    rl.update(429, None, Some("2"), now, SystemTime::now());
    assert_eq!(secs(rl.remaining(PROFILE_CHUNK_UI, now)), Some(30));
    // Also when the shorter one comes later in time.
    let later = now + Duration::from_secs(10);
    rl.update(200, Some("5:profile_chunk"), None, later, SystemTime::now());
    assert_eq!(secs(rl.remaining(PROFILE_CHUNK, later)), Some(80));

    // Limits on other categories concern nobody here; junk groups are skipped.
    let mut rl = RateLimits::default();
    rl.update(
        429,
        Some("60:transaction:org, x:profile_chunk, 2.5:profile_chunk:key:reason:ns"),
        None,
        now,
        SystemTime::now(),
    );
    assert_eq!(
        rl.remaining(PROFILE_CHUNK, now),
        Some(Duration::from_millis(2500))
    );
    assert_eq!(rl.remaining(PROFILE_CHUNK_UI, now), None);
}

#[test]
fn retry_after_and_the_default_apply_to_429_only() {
    let now = Instant::now();
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
    let limited = |status, retry_after: Option<&str>| {
        let mut rl = RateLimits::default();
        rl.update(status, None, retry_after, now, wall);
        secs(rl.remaining(PROFILE_CHUNK, now))
    };
    assert_eq!(limited(429, Some("120")), Some(120));
    assert_eq!(
        limited(429, Some("Sun, 06 Nov 1994 08:50:07 GMT")),
        Some(30),
        "HTTP date"
    );
    assert_eq!(limited(429, None), Some(60), "the SDKs' default");
    assert_eq!(limited(429, Some("soon")), Some(60));
    assert_eq!(limited(503, Some("120")), None);
    assert_eq!(limited(200, None), None);
}

#[test]
fn ui_platforms_have_their_own_category() {
    assert_eq!(category_for_platform("cocoa"), PROFILE_CHUNK_UI);
    assert_eq!(category_for_platform("javascript"), PROFILE_CHUNK_UI);
    assert_eq!(category_for_platform("node"), PROFILE_CHUNK);
    assert_eq!(category_for_platform("python"), PROFILE_CHUNK);
}

#[test]
fn status_classes() {
    assert_eq!(classify(200), Reply::Delivered);
    assert_eq!(classify(202), Reply::Delivered);
    assert!(matches!(classify(429), Reply::Throttled { .. }));
    assert!(matches!(classify(413), Reply::Refused { status: 413, .. }));
    assert!(matches!(classify(400), Reply::Refused { status: 400, .. }));
    for s in [301, 401, 403, 404, 408] {
        assert!(matches!(classify(s), Reply::Fatal { .. }), "{s}");
    }
    for s in [500, 502, 503, 504] {
        assert!(matches!(classify(s), Reply::Retry { .. }), "{s}");
    }
}
