use profcol_pipeline::config::{ComponentConfig, Duration, Kind};

use profcol_pipeline::runtime::create_exporter;

use super::super::*;

/// The exporter's own config, its DSN and the runtime's settings.
fn decode(yaml: &str) -> Result<(SentryExporterConfig, Dsn, ExporterSettings), String> {
    let cfg = ComponentConfig::from_yaml(Kind::Exporter, "sentry/prod", yaml)
        .map_err(|e| e.to_string())?;
    let (_, settings) = create_exporter(&*factory(), &cfg).map_err(|e| e.to_string())?;
    let (rest, _) = cfg.split_off(&profcol_pipeline::config::EXPORTER_SETTINGS_KEYS);
    let c: SentryExporterConfig = rest.decode().map_err(|e| e.to_string())?;
    let dsn = c.validate(&rest).map_err(|e| e.to_string())?;
    Ok((c, dsn, settings))
}

#[test]
fn defaults() {
    let cfg = ComponentConfig::from_yaml(Kind::Exporter, "sentry", "{}").unwrap();
    let c: SentryExporterConfig = cfg.decode().unwrap();
    assert_eq!(c, SentryExporterConfig::default());
    assert_eq!(c.compression, Compression::Gzip);
    assert_eq!(c.max_chunk_duration, Duration::from_secs(60));
    assert_eq!(c.max_samples_per_chunk, 100_000);
    assert_eq!((c.platform, c.environment, c.release), (None, None, None));
    let (_, _, s) = decode("dsn: https://k@h/1").unwrap();
    assert_eq!(s.timeout, std::time::Duration::from_secs(30));
    let r = &s.retry_on_failure;
    assert!(r.enabled);
    assert_eq!(
        (r.initial_interval, r.max_interval, r.max_elapsed_time),
        (
            Duration::from_secs(5),
            Duration::from_secs(30),
            Duration::from_secs(300)
        )
    );
    assert_eq!(
        (s.sending_queue.num_consumers, s.sending_queue.queue_size),
        (10, 1000)
    );
    let cfg = ComponentConfig::from_yaml(Kind::Exporter, "sentry", "{}").unwrap();
    assert_eq!(c_validate_err(&cfg), "exporters::sentry::dsn: is required");
}

fn c_validate_err(cfg: &ComponentConfig) -> String {
    let c: SentryExporterConfig = cfg.decode().unwrap();
    c.validate(cfg).unwrap_err().to_string()
}

#[test]
fn exact_decode() {
    let (c, dsn, s) = decode(
        r#"
dsn: https://abc123@o1.ingest.sentry.io/4507
compression: none
timeout: 10s
platform: go
environment: production
release: shop@1.2.3
max_chunk_duration: 30s
max_samples_per_chunk: 5000
retry_on_failure: {initial_interval: 1s, max_interval: 2s, max_elapsed_time: 1m}
sending_queue: {num_consumers: 2, queue_size: 10}
"#,
    )
    .unwrap();
    assert_eq!(c.compression, Compression::None);
    assert_eq!(s.timeout, std::time::Duration::from_secs(10));
    assert_eq!(c.platform.as_deref(), Some("go"));
    assert_eq!(c.environment.as_deref(), Some("production"));
    assert_eq!(c.release.as_deref(), Some("shop@1.2.3"));
    assert_eq!(c.max_chunk_duration, Duration::from_secs(30));
    assert_eq!(c.max_samples_per_chunk, 5000);
    assert_eq!(
        s.retry_on_failure.max_elapsed_time.get(),
        std::time::Duration::from_secs(60)
    );
    assert_eq!(s.sending_queue.queue_size, 10);
    assert_eq!(
        dsn.envelope_url(),
        "https://o1.ingest.sentry.io/api/4507/envelope/"
    );
}

#[test]
fn invalid_settings_name_their_key() {
    let dsn = "dsn: https://k@sentry.example.com/1\n";
    for (yaml, want) in [
        (
            "dsn: sentry.example.com/1".to_owned(),
            "exporters::sentry/prod::dsn: invalid DSN",
        ),
        (
            "dsn: ftp://k@h/1".to_owned(),
            "exporters::sentry/prod::dsn: DSN scheme must be http or https",
        ),
        (
            "dsn: https://sentry.example.com/1".to_owned(),
            "exporters::sentry/prod::dsn: DSN has no public key",
        ),
        (
            "dsn: https://k@sentry.example.com/".to_owned(),
            "exporters::sentry/prod::dsn: DSN must end in a numeric project id",
        ),
        (
            "dsn: https://k@sentry.example.com/proj".to_owned(),
            "numeric project id",
        ),
        (
            format!("{dsn}compression: zstd"),
            "exporters::sentry/prod::compression",
        ),
        (
            format!("{dsn}timeout: 0s"),
            "exporters::sentry/prod::timeout: must be greater than 0",
        ),
        (
            format!("{dsn}max_chunk_duration: 67s"),
            "exporters::sentry/prod::max_chunk_duration: must be greater than 0 and at most 66s",
        ),
        (
            format!("{dsn}max_chunk_duration: 0s"),
            "exporters::sentry/prod::max_chunk_duration",
        ),
        (
            format!("{dsn}max_samples_per_chunk: 0"),
            "exporters::sentry/prod::max_samples_per_chunk: must be greater than 0",
        ),
        (
            format!("{dsn}platform: Go Lang"),
            "exporters::sentry/prod::platform: \"Go Lang\" is not a Sentry platform",
        ),
        (
            format!("{dsn}platform: android"),
            "exporters::sentry/prod::platform: \"android\" chunks use another format",
        ),
        (
            format!("{dsn}environment: my env"),
            "exporters::sentry/prod::environment",
        ),
        (
            format!("{dsn}release: a/b"),
            "exporters::sentry/prod::release",
        ),
        (
            format!("{dsn}retry_on_failure: {{multiplier: 0.5}}"),
            "exporters::sentry/prod::retry_on_failure::multiplier: must be at least 1",
        ),
        (
            format!("{dsn}sending_queue: {{queue_size: 0}}"),
            "exporters::sentry/prod::sending_queue::queue_size: must be greater than 0",
        ),
        (
            format!("{dsn}max_chunk_duraton: 1s"),
            "exporters::sentry/prod: unknown field",
        ),
    ] {
        let err = decode(&yaml).unwrap_err();
        assert!(err.contains(want), "{yaml:?}: {err}");
    }
    // Every problem at once.
    let err = decode("timeout: 0s\nmax_samples_per_chunk: 0").unwrap_err();
    assert!(
        err.contains("dsn: is required")
            && err.contains("timeout")
            && err.contains("max_samples_per_chunk"),
        "{err}"
    );
}

