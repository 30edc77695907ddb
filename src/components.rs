//! The one place that knows every component type.

use profcol_pipeline::runtime::Registry;

pub fn registry() -> Registry {
    Registry::default()
        .receiver(profcol_receivers::otlp::factory())
        .receiver(profcol_receivers::sentry::factory())
        .exporter(profcol_exporters::otlp::factory())
        .exporter(profcol_exporters::debug::factory())
        .extension(crate::health_check::factory())
}
