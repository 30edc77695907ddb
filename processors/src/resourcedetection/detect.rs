//! The detectors, run once when the processor is made: `env`
//! (`OTEL_RESOURCE_ATTRIBUTES`), `system` (host and OS), and over the
//! network `docker`, `k8s_api` (and its alias `k8snode`), `kubeadm`,
//! `openshift`, `consul`, `ec2`, `ecs`, `azure`, `aks`, `gcp`, `akamai`,
//! `nova`, `alibaba_ecs`, `tencent_cvm`, `ibmcloud_classic`,
//! `ibmcloud_vpc`, `digitalocean`, `upcloud`, `hetzner`, `vultr`,
//! `scaleway` and `oraclecloud`; `lambda`, `heroku`, `azureappservice` and
//! `azurecontainerapps` read the environment, `elastic_beanstalk` and
//! `dynatrace` a file. Each reads the machine through
//! [`Host`], so tests give their own environment and files.

use profcol_model::proto::{any_value::Value as A, AnyValue, KeyValue};
use profcol_ottl::value::{map_get, map_put};

use std::time::Instant;

use super::config::{Detector, HostnameSource, Plan};
use super::{
    akamai, aks, alibaba_ecs, appservice, azure, consul, containerapps, digitalocean, docker,
    dynatrace, ec2, ecs, elasticbeanstalk, gcp, heroku, hetzner, http, ibmcloud_classic,
    ibmcloud_vpc, k8sapi, kubeadm, lambda, nova, openshift, oraclecloud, scaleway, tencent_cvm,
    upcloud, vultr,
};

/// What the detectors read of the machine.
pub(super) trait Host {
    fn env(&self, name: &str) -> Option<String>;
    fn file(&self, path: &str) -> Option<String>;
    /// A file that may be absent: `Ok(None)`; one that cannot be read
    /// (or is not UTF-8) is an error.
    fn read_file(&self, path: &str) -> Result<Option<String>, String> {
        Ok(self.file(path))
    }
    /// Where the Kubernetes API is, when not the client's own (tests).
    fn kube_api(&self) -> Option<String> {
        None
    }
    /// Where a cloud's instance metadata service listens (`host:port`).
    fn link_local(&self) -> String {
        "169.254.169.254:80".into()
    }
    /// The Scaleway metadata service's IPv4 and IPv6 addresses
    /// (`host:port`), in the order the `scaleway` detector probes them.
    fn scaleway_metadata(&self) -> [String; 2] {
        ["169.254.42.42:80".into(), "[fd00:42::42]:80".into()]
    }
    /// The name the `gcp` detector's second probe resolves, looking for
    /// the metadata server's address; `None`: no such probe.
    fn metadata_dns_name(&self) -> Option<String> {
        Some("metadata.google.internal.:80".into())
    }
    /// The base URL of a metadata service that is not at the link-local
    /// address (`usual`, e.g. `http://100.100.100.200`): where it is.
    fn metadata_service(&self, usual: &str) -> String {
        usual.into()
    }
    /// The system resolver (hosts file, DNS), for the `system` detector's
    /// `cname`, `lookup` and `dns` hostname sources; none unless given.
    fn resolver(&self) -> Option<&dyn Resolver> {
        None
    }
}

/// Name lookups as Go's resolver makes them through the C library.
pub(super) trait Resolver {
    /// `name`'s canonical name (`net.LookupCNAME`).
    fn cname(&self, name: &str) -> Result<String, String>;
    /// `name`'s addresses (`net.LookupHost`).
    fn addresses(&self, name: &str) -> Result<Vec<std::net::IpAddr>, String>;
    /// The name an address reverses to (`net.LookupAddr`'s first).
    fn reverse(&self, ip: std::net::IpAddr) -> Result<String, String>;
}

/// The C library's resolver (`getaddrinfo`, `getnameinfo`).
pub(super) struct SystemResolver;

impl Resolver for SystemResolver {
    fn cname(&self, name: &str) -> Result<String, String> {
        let hints = dns_lookup::AddrInfoHints {
            flags: libc::AI_CANONNAME,
            ..Default::default()
        };
        dns_lookup::getaddrinfo(Some(name), None, Some(hints))
            .map_err(|e| format!("lookup {name}: {e:?}"))?
            .filter_map(Result::ok)
            .find_map(|a| a.canonname)
            .ok_or_else(|| format!("lookup {name}: no canonical name"))
    }

