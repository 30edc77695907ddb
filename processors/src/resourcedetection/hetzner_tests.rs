//! The `hetzner` detector against a fake Hetzner Cloud metadata service.

use super::tests::{fake_http, make, metadata_host, resources, FakeHost};

/// A metadata service answering each value's `GET` from `answer(name)`
/// (`/hetzner/v1/metadata/<name>`), 404 elsewhere; the requests it saw
/// (`METHOD path user-agent`) come back through the channel.
fn hetzner(
    answer: fn(&str) -> (u16, &'static str),
) -> (FakeHost, std::sync::mpsc::Receiver<String>) {
    let (at, seen) = fake_http(move |method, path, headers| {
        let (status, body) = match (method, path.strip_prefix("/hetzner/v1/metadata/")) {
            ("GET", Some(name)) => answer(name),
            _ => (404, "not found"),
        };
        let agent = headers
            .iter()
            .find_map(|h| h.strip_prefix("user-agent: "))
            .unwrap_or("-");
        (
            status,
            "",
            body.to_string(),
            format!("{method} {path} {agent}"),
        )
    });
    (metadata_host(&at), seen)
}

/// The SDK detector's test server.
fn server(name: &str) -> (u16, &'static str) {
    match name {
        "hostname" => (200, "srv-123"),
        "instance-id" => (200, "987654321"),
        "region" => (200, "nbg1"),
        "availability-zone" => (200, "nbg1-dc3\n"),
        _ => (404, "not found"),
    }
}

#[test]
fn hetzner_reads_the_server_metadata() {
    let (h, seen) = hetzner(server);
    // cloud.platform is off by default, as in the Collector; the order is
    // the SDK resource's, sorted by key.
    let r = resources("detectors: [hetzner]", &h);
    assert_eq!(
        r[0][2..],
        [
            "cloud.availability_zone=nbg1-dc3",
            "cloud.provider=hetzner",
            "cloud.region=nbg1",
            "host.id=987654321",
            "host.name=srv-123",
        ],
        "{r:?}"
    );
    assert_eq!(
        seen.try_iter().collect::<Vec<_>>(),
        [
            "GET /hetzner/v1/metadata/hostname hcloud-go/2.47.0",
            "GET /hetzner/v1/metadata/instance-id hcloud-go/2.47.0",
            "GET /hetzner/v1/metadata/region hcloud-go/2.47.0",
            "GET /hetzner/v1/metadata/availability-zone hcloud-go/2.47.0",
        ]
    );
    let r = resources(
        "detectors: [hetzner]\nhetzner: {resource_attributes: \
         {cloud.platform: {enabled: true}, host.name: {enabled: false}}}",
        &h,
    );
    assert_eq!(
        r[0][2..],
        [
            "cloud.availability_zone=nbg1-dc3",
            "cloud.platform=hetzner.cloud_server",
            "cloud.provider=hetzner",
            "cloud.region=nbg1",
            "host.id=987654321",
        ],
        "{r:?}"
    );
    let e = make(
        "detectors: [hetzner]\nhetzner: {resource_attributes: {host.type: {enabled: true}}}",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("processors::resourcedetection::hetzner::resource_attributes::host.type: unknown attribute"),
        "{e}"
    );
}

#[test]
fn hetzner_leaves_out_what_it_cannot_read_even_when_metadata_must_be_there() {
    // The SDK detector's partial test: only the host name answers; an
    // instance id that is not a number is left out too.
    let (h, _) = hetzner(|name| match name {
        "hostname" => (200, "srv-456"),
        "instance-id" => (200, "not-a-number"),
        _ => (500, "unavailable"),
    });
    for yaml in [
        "detectors: [hetzner]",
        "detectors: [hetzner]\nfail_on_missing_metadata: true",
    ] {
        let r = resources(yaml, &h);
        assert_eq!(
            r[0][2..],
            ["cloud.provider=hetzner", "host.name=srv-456"],
            "{yaml}: {r:?}"
        );
    }
}

#[test]
fn hetzner_off_hetzner_finds_nothing_unless_metadata_must_be_there() {
    // No service (port 9), a 404 for the host name, an empty host name.
    let (not_found, _) = hetzner(|_| (404, "not found"));
    let (empty, _) = hetzner(|name| match name {
        "hostname" => (200, " \n"),
        _ => server(name),
    });
    for h in [metadata_host("127.0.0.1:9"), not_found, empty] {
        let r = resources("detectors: [hetzner, env]", &h);
        assert_eq!(r[0][2..], ["team=a"], "{r:?}");
        let e = make(
            "detectors: [env, hetzner]\ntimeout: 1s\nfail_on_missing_metadata: true",
            &h,
        )
        .err()
        .unwrap();
        assert!(
            e.contains("processors::resourcedetection::detectors::1: failed to detect: hetzner metadata unavailable"),
            "{e}"
        );
    }
}
