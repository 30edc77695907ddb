use serde::{Deserialize, Serialize};

pub(super) use super::units::Target;

/// `processors: unit_normalization:`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UnitNormalizationConfig {
    /// Vocabulary every known unit is rewritten to.
    pub target: Target,
    /// Also convert values to the base unit of their dimension (ns, bytes,
    /// Hz): sample values, `period` and numeric attribute values.
    pub scale_to_base: bool,
    /// Turn `samples`/`count` profiles with a time `period_type` into time
    /// profiles (`cpu`/`ns`, `wall`/`ns`): each observation is worth one period.
    /// A count profile whose scope already holds that time profile over the
    /// same window (a pprof CPU profile's `cpu`/`nanoseconds`) is left as is.
    pub samples_to_time: bool,
}

impl Default for UnitNormalizationConfig {
    fn default() -> Self {
        Self {
            target: Target::Ucum,
            scale_to_base: false,
            samples_to_time: false,
        }
    }
}