    fn addresses(&self, name: &str) -> Result<Vec<std::net::IpAddr>, String> {
        let mut out: Vec<std::net::IpAddr> = dns_lookup::lookup_host(name)
            .map_err(|e| format!("lookup {name}: {e}"))?
            .collect();
        out.dedup();
        Ok(out)
    }

    fn reverse(&self, ip: std::net::IpAddr) -> Result<String, String> {
        dns_lookup::lookup_addr(&ip).map_err(|e| format!("lookup {ip}: {e}"))
    }
}

/// The machine profcol runs on.
pub(super) struct RealHost;

impl Host for RealHost {
    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    fn file(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }

    fn read_file(&self, path: &str) -> Result<Option<String>, String> {
        match std::fs::read_to_string(path) {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{path}: {e}")),
        }
    }

    fn resolver(&self) -> Option<&dyn Resolver> {
        Some(&SystemResolver)
    }
}

/// A string attribute value.
pub(super) fn text(v: impl Into<String>) -> AnyValue {
    AnyValue {
        value: Some(A::StringValue(v.into())),
    }
}

/// A detector that gave nothing, and why.
#[derive(Debug)]
pub(super) struct Failure {
    /// Its index in `detectors`.
    pub at: usize,
    pub error: String,
    /// A setup error (the Collector's `NewDetector` failing) that no
    /// retry mends: it fails the start whatever `fail_on_missing_metadata`.
    pub setup: bool,
}

/// A detector's work once the host is read.
enum Job {
    Done(Result<Vec<KeyValue>, String>),
    Docker(docker::Endpoint),
    K8sNode(k8sapi::Target),
    K8sApi(k8sapi::Target),
    Kubeadm(Option<String>),
    OpenShift(openshift::Target),
    Consul(consul::Target),
    Ec2(Option<String>),
    Ecs(ecs::Endpoint),
    Azure(String),
    Aks(String),
    Gcp(gcp::Target),
    Akamai(String),
    Nova(String),
    AlibabaEcs(String),
    TencentCvm(String),
    IbmCloudClassic(String),
    IbmCloudVpc(String),
    DigitalOcean(String),
    UpCloud(String),
    Hetzner(String),
    Vultr(String),
    Scaleway([String; 2]),
    OracleCloud(String),
}

