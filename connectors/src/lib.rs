//! Connectors: each an exporter of the pipelines that list it under
//! `exporters` and a receiver of those that list it under `receivers`, in a
//! folder named after its YAML type. The runtime moves the data; a
//! connector's factory says which signals it connects and what it does.

#![deny(unsafe_code)]

pub mod forward;
pub mod signaltometrics;
