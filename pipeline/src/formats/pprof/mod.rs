//! pprof (`perftools.profiles.Profile`) <-> OTLP.