/// Every detector; the attributes merged in the detectors' order, an
/// attribute found by an earlier detector kept (the Collector's
/// `MergeResource(res, detected, false)`), and the detectors that failed.
/// The network detectors run at once, each retried with backoff (1s,
/// doubling) until `timeout` is spent, as the Collector's; `env` and
/// `system` read local state a retry would not change.
pub(super) fn detect(plan: &Plan, host: &dyn Host) -> (Vec<KeyValue>, Vec<Failure>) {
    let mut failures = Vec::new();
    let mut jobs: Vec<(usize, Job)> = Vec::new();
    let fail = plan.fail_on_missing_metadata;
    for (i, d) in plan.detectors.iter().enumerate() {
        let setup = match d {
            Detector::Env => Ok(Job::Done(env(host))),
            Detector::System => Ok(Job::Done(system(plan, host))),
            Detector::Docker => docker::endpoint(host).map(Job::Docker),
            Detector::K8sNode => {
                tracing::warn!("the k8snode detector name is deprecated, use k8s_api instead");
                k8sapi::target(&plan.k8snode, host).map(Job::K8sNode)
            }
            Detector::K8sApi => k8sapi::target(&plan.k8s_api, host).map(Job::K8sApi),
            Detector::Kubeadm => Ok(Job::Kubeadm(host.kube_api())),
            Detector::OpenShift => openshift::target(&plan.openshift, host).map(Job::OpenShift),
            Detector::Consul => consul::target(&plan.consul, host).map(Job::Consul),
            Detector::Ec2 => ec2::endpoint(host).map(Job::Ec2),
            Detector::Ecs => ecs::endpoint(host).map(|at| match at {
                Some(at) => Job::Ecs(at),
                None => Job::Done(ecs::unavailable(fail)),
            }),
            Detector::Azure => Ok(Job::Azure(host.link_local())),
            // Off Kubernetes the Collector's asks nothing.
            Detector::Aks if aks::on_k8s(host) => Ok(Job::Aks(host.link_local())),
            Detector::Aks => Ok(Job::Done(Ok(Vec::new()))),
            Detector::Gcp => Ok(Job::Gcp(gcp::target(host))),
            Detector::Lambda => Ok(Job::Done(lambda::detect(host, &plan.lambda, fail))),
            Detector::Heroku => Ok(Job::Done(heroku::detect(host, &plan.heroku, fail))),
            Detector::ElasticBeanstalk => Ok(Job::Done(elasticbeanstalk::detect(
                host,
                &plan.elasticbeanstalk,
                fail,
            ))),
            Detector::Dynatrace => Ok(Job::Done(dynatrace::detect(host))),
            Detector::AppService => Ok(Job::Done(appservice::detect(host, &plan.appservice, fail))),
            Detector::ContainerApps => Ok(Job::Done(containerapps::detect(
                host,
                &plan.containerapps,
                fail,
            ))),
            Detector::Akamai => Ok(Job::Akamai(host.link_local())),
            Detector::Nova => Ok(Job::Nova(host.link_local())),
            Detector::AlibabaEcs => {
                http::authority(&host.metadata_service(alibaba_ecs::SERVICE)).map(Job::AlibabaEcs)
            }
            Detector::TencentCvm => {
                http::authority(&host.metadata_service(tencent_cvm::SERVICE)).map(Job::TencentCvm)
            }
            Detector::IbmCloudClassic => Ok(Job::IbmCloudClassic(
                host.metadata_service(ibmcloud_classic::SERVICE),
            )),
            Detector::IbmCloudVpc => Ok(Job::IbmCloudVpc(
                host.metadata_service(&ibmcloud_vpc::service(&plan.ibmcloud_vpc)),
            )),
            Detector::DigitalOcean => Ok(Job::DigitalOcean(host.link_local())),
            Detector::UpCloud => Ok(Job::UpCloud(host.link_local())),
            Detector::Hetzner => Ok(Job::Hetzner(host.link_local())),
            Detector::Vultr => Ok(Job::Vultr(host.link_local())),
            Detector::Scaleway => Ok(Job::Scaleway(host.scaleway_metadata())),
            Detector::OracleCloud => Ok(Job::OracleCloud(host.link_local())),
        };
        match setup {
            Ok(job) => jobs.push((i, job)),
            Err(error) => failures.push(Failure {
                at: i,
                error,
                setup: true,
            }),
        }
    }
    let remote = jobs.iter().any(|(_, j)| !matches!(j, Job::Done(_)));
    let results: Vec<Found> = if remote {
        run_remote(plan, jobs)
    } else {
        jobs.into_iter()
            .map(|(i, j)| match j {
                Job::Done(r) => (i, r, false),
                _ => unreachable!("no remote job"),
            })
            .collect()
    };
    let mut out: Vec<KeyValue> = Vec::new();
    for (i, r, setup) in results {
        match r {
            Ok(found) => {
                for kv in found {
                    if map_get(&out, &kv.key).is_none() {
                        out.push(kv);
                    }
                }
            }
            Err(error) => failures.push(Failure {
                at: i,
                error,
                setup,
            }),
        }
    }
    failures.sort_by_key(|f| f.at);
    (out, failures)
}

/// A job's index in `detectors`, what it found, and whether its error is
/// a setup error (one the Collector's `NewDetector` would have returned).
type Found = (usize, Result<Vec<KeyValue>, String>, bool);

