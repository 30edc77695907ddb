//! `forward`: hands every batch one pipeline exports, unchanged, to the
//! pipelines of the same signal it is a receiver of (the Collector's
//! `forwardconnector`). No keys.

use std::sync::Arc;

use profcol_pipeline::component::{Connector, ConnectorFactory};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Signal};
use serde::Deserialize;

/// The Collector's `forward` has no settings; any key is refused.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ForwardConfig {}

struct ForwardFactory;

pub fn factory() -> Arc<dyn ConnectorFactory> {
    Arc::new(ForwardFactory)
}

impl ConnectorFactory for ForwardFactory {
    fn type_name(&self) -> &'static str {
        "forward"
    }

    fn signals(&self) -> &'static [(Signal, Signal)] {
        &[(Signal::Profiles, Signal::Profiles)]
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Connector, ConfigErrors> {
        cfg.decode::<ForwardConfig>()?;
        Ok(Connector::Forward)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profcol_pipeline::config::Kind;

    #[test]
    fn takes_no_keys() {
        let cfg = ComponentConfig::from_yaml(Kind::Connector, "forward", "{}").unwrap();
        assert_eq!(factory().create(&cfg).unwrap(), Connector::Forward);
        let cfg = ComponentConfig::from_yaml(Kind::Connector, "forward", "{foo: 1}").unwrap();
        let err = factory().create(&cfg).unwrap_err().to_string();
        assert_eq!(
            err,
            "connectors::forward: unknown field \"foo\", there are no fields"
        );
    }
}
