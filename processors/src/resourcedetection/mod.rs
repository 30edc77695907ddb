//! Processor `resourcedetection`: the Collector's processor of that name
//! (`processor/resourcedetectionprocessor`) with its `env`, `system`,
//! `docker`, `k8s_api` (and its deprecated alias `k8snode`), `kubeadm`,
//! `openshift`, `consul`, `ec2`, `ecs`, `elastic_beanstalk`, `azure`,
//! `aks`, `azureappservice`, `azurecontainerapps`, `gcp`, `lambda`,
//! `heroku`, `dynatrace`, `akamai`, `nova`, `alibaba_ecs`, `tencent_cvm`,
//! `ibmcloud_classic`, `ibmcloud_vpc`, `digitalocean`, `upcloud`,
//! `hetzner`, `vultr`, `scaleway` and `oraclecloud` detectors. Detection
//! runs once, when the processor is made (as the Collector runs it at
//! start); each batch then only merges the detected attributes into every
//! resource, replacing a resource's own values unless `override: false`.

mod akamai;
mod aks;
mod alibaba_ecs;
mod appservice;
mod azure;
mod config;
mod consul;
mod containerapps;
mod detect;
mod digitalocean;
mod docker;
mod dynatrace;
mod ec2;
mod ecs;
mod elasticbeanstalk;
mod gcp;
mod heroku;
mod hetzner;
mod http;
mod ibmcloud_classic;
mod ibmcloud_vpc;
mod k8sapi;
mod kubeadm;
mod lambda;
mod nova;
mod openshift;
mod oraclecloud;
mod scaleway;
mod tencent_cvm;
mod upcloud;
mod vultr;

#[cfg(test)]
mod consul_tests;
#[cfg(test)]
mod digitalocean_tests;
#[cfg(test)]
mod ecs_tests;
#[cfg(test)]
mod gcp_tests;
#[cfg(test)]
mod hetzner_tests;
#[cfg(test)]
mod kube_tests;
#[cfg(test)]
mod metadata_tests;
#[cfg(test)]
mod oraclecloud_tests;
#[cfg(test)]
mod scaleway_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod upcloud_tests;
#[cfg(test)]
mod vultr_tests;

use std::sync::Arc;

use profcol_model::proto::KeyValue;
use profcol_model::ProfileBatch;
use profcol_ottl::value::{map_get, map_put};
use profcol_pipeline::component::{ProcessContext, Processor, ProcessorFactory, Verdict};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

pub use config::ResourceDetectionConfig;
use detect::{Host, RealHost};

pub struct ResourceDetectionFactory;

impl ProcessorFactory for ResourceDetectionFactory {
    fn type_name(&self) -> &'static str {
        "resourcedetection"
    }

    /// v0.161.0's name; `resourcedetection` is its deprecated alias there.
    fn aliases(&self) -> &'static [&'static str] {
        &["resource_detection"]
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Processor>, ConfigErrors> {
        create_with(cfg, &RealHost)
    }

    /// The config only: the Collector detects when it starts, which
    /// `validate` and an unused id never do.
    fn check(&self, cfg: &ComponentConfig) -> Result<Box<dyn Processor>, ConfigErrors> {
        let (_, plan) = cfg.decode_checked(|c: &ResourceDetectionConfig| c.compile(cfg))?;
        Ok(Box::new(ResourceDetection {
            detected: Vec::new(),
            override_existing: plan.override_existing,
        }))
    }
}

pub fn factory() -> Arc<dyn ProcessorFactory> {
    Arc::new(ResourceDetectionFactory)
}

fn create_with(cfg: &ComponentConfig, host: &dyn Host) -> Result<Box<dyn Processor>, ConfigErrors> {
    let (_, plan) = cfg.decode_checked(|c: &ResourceDetectionConfig| c.compile(cfg))?;
    let (detected, failures) = detect::detect(&plan, host);
    // As the Collector: a detector that cannot be set up fails the start;
    // one that failed to detect fails it with `fail_on_missing_metadata`,
    // else the pipeline runs with what the others found.
    let mut errs = ConfigErrors::default();
    for f in failures {
        let at = cfg.key_path(&format!("detectors::{}", f.at));
        if f.setup {
            errs.push(at, format!("failed creating detector: {}", f.error));
        } else if plan.fails_on_missing_metadata(plan.detectors[f.at]) {
            errs.push(at, format!("failed to detect: {}", f.error));
        } else {
            tracing::warn!(detector = %at, error = %f.error, "failed to detect resource; going on without it");
        }
    }
    errs.into_result(())?;
    Ok(Box::new(ResourceDetection {
        detected,
        override_existing: plan.override_existing,
    }))
}

pub struct ResourceDetection {
    detected: Vec<KeyValue>,
    override_existing: bool,
}

impl Processor for ResourceDetection {
    fn process(&mut self, batch: &mut ProfileBatch, _ctx: &mut ProcessContext) -> Verdict {
        if self.detected.is_empty() {
            return Verdict::Keep;
        }
        batch.edit_resources(|r, _| {
            for kv in &self.detected {
                if self.override_existing || map_get(&r.attributes, &kv.key).is_none() {
                    map_put(
                        &mut r.attributes,
                        &kv.key,
                        kv.value.clone().unwrap_or_default(),
                    );
                }
            }
        });
        Verdict::Keep
    }

    /// Edits resources only.
    fn decodes_batches(&self) -> bool {
        false
    }
}
