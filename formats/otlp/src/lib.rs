//! OTLP profiles in the forms profcol reads and writes besides the current
//! protobuf: the earlier opentelemetry-proto revisions ([`revisions`],
//! generated at build time from the descriptors in `proto/revisions/`) and
//! OTLP/JSON ([`json`]), both translated to and from the v1.10.0 model of
//! `profcol-model`, the records of the `file` exporter ([`file`]), and the
//! development version that OTLP transports carry ([`development_version`]).
//! Pure: no I/O.

pub mod development_version;
pub mod file;
pub mod json;
pub mod revisions;
