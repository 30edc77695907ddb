//! The test-file format of `profcol test`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::stacks::StackSpec;

/// One YAML test file: a pipeline config and the tests run against it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestFile {
    /// Path to a config (relative to the test file) or the config inline;
    /// may be left out when every test has its own.
    #[serde(default)]
    pub config: Option<ConfigSource>,
    pub tests: Vec<TestCase>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum ConfigSource {
    Path(PathBuf),
    Inline(serde_yaml_ng::Value),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestCase {
    pub name: String,
    /// Replaces the file's `config` for this test.
    #[serde(default)]
    pub config: Option<ConfigSource>,
    pub inputs: Vec<InputSpec>,
    /// Per exporter id, what it must have been given.
    pub expect: BTreeMap<String, Expectation>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    /// Receiver id (`otlp`, `sentry/mobile`) that gets the payload.
    pub receiver: String,
    /// Payload file, relative to the test file.
    pub file: PathBuf,
    /// Overrides the format guessed from the file name.
    #[serde(default)]
    pub format: Option<InputFormat>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputFormat {
    /// One `ExportProfilesServiceRequest` in protobuf (`.binpb`, `.bin`,
    /// `.pb`). A file starting with a byte no protobuf message starts with
    /// (below 0x08) is the `file` exporter's length-prefixed output instead,
    /// and every request in it is sent.
    OtlpProto,
    /// One OTLP/JSON request (`.json`), possibly pretty-printed. A file
    /// holding several JSON values is the `file` exporter's JSON lines
    /// instead, and every request in it is sent.
    OtlpJson,
    /// What the `file` exporter writes: JSON lines or length-prefixed protobuf.
    OtlpFile,
    /// A Sentry envelope as the parser sees it (`.envelope`).
    SentryEnvelope,
    /// A recorded HTTP request: `NNNN.meta.json` with its body
    /// (`NNNN.body.bin` as sent, or `NNNN.envelope` decoded). The same
    /// recording goes to a `pyroscope` receiver as what it is.
    SentryRequest,
    /// A recorded Pyroscope request (`NNNN.meta.json` + `NNNN.body.bin`),
    /// read as [`InputFormat::SentryRequest`] is.
    PyroscopeRequest,
    /// A pprof profile, gzip'd or not (`.pb.gz`, `.pprof`).
    Pprof,
}

impl InputFormat {
    pub fn guess(path: &Path) -> Option<Self> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        let ends = |s: &str| name.ends_with(s);
        Some(if ends(".meta.json") || ends(".body.bin") {
            Self::SentryRequest
        } else if ends(".envelope") {
            Self::SentryEnvelope
        } else if ends(".pb.gz") || ends(".pprof") || ends(".pprof.gz") {
            Self::Pprof
        } else if ends(".jsonl") || ends(".zst") {
            Self::OtlpFile
        } else if ends(".json") {
            Self::OtlpJson
        } else if ends(".binpb") || ends(".bin") || ends(".pb") {
            Self::OtlpProto
        } else {
            return None;
        })
    }
}

/// What one exporter must have received. Every field is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    /// Number of OTLP Profiles.
    pub profiles: Option<u64>,
    /// Number of observations, as every profcol metric counts them: each
    /// OTLP `Sample` counts `max(len(values), len(timestamps), 1)`, so a
    /// Sentry input gives its number of Sentry samples.
    pub samples: Option<u64>,
    /// Sum of sample values per sample type, keyed `type/unit` or `type`.
    #[serde(default)]
    pub sample_totals: BTreeMap<String, i64>,
    /// Stacks that must be present: the folded line
    /// `root;...;leaf [attributes] VALUE` (without attributes any match;
    /// without VALUE any value), or a hand-written form ([`StackSpec`]).
    #[serde(default)]
    pub stacks: Vec<StackSpec>,
    /// Stacks that must not be present (same forms).
    #[serde(default)]
    pub absent_stacks: Vec<StackSpec>,
    /// `key` or `key=value` present on a resource, scope, profile or sample.
    #[serde(default)]
    pub attributes: Vec<String>,
    #[serde(default)]
    pub absent_attributes: Vec<String>,
    /// `profile_chunk` items a `sentry` exporter sent.
    pub sentry_chunks: Option<u64>,
    /// Files a `pprof` exporter wrote.
    pub pprof_files: Option<u64>,
    /// File (relative to the test file) with the resolved view of everything
    /// the exporter received; `--update` rewrites it.
    pub snapshot: Option<PathBuf>,
}