#[test]
fn dsn_gives_url_auth_and_header_value() {
    let d = Dsn::parse("https://abc123@o447951.ingest.us.sentry.io/4507").unwrap();
    assert_eq!(d.public_key(), "abc123");
    assert_eq!(d.project_id(), "4507");
    assert_eq!(
        d.envelope_url(),
        "https://o447951.ingest.us.sentry.io/api/4507/envelope/"
    );
    assert_eq!(
        d.auth_header("profcol/0.1.0"),
        "Sentry sentry_key=abc123, sentry_version=7, sentry_client=profcol/0.1.0"
    );
    assert_eq!(
        d.to_string(),
        "https://abc123@o447951.ingest.us.sentry.io/4507"
    );

    // Self-hosted: port, path prefix, legacy secret (kept out of the header value).
    let d = Dsn::parse("http://pub:sec@sentry.internal:9000/sentry/12/").unwrap();
    assert_eq!(
        d.envelope_url(),
        "http://sentry.internal:9000/sentry/api/12/envelope/"
    );
    assert!(d.auth_header("x").ends_with(", sentry_secret=sec"));
    assert_eq!(d.to_string(), "http://pub@sentry.internal:9000/sentry/12");
    // The scheme's default port is not repeated.
    assert_eq!(
        Dsn::parse("https://k@h:443/1").unwrap().envelope_url(),
        "https://h/api/1/envelope/"
    );
    assert!(Dsn::parse("https://k@h/1?x=y").is_err());
}

#[test]
fn factory_builds_from_yaml() {
    let cfg =
        ComponentConfig::from_yaml(Kind::Exporter, "sentry", "dsn: https://k@h/1\ntimeout: 2s")
            .unwrap();
    let (_, settings) = create_exporter(&*factory(), &cfg).unwrap();
    assert_eq!(settings.timeout, std::time::Duration::from_secs(2));
    assert_eq!(factory().type_name(), "sentry");
    let bad = ComponentConfig::from_yaml(Kind::Exporter, "sentry", "dsn: nope").unwrap();
    assert!(create_exporter(&*factory(), &bad).is_err());
}

/// What `profcol validate` reports: the factory lists every problem of the
/// section, the decode error of one key included, not just the first.
#[test]
fn every_problem_of_a_section_is_reported_at_once() {
    let cfg = ComponentConfig::from_yaml(
        Kind::Exporter,
        "sentry/prod",
        "compression: zstd\ndsn: sentry.example.com/1\nplatform: Android\nenvironment: \"a b\"\n",
    )
    .unwrap();
    let err = match create_exporter(&*factory(), &cfg) {
        Err(e) => e,
        Ok(_) => panic!("accepted a bad config"),
    };
    let paths: Vec<&str> = err.0.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "exporters::sentry/prod::compression",
            "exporters::sentry/prod::dsn",
            "exporters::sentry/prod::platform",
            "exporters::sentry/prod::environment",
        ],
        "{err}"
    );
    assert!(
        err.0[0]
            .message
            .starts_with(r#"unknown value "zstd", expected one of"#),
        "{err}"
    );
    assert!(err.0[1].message.starts_with("invalid DSN"), "{err}");
    assert!(
        err.0[2]
            .message
            .starts_with(r#""Android" is not a Sentry platform"#),
        "{err}"
    );
    assert!(
        err.0[3]
            .message
            .starts_with(r#""a b" is not a valid Sentry environment"#),
        "{err}"
    );
    // A key that failed to decode is reported once, not again as the
    // default it fell back to (`dsn` empty: "is required").
    let cfg =
        ComponentConfig::from_yaml(Kind::Exporter, "sentry", "dsn: [x]\ntimeout: 0s\n").unwrap();
    let err = create_exporter(&*factory(), &cfg)
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        err,
        "exporters::sentry::dsn: invalid type: expected a string, got a list\n\
         exporters::sentry::timeout: must be greater than 0"
    );
}
