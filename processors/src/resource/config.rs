//! The `resource` section: `attributes`, a list of `attraction` actions.

use serde::{Deserialize, Serialize};

use crate::attraction::ActionConfig;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResourceConfig {
    pub attributes: Vec<ActionConfig>,
}