/// The jobs on a runtime of their own, in a thread of their own (the
/// processor may be made inside another runtime), within `timeout`.
fn run_remote(plan: &Plan, jobs: Vec<(usize, Job)>) -> Vec<Found> {
    // As the Collector: `retry.max_elapsed_time` bounds the whole session
    // when set, else `timeout` does.
    let budget = match plan.retry.max_elapsed_time.get() {
        d if d.is_zero() => plan.timeout,
        d => d,
    };
    let deadline = Instant::now() + budget;
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let e = format!("no runtime for detection: {e}");
                        return jobs
                            .into_iter()
                            .map(|(i, _)| (i, Err(e.clone()), false))
                            .collect();
                    }
                };
                let found = rt.block_on(futures::future::join_all(jobs.into_iter().map(
                    |(i, job)| async move {
                        let r = match job {
                            Job::Done(r) => r,
                            Job::Docker(at) => {
                                retrying(plan, deadline, || docker::detect(&at, plan.docker)).await
                            }
                            Job::K8sNode(at) => {
                                retrying(plan, deadline, || k8sapi::detect(&plan.k8snode, &at))
                                    .await
                            }
                            Job::K8sApi(at) => {
                                retrying(plan, deadline, || k8sapi::detect(&plan.k8s_api, &at))
                                    .await
                            }
                            Job::Kubeadm(api) => {
                                retrying(plan, deadline, || {
                                    kubeadm::detect(&plan.kubeadm, api.as_deref())
                                })
                                .await
                            }
                            Job::OpenShift(at) => {
                                retrying(plan, deadline, || openshift::detect(&plan.openshift, &at))
                                    .await
                            }
                            Job::Consul(at) => {
                                retrying(plan, deadline, || consul::detect(&plan.consul, &at)).await
                            }
                            Job::Ec2(at) => {
                                retrying(plan, deadline, || ec2::detect(&plan.ec2, at.as_deref()))
                                    .await
                            }
                            Job::Ecs(at) => {
                                retrying(plan, deadline, || {
                                    ecs::detect(&plan.ecs, plan.fail_on_missing_metadata, &at)
                                })
                                .await
                            }
                            Job::Azure(at) => {
                                retrying(plan, deadline, || azure::detect(&plan.azure, &at)).await
                            }
                            Job::Aks(at) => {
                                retrying(plan, deadline, || {
                                    aks::detect(&plan.aks, plan.fail_on_missing_metadata, &at)
                                })
                                .await
                            }
                            Job::Gcp(t) => {
                                retrying(plan, deadline, || gcp::detect(&plan.gcp, &t)).await
                            }
                            Job::Akamai(at) => {
                                // The Collector's client takes a token when
                                // it is made: without one the detector fails
                                // to be made.
                                let left = deadline.saturating_duration_since(Instant::now());
                                let token = tokio::time::timeout(left, akamai::token(&at))
                                    .await
                                    .unwrap_or_else(|_| {
                                        Err(format!(
                                            "no answer within timeout ({:?})",
                                            plan.timeout
                                        ))
                                    });
                                if let Err(e) = token {
                                    return (i, Err(akamai::setup_error(&e)), true);
                                }
                                retrying(plan, deadline, || akamai::detect(&plan.akamai, &at)).await
                            }
                            Job::Nova(at) => {
                                retrying(plan, deadline, || nova::detect(&plan.nova, &at)).await
                            }
                            Job::AlibabaEcs(at) => {
                                retrying(plan, deadline, || {
                                    alibaba_ecs::detect(&plan.alibaba_ecs, &at)
                                })
                                .await
                            }
                            Job::TencentCvm(at) => {
                                retrying(plan, deadline, || {
                                    tencent_cvm::detect(&plan.tencent_cvm, &at)
                                })
                                .await
                            }
                            Job::IbmCloudClassic(at) => {
                                retrying(plan, deadline, || {
                                    ibmcloud_classic::detect(&plan.ibmcloud_classic, &at)
                                })
                                .await
                            }
                            Job::IbmCloudVpc(at) => {
                                retrying(plan, deadline, || {
                                    ibmcloud_vpc::detect(&plan.ibmcloud_vpc, &at)
                                })
                                .await
                            }
                            Job::DigitalOcean(at) => {
                                retrying(plan, deadline, || {
                                    digitalocean::detect(
                                        &plan.digitalocean,
                                        plan.fail_on_missing_metadata,
                                        &at,
                                    )
                                })
                                .await
                            }
                            Job::UpCloud(at) => {
                                retrying(plan, deadline, || upcloud::detect(&plan.upcloud, &at))
                                    .await
                            }
                            Job::Hetzner(at) => {
                                retrying(plan, deadline, || {
                                    hetzner::detect(
                                        &plan.hetzner,
                                        plan.fail_on_missing_metadata,
                                        &at,
                                    )
                                })
                                .await
                            }
                            Job::Vultr(at) => {
                                retrying(plan, deadline, || vultr::detect(&plan.vultr, &at)).await
                            }
                            Job::Scaleway(at) => {
                                retrying(plan, deadline, || {
                                    scaleway::detect(
                                        &plan.scaleway,
                                        plan.fail_on_missing_metadata,
                                        &at,
                                    )
                                })
                                .await
                            }
                            Job::OracleCloud(at) => {
                                retrying(plan, deadline, || {
                                    oraclecloud::detect(
                                        &plan.oraclecloud,
                                        plan.fail_on_missing_metadata,
                                        &at,
                                    )
                                })
                                .await
                            }
                        };
                        (i, r, false)
                    },
                )));
                // A DNS probe given up on (`gcp`) may still block a
                // thread in the resolver: not waited for.
                rt.shutdown_background();
                found
            })
            .join()
            .unwrap_or_default()
    })
}

