//! Tests of the Sentry conversion against recorded SDK payloads and Relay's rules.

mod android;
mod envelope;
mod export;
mod perfetto;
mod receive;
mod relay;
mod support;
