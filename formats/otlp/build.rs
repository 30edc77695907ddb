//! Generates the `profiles/v1development` messages of the older
//! opentelemetry-proto revisions profcol reads, one module each, from the
//! descriptor sets in `proto/revisions/` (see the README there for where
//! each comes from). `compile_fds` needs no `protoc`.
//!
//! Messages whose wire form is the same as in v1.10.0 are not generated
//! again: they map to the v1.10.0 types, so translating them costs nothing.
//! `profcol_otlp::revisions` tests that each of them really is the same.

use std::path::PathBuf;

use prost::Message;

const PACKAGE: &str = ".opentelemetry.proto.profiles.v1development";

/// (revision, module, messages shared with v1.10.0).
const REVISIONS: [(&str, &str, &[&str]); 3] = [
    ("v1.7.0", "v1_7", &["Function", "Line", "Link"]),
    (
        "v1.8.0",
        "v1_8",
        &[
            "ProfilesDictionary",
            "Mapping",
            "Location",
            "Line",
            "Function",
            "Link",
            "KeyValueAndUnit",
            "Stack",
        ],
    ),
    (
        "v1.9.0",
        "v1_9",
        &[
            "ProfilesDictionary",
            "Mapping",
            "Location",
            "Line",
            "Function",
            "Link",
            "KeyValueAndUnit",
            "Stack",
            "ValueType",
        ],
    ),
];

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    for (revision, module, shared) in REVISIONS {
        let path = format!("proto/revisions/{revision}.binpb");
        println!("cargo:rerun-if-changed={path}");
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let fds = prost_types::FileDescriptorSet::decode(bytes.as_slice())
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        let dir = out.join(module);
        std::fs::create_dir_all(&dir).expect("OUT_DIR is writable");
        let mut config = prost_build::Config::new();
        config
            .out_dir(&dir)
            // common.proto and resource.proto only gained fields since
            // v1.7.0: the v1.10.0 types read every older revision.
            .extern_path(
                ".opentelemetry.proto.common.v1",
                "profcol_model::proto::common",
            )
            .extern_path(
                ".opentelemetry.proto.resource.v1",
                "profcol_model::proto::resource",
            );
        for m in shared {
            config.extern_path(
                format!("{PACKAGE}.{m}"),
                format!("profcol_model::proto::profiles::{m}"),
            );
        }
        config
            .compile_fds(fds)
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        let list = shared
            .iter()
            .map(|m| format!("{m:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        std::fs::write(
            dir.join("shared.rs"),
            format!(
                "/// Messages that are v1.10.0's types.\npub const SHARED: &[&str] = &[{list}];\n"
            ),
        )
        .expect("OUT_DIR is writable");
    }
}