async fn retrying<F, Fut>(
    plan: &Plan,
    deadline: Instant,
    mut attempt: F,
) -> Result<Vec<KeyValue>, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Vec<KeyValue>, String>>,
{
    let retry = &plan.retry;
    let mut backoff = profcol_pipeline::runtime::Backoff::new(retry);
    // With a retry budget of its own, `timeout` bounds each attempt.
    let per_attempt = (!retry.max_elapsed_time.get().is_zero() && !plan.timeout.is_zero())
        .then_some(plan.timeout);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let left = per_attempt.map_or(left, |t| t.min(left));
        let error = match tokio::time::timeout(left, attempt()).await {
            Ok(Ok(found)) => return Ok(found),
            Ok(Err(e)) => e,
            Err(_) => format!(
                "no answer within timeout ({:?})",
                per_attempt.unwrap_or(plan.timeout)
            ),
        };
        let wait = backoff.next_delay();
        if !retry.enabled || Instant::now() + wait >= deadline {
            return Err(error);
        }
        tracing::warn!(error = %error, "failed to detect resource; retrying in {wait:?}");
        tokio::time::sleep(wait).await;
    }
}

/// A detector's attributes, in its order: each one `on` that has a value.
pub(super) fn enabled<'a>(
    names: impl IntoIterator<Item = &'a str>,
    values: impl IntoIterator<Item = Option<AnyValue>>,
    on: &[bool],
) -> Vec<KeyValue> {
    names
        .into_iter()
        .zip(values)
        .zip(on)
        .filter_map(|((key, v), &on)| {
            Some(KeyValue {
                key: key.to_string(),
                value: Some(v.filter(|_| on)?),
                ..Default::default()
            })
        })
        .collect()
}

/// A detector that reads all its values or none (`alibaba_ecs`,
/// `tencent_cvm`, `ibmcloud_classic`): its cloud's `provider` and
/// `platform`, then `found` in `names`' order. Values it could not read
/// fail it with `fail_on_missing_metadata` (`error` says how), else give
/// nothing (logged at debug, `what` naming the service).
pub(super) fn all_or_nothing<const N: usize>(
    names: [&str; N],
    plan: &super::config::MetadataPlan<N>,
    [provider, platform]: [&str; 2],
    found: Result<Vec<String>, String>,
    what: &str,
    error: impl FnOnce(String) -> String,
) -> Result<Vec<KeyValue>, String> {
    let values = match found {
        Ok(v) => v,
        Err(e) if plan.fail_on_missing_metadata => return Err(error(e)),
        Err(e) => {
            tracing::debug!(error = %e, "{what} metadata unavailable");
            return Ok(Vec::new());
        }
    };
    let values = [provider.to_string(), platform.to_string()]
        .into_iter()
        .chain(values);
    Ok(enabled(
        names,
        values.map(|v| Some(text(v))),
        &plan.attributes,
    ))
}

pub(super) fn string_kv(key: &str, value: impl Into<String>) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(text(value)),
        ..Default::default()
    }
}

/// `OTEL_RESOURCE_ATTRIBUTES` (else the older `OTEL_RESOURCE`):
/// `k=v,k2=v2`, spaces around keys and values trimmed, values
/// percent-decoded as Go's `url.QueryUnescape` (`+` is a space).
pub(super) fn env(host: &dyn Host) -> Result<Vec<KeyValue>, String> {
    let mut var = "OTEL_RESOURCE_ATTRIBUTES";
    let mut text = host.env(var).unwrap_or_default().trim().to_string();
    if text.is_empty() {
        var = "OTEL_RESOURCE";
        text = host.env(var).unwrap_or_default().trim().to_string();
    }
    if text.is_empty() {
        return Ok(Vec::new());
    }
    parse_env(&text).map_err(|e| format!("{var}: {e}"))
}

