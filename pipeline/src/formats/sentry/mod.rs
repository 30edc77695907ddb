//! Sentry envelopes, profile chunks (v2) and legacy profiles (v1) <-> OTLP.
