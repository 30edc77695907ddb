//! The one place that knows every component type.

use profcol_pipeline::runtime::Registry;

pub fn registry() -> Registry {
    Registry::default()
        .receiver(profcol_receivers::otlp::factory())
        .receiver(profcol_receivers::sentry::factory())
        .receiver(profcol_receivers::pyroscope::factory())
        .receiver(profcol_receivers::kafka::factory())
        .processor(profcol_processors::memory_limiter::factory())
        .processor(profcol_processors::batch::factory())
        .processor(profcol_processors::dictionary_dedup::factory())
        .processor(profcol_processors::unit_normalization::factory())
        .processor(profcol_processors::thread_pruning::factory())
        .processor(profcol_processors::sampling::factory())
        .processor(profcol_processors::probabilistic_sampler::factory())
        .processor(profcol_processors::transform::factory())
        .processor(profcol_processors::filter::factory())
        .processor(profcol_processors::resource::factory())
        .processor(profcol_processors::attributes::factory())
        .processor(profcol_processors::resourcedetection::factory())
        .exporter(profcol_exporters::otlp::factory())
        .exporter(profcol_exporters::otlphttp::factory())
        .exporter(profcol_exporters::debug::factory())
        .exporter(profcol_exporters::sentry::factory())
        .exporter(profcol_exporters::pprof::factory())
        .exporter(profcol_exporters::file::factory())
        .exporter(profcol_exporters::loadbalancing::factory())
        .exporter(profcol_exporters::kafka::factory())
        .extension(profcol_extensions::health_check::factory())
        .extension(profcol_extensions::bearertokenauth::factory())
        .extension(profcol_extensions::file_storage::factory())
}
