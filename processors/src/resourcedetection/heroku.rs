//! The `heroku` detector (the Collector's `internal/heroku`): the app's
//! attributes from the variables Heroku's dyno metadata sets. Without
//! `HEROKU_DYNO_ID` and `HEROKU_APP_ID` it fails with
//! `fail_on_missing_metadata`; otherwise it sets what it finds, as the
//! Collector's does.

use profcol_model::proto::KeyValue;

use super::detect::{enabled, text, Host};

/// The attributes, in the order the Collector sets them, all on by
/// default (`heroku.dyno.id` is one of its attributes it never sets).
pub(super) const ATTRIBUTES: [(&str, bool); 8] = [
    ("service.instance.id", true),
    ("heroku.app.id", true),
    ("cloud.provider", true),
    ("service.name", true),
    ("heroku.release.creation_timestamp", true),
    ("service.version", true),
    ("heroku.release.commit", true),
    ("heroku.dyno.id", true),
];

pub(super) fn detect(host: &dyn Host, on: &[bool; 8], fail: bool) -> Result<Vec<KeyValue>, String> {
    let env = |k: &str| host.env(k);
    let (dyno, app) = (env("HEROKU_DYNO_ID"), env("HEROKU_APP_ID"));
    if dyno.is_none() && app.is_none() {
        if fail {
            return Err(
                "heroku metadata unavailable: HEROKU_DYNO_ID and HEROKU_APP_ID env vars not set"
                    .into(),
            );
        }
        tracing::debug!("Heroku metadata is missing. Please check metadata is enabled.");
    }
    let provider = app.as_ref().map(|_| "heroku".to_string());
    let values = [
        dyno,
        app,
        provider,
        env("HEROKU_APP_NAME"),
        env("HEROKU_RELEASE_CREATED_AT"),
        env("HEROKU_RELEASE_VERSION"),
        env("HEROKU_SLUG_COMMIT"),
        None,
    ];
    Ok(enabled(
        ATTRIBUTES.map(|(k, _)| k),
        values.map(|v| v.map(text)),
        on,
    ))
}
