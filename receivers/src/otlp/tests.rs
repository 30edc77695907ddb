use profcol_pipeline::config::{ComponentConfig, Kind};

use super::*;

fn decode(yaml: &str) -> Result<OtlpReceiverConfig, String> {
    let cfg =
        ComponentConfig::from_yaml(Kind::Receiver, "otlp", yaml).map_err(|e| e.to_string())?;
    let c: OtlpReceiverConfig = cfg.decode().map_err(|e| e.to_string())?;
    c.validate(&cfg).map_err(|e| e.to_string())?;
    Ok(c)
}

#[test]
fn empty_and_null_grpc_take_the_defaults() {
    for yaml in ["{}", "protocols:\n  grpc:\n", "protocols: {grpc: {}}"] {
        let c = decode(yaml).unwrap();
        assert_eq!(c.grpc(), GrpcConfig::default(), "{yaml}");
        assert_eq!(c.grpc().endpoint, "0.0.0.0:4317");
        assert_eq!(c.grpc().max_recv_msg_size_mib, 64);
    }
}

#[test]
fn exact_decode() {
    let c = decode("protocols:\n  grpc:\n    endpoint: localhost:5317\n    max_recv_msg_size_mib: 8\n    max_concurrent_streams: 16\n").unwrap();
    assert_eq!(
        c.grpc(),
        GrpcConfig {
            endpoint: "localhost:5317".into(),
            max_recv_msg_size_mib: 8,
            max_concurrent_streams: 16,
            transport: "tcp".into(),
        }
    );
}

#[test]
fn invalid_settings_name_their_key() {
    for (yaml, want) in [
        (
            "protocols: {grpc: {endpoint: nope}}",
            "receivers::otlp::protocols::grpc::endpoint: invalid endpoint \"nope\"",
        ),
        (
            "protocols: {grpc: {endpoint: \":99999\"}}",
            "receivers::otlp::protocols::grpc::endpoint: invalid endpoint \":99999\": bad port",
        ),
        (
            "protocols: {grpc: {max_recv_msg_size_mib: 0}}",
            "receivers::otlp::protocols::grpc::max_recv_msg_size_mib: must be between 1 and 4095",
        ),
        (
            "protocols: {grpc: {endpoint: a:1, max_recv_msg_sise_mib: 3}}",
            "receivers::otlp::protocols::grpc: unknown field",
        ),
        (
            "protocols: {grpc: {transport: unix}}",
            "receivers::otlp::protocols::grpc::transport: unsupported transport",
        ),
    ] {
        let err = decode(yaml).unwrap_err();
        assert!(err.contains(want), "{yaml}: {err}");
    }
}
