use std::collections::BTreeMap;
use std::sync::Arc;

use crate::component::{
    ConnectorFactory, ExporterFactory, ExtensionFactory, ProcessorFactory, ReceiverFactory,
};
use crate::config::Kind;

/// Every component type the binary knows, by YAML type name.
#[derive(Default, Clone)]
pub struct Registry {
    pub receivers: BTreeMap<&'static str, Arc<dyn ReceiverFactory>>,
    pub processors: BTreeMap<&'static str, Arc<dyn ProcessorFactory>>,
    pub exporters: BTreeMap<&'static str, Arc<dyn ExporterFactory>>,
    pub extensions: BTreeMap<&'static str, Arc<dyn ExtensionFactory>>,
    pub connectors: BTreeMap<&'static str, Arc<dyn ConnectorFactory>>,
}

impl Registry {
    pub fn receiver(mut self, f: Arc<dyn ReceiverFactory>) -> Self {
        self.receivers.insert(f.type_name(), f);
        self
    }

    pub fn processor(mut self, f: Arc<dyn ProcessorFactory>) -> Self {
        self.processors.insert(f.type_name(), f.clone());
        for alias in f.aliases() {
            self.processors.insert(alias, f.clone());
        }
        self
    }

    pub fn exporter(mut self, f: Arc<dyn ExporterFactory>) -> Self {
        self.exporters.insert(f.type_name(), f.clone());
        for alias in f.aliases() {
            self.exporters.insert(alias, f.clone());
        }
        self
    }

    pub fn extension(mut self, f: Arc<dyn ExtensionFactory>) -> Self {
        self.extensions.insert(f.type_name(), f);
        self
    }

    pub fn connector(mut self, f: Arc<dyn ConnectorFactory>) -> Self {
        self.connectors.insert(f.type_name(), f.clone());
        for alias in f.aliases() {
            self.connectors.insert(alias, f.clone());
        }
        self
    }

    /// Known type names of one kind, sorted, for messages and `profcol components`.
    pub fn types(&self, kind: Kind) -> Vec<&'static str> {
        match kind {
            Kind::Receiver => self.receivers.keys().copied().collect(),
            Kind::Processor => self.processors.keys().copied().collect(),
            Kind::Exporter => self.exporters.keys().copied().collect(),
            Kind::Extension => self.extensions.keys().copied().collect(),
            Kind::Connector => self.connectors.keys().copied().collect(),
        }
    }
}
