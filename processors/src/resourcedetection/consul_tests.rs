//! The `consul` detector against a fake Consul agent.

use super::tests::{fake_http, host, make, resources, FakeHost};

const AGENT_SELF: &str = r#"{"Config":{"Datacenter":"dc1","NodeName":"node-a","NodeID":"00000000-0000-0000-0000-00000000000a","Revision":"x","Server":false},"Meta":{"env":"prod","rack":"r1","owner":"team-a"},"Member":{}}"#;

/// A fake agent answering `GET /v1/agent/self` with `status` and `body`;
/// each request's path and token header come back through the channel.
/// The host's `CONSUL_HTTP_ADDR` points at it.
fn agent(status: u16, body: &'static str) -> (FakeHost, std::sync::mpsc::Receiver<String>) {
    let (at, seen) = fake_http(move |method, path, headers| {
        let token = headers
            .iter()
            .find_map(|h| h.strip_prefix("x-consul-token: "))
            .unwrap_or("-");
        let (status, body) = if path.starts_with("/v1/agent/self") {
            (status, body.to_string())
        } else {
            (404, String::new())
        };
        (status, "", body, format!("{method} {path} {token}"))
    });
    let mut h = host();
    h.env.clear();
    h.env
        .insert("CONSUL_HTTP_ADDR", Box::leak(at.into_boxed_str()));
    (h, seen)
}

#[test]
fn consul_reads_the_agents_node() {
    let (h, seen) = agent(200, AGENT_SELF);
    let r = resources("detectors: [consul]", &h);
    assert_eq!(
        r[0][2..],
        [
            "host.name=node-a",
            "cloud.region=dc1",
            "host.id=00000000-0000-0000-0000-00000000000a"
        ],
        "{r:?}"
    );
    assert_eq!(
        seen.try_iter().collect::<Vec<_>>(),
        ["GET /v1/agent/self -"]
    );
    // The metadata keys listed, unprefixed; the token, datacenter and
    // namespace asked with; an attribute off.
    let r = resources(
        "detectors: [consul]\nconsul: {token: s3cret, datacenter: dc2, namespace: ns1, \
         meta: {env: '', owner: ''}, resource_attributes: {host.id: {enabled: false}}}",
        &h,
    );
    assert_eq!(
        r[0][2..],
        [
            "host.name=node-a",
            "cloud.region=dc1",
            "env=prod",
            "owner=team-a"
        ],
        "{r:?}"
    );
    assert_eq!(
        seen.try_iter().collect::<Vec<_>>(),
        ["GET /v1/agent/self?dc=dc2&ns=ns1 s3cret"]
    );
}

#[test]
fn consul_settings_and_variables() {
    let (mut h, seen) = agent(200, AGENT_SELF);
    // The variables fill what the section leaves; a token file wins over
    // a token.
    h.env.insert("CONSUL_HTTP_TOKEN", "from-env");
    h.env.insert("CONSUL_NAMESPACE", "ns-env");
    make("detectors: [consul]", &h).unwrap();
    h.files.insert("/etc/consul/token", " from-file\n");
    make(
        "detectors: [consul]\nconsul: {token: from-section, token_file: /etc/consul/token}",
        &h,
    )
    .unwrap();
    assert_eq!(
        seen.try_iter().collect::<Vec<_>>(),
        [
            "GET /v1/agent/self?ns=ns-env from-env",
            "GET /v1/agent/self?ns=ns-env from-file"
        ]
    );
    // The section's address wins over the variable's, with its scheme.
    let addr = h.env["CONSUL_HTTP_ADDR"];
    h.env.insert("CONSUL_HTTP_ADDR", "127.0.0.1:9");
    let r = resources(
        &format!("detectors: [consul]\nconsul: {{address: 'http://{addr}'}}"),
        &h,
    );
    assert_eq!(r[0][2], "host.name=node-a", "{r:?}");
    for (yaml, var, want) in [
        ("consul: {token_file: /nope}", None, "failed creating detector: failed creating consul client: Error loading token file /nope"),
        ("consul: {address: 'ftp://x'}", None, "Unknown protocol scheme: ftp"),
        ("consul: {address: 'unix:///run/consul.sock'}", None, "does not reach the agent over a unix socket"),
        ("consul: {}", Some(("CONSUL_CLIENT_CERT", "/c.pem")), "CONSUL_CLIENT_CERT is set: profcol's consul detector does not support it"),
        ("consul: {}", Some(("CONSUL_HTTP_SSL", "maybe")), "could not parse CONSUL_HTTP_SSL"),
        ("consul: {}", Some(("CONSUL_CACERT", "/nope.pem")), "open /nope.pem"),
    ] {
        let mut h = h.clone();
        if let Some((k, v)) = var {
            h.env.insert(k, v);
        }
        let e = make(&format!("detectors: [consul]\n{yaml}"), &h)
            .err()
            .unwrap_or_else(|| panic!("{yaml} loaded"));
        assert!(e.contains("detectors::0: failed creating detector:") && e.contains(want), "{e}");
    }
}

#[test]
fn consul_without_an_agent_finds_nothing_unless_metadata_must_be_there() {
    for (status, body, want) in [
        (
            403,
            "ACL not found",
            "failed to get local agent information: Unexpected response code: 403 (ACL not found)",
        ),
        (200, "{not json", "failed to get local agent information:"),
        (
            200,
            r#"{"Member":{}}"#,
            "failed getting consul agent configuration. was 'Config' returned by consul?",
        ),
        (
            200,
            r#"{"Config":{"Datacenter":"dc1","NodeID":"x"}}"#,
            "failed getting consul hostname. was 'NodeName' returned by consul?",
        ),
        (
            200,
            r#"{"Config":{"Datacenter":"dc1","NodeName":"n","NodeID":7}}"#,
            "failed getting node ID. was 'NodeID' returned by consul?",
        ),
        (
            200,
            r#"{"Config":{"Datacenter":"dc1","NodeName":"n","NodeID":"x"},"Meta":{"env":1}}"#,
            "consul node metadata \"env\" is not a string",
        ),
    ] {
        let (h, _) = agent(status, body);
        let base = "detectors: [consul]\nconsul: {meta: {env: x}}";
        assert_eq!(resources(base, &h)[0].len(), 2, "{body}");
        let e = make(
            &format!("{base}\ntimeout: 1s\nfail_on_missing_metadata: true"),
            &h,
        )
        .err()
        .unwrap();
        assert!(
            e.contains(&format!(
                "detectors::0: failed to detect: failed to get consul metadata: {want}"
            )),
            "{e}"
        );
    }
    // No agent listening.
    let mut h = host();
    h.env.clear();
    h.env.insert("CONSUL_HTTP_ADDR", "127.0.0.1:9");
    assert_eq!(resources("detectors: [consul]", &h)[0].len(), 2);
}