pub(super) fn parse_env(var: &str) -> Result<Vec<KeyValue>, String> {
    let mut out = Vec::new();
    for pair in var.split(',') {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(format!("invalid resource format, invalid text: {pair:?}"));
        };
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() || !k.is_ascii() || !v.is_ascii() {
            return Err(format!("invalid resource format, invalid text: {pair:?}"));
        }
        let v = query_unescape(v)
            .ok_or_else(|| format!("invalid resource format in attribute: {pair:?}"))?;
        map_put(&mut out, k, text(v));
    }
    Ok(out)
}

/// `url.QueryUnescape`: `%XX` decoded, `+` a space; a bad escape or bytes
/// that are not UTF-8 are an error.
fn query_unescape(v: &str) -> Option<String> {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// The system detector: the attributes `plan` enables, in the
/// Collector's order.
pub(super) fn system(plan: &Plan, host: &dyn Host) -> Result<Vec<KeyValue>, String> {
    let mut out = Vec::new();
    for &name in &plan.system_attributes {
        let v = match name {
            "host.name" => hostname(plan, host)?,
            "os.type" => os_type().to_string(),
            "host.arch" => host_arch().to_string(),
            "host.id" => match machine_id(host) {
                Some(id) => id,
                None => continue,
            },
            _ => continue,
        };
        out.push(KeyValue {
            key: name.to_string(),
            value: Some(text(v)),
            ..Default::default()
        });
    }
    Ok(out)
}

/// The first source that answers: `os` is the kernel's host name, `dns`
/// the canonical name `/etc/hosts` gives it, else the resolver's (CNAME,
/// then a reverse lookup of its addresses), as go-fqdn finds it; `cname`
/// and `lookup` those two alone.
fn hostname(plan: &Plan, host: &dyn Host) -> Result<String, String> {
    let os = os_hostname(host);
    for src in &plan.hostname_sources {
        let found = match (src, &os) {
            (HostnameSource::Os, _) => os.clone(),
            (_, None) => None,
            (HostnameSource::Dns, Some(h)) => fqdn_from_hosts(host, h).or_else(|| {
                let r = host.resolver()?;
                match r.cname(h) {
                    Ok(c) if !c.is_empty() => Some(c),
                    _ => reverse_lookup(r, h),
                }
            }),
            (HostnameSource::Cname, Some(h)) => host.resolver().and_then(|r| r.cname(h).ok()),
            (HostnameSource::Lookup, Some(h)) => host.resolver().and_then(|r| reverse_lookup(r, h)),
        };
        if let Some(h) = found.map(|h| h.trim_end_matches('.').to_string()) {
            return Ok(h);
        }
    }
    Err("all hostname sources failed to get hostname".into())
}

/// The name the first of `name`'s addresses that reverses gives (the
/// Collector's `lookup` source, and the last resort of `dns`).
fn reverse_lookup(r: &dyn Resolver, name: &str) -> Option<String> {
    r.addresses(name)
        .ok()?
        .into_iter()
        .find_map(|ip| r.reverse(ip).ok())
}

fn os_hostname(host: &dyn Host) -> Option<String> {
    host.file("/proc/sys/kernel/hostname")
        .or_else(|| host.file("/etc/hostname"))
        .or_else(|| host.env("HOSTNAME"))
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

/// The first name of the `/etc/hosts` line that lists `name`.
fn fqdn_from_hosts(host: &dyn Host, name: &str) -> Option<String> {
    let hosts = host.file("/etc/hosts")?;
    hosts.lines().find_map(|line| {
        let line = line.split('#').next().unwrap_or("");
        let mut names = line.split_whitespace().skip(1);
        let first = names.next()?;
        (first == name || names.any(|n| n == name)).then(|| first.to_string())
    })
}

/// `host.id`: the machine id systemd or D-Bus keeps.
fn machine_id(host: &dyn Host) -> Option<String> {
    ["/etc/machine-id", "/var/lib/dbus/machine-id"]
        .iter()
        .filter_map(|p| host.file(p))
        .map(|s| s.trim().to_string())
        .find(|s| !s.is_empty())
}

/// `os.type` as Go's `GOOS` names it.
pub(super) fn os_type() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    }
}

/// `host.arch` in the semantic conventions' values.
fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "x86",
        "arm" => "arm32",
        "powerpc64" => "ppc64",
        "s390x" => "s390x",
        other => other,
    }
}
