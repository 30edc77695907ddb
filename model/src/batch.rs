use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use crate::compressed::{Compressed, Encoding};
use crate::proto::{Profile, ProfilesData, ProfilesDictionary, Resource, ResourceProfiles, Sample};

/// OTLP `ProfilesData` (resources plus the dictionary they share, never split
/// apart) with what the receiver knew about it.
///
/// The data sits behind accessors so that any mutation drops the received
/// encoding: an unmutated batch is forwarded as the bytes that arrived.
#[derive(Debug, Clone, Default)]
pub struct ProfileBatch {
    /// The messages; a batch checked on the wire ([`ProfileBatch::checked`])
    /// is decoded from `encoded` only when a stage first reads it.
    data: OnceLock<ProfilesData>,
    /// The exact protobuf bytes `data` was decoded from, while still true;
    /// for a batch held as [`ProfileBatch::compressed`] only, inflated
    /// again on first use.
    encoded: OnceLock<Bytes>,
    /// The received bytes as the client compressed them, while still true.
    compressed: Option<Compressed>,
    /// What decoding the bytes of a batch not decoded yet will take, in the
    /// memory budget from the start; unused once decoded.
    pending_heap: usize,
    /// Profiles of a batch not decoded yet.
    pending_profiles: u64,
    /// [`ProfileBatch::sample_count`], once asked: every stage counts the
    /// batch (receiver, pipeline, queue, exporter), and a count is a walk of
    /// every sample. Forgotten with any mutable access.
    samples: OnceLock<u64>,
    /// The decoded messages' heap, once measured (a walk of every
    /// message): the receiver, the pipeline and the settling each ask.
    /// Forgotten with any mutable access.
    heap: OnceLock<usize>,
    pub meta: BatchMeta,
}

/// Receive-side metadata; never sent anywhere.
#[derive(Debug, Clone, Default)]
pub struct BatchMeta {
    /// Id of the receiver that accepted the batch (`otlp`, `sentry/mobile`).
    pub receiver: String,
    /// Transport the receiver used (`grpc`, `http`), as the Collector labels it.
    pub transport: &'static str,
    pub client_addr: Option<SocketAddr>,
    /// The client's request headers, lowercase, credentials left out, when
    /// the receiver has `include_metadata` (what `batch` groups by).
    pub metadata: Vec<(String, String)>,
    pub origin: Origin,
    /// The memory this batch holds in the collector's budget; released when
    /// the last copy of the batch is dropped.
    pub memory: Option<Arc<crate::memory::Held>>,
}

/// Format-specific context the batch arrived with.
#[derive(Debug, Clone, Default)]
pub enum Origin {
    #[default]
    Otlp,
    /// Sentry envelope headers (JSON) and the project id from the URL.
    Sentry {
        project_id: String,
        envelope_header: serde_json::Value,
    },
    Pprof,
}

impl Origin {
    /// Whether two batches came with the same context (for Sentry: the same
    /// project and envelope headers), so that merging them loses nothing.
    pub fn same_as(&self, other: &Origin) -> bool {
        match (self, other) {
            (Origin::Otlp, Origin::Otlp) | (Origin::Pprof, Origin::Pprof) => true,
            (
                Origin::Sentry {
                    project_id: a,
                    envelope_header: ha,
                },
                Origin::Sentry {
                    project_id: b,
                    envelope_header: hb,
                },
            ) => a == b && ha == hb,
            _ => false,
        }
    }
}

impl BatchMeta {
    /// The metadata of a batch merged from this one's and `other`'s data
    /// (the `batch` processor): what both agree on.
    ///
    /// - `receiver`: every receiver id once, in order, joined by `, `.
    /// - `transport`, `client_addr`: kept when equal, else cleared.
    /// - `metadata`: the header pairs both have (`batch` groups by its
    ///   `metadata_keys`, so those always agree).
    /// - `origin`: kept when [`Origin::same_as`], else plain OTLP (`batch`
    ///   only merges batches of the same origin).
    /// - `memory` is not touched: the merging stage sizes the merged
    ///   batch's reservation ([`crate::memory::Held::merge`]).
    pub fn absorb(&mut self, other: &BatchMeta) {
        if !other.receiver.is_empty() && !self.receiver.split(", ").any(|r| r == other.receiver) {
            if self.receiver.is_empty() {
                self.receiver = other.receiver.clone();
            } else {
                self.receiver = format!("{}, {}", self.receiver, other.receiver);
            }
        }
        if self.transport != other.transport {
            self.transport = "";
        }
        if self.client_addr != other.client_addr {
            self.client_addr = None;
        }
        // Header lists are short (credentials left out): a pairwise check.
        self.metadata.retain(|kv| other.metadata.contains(kv));
        if !self.origin.same_as(&other.origin) {
            self.origin = Origin::Otlp;
        }
    }
}

impl ProfileBatch {
    pub fn new(data: ProfilesData) -> Self {
        Self {
            data: OnceLock::from(data),
            ..Self::default()
        }
    }

    /// A batch decoded from `bytes`, which are kept for pass-through.
    pub fn from_encoded(data: ProfilesData, bytes: Bytes) -> Self {
        Self {
            data: OnceLock::from(data),
            encoded: OnceLock::from(bytes),
            ..Self::default()
        }
    }

    /// [`ProfileBatch::from_encoded`], whose messages were measured to
    /// hold `heap` bytes.
    pub(crate) fn measured(data: ProfilesData, bytes: Bytes, heap: usize) -> Self {
        Self {
            heap: OnceLock::from(heap),
            ..Self::from_encoded(data, bytes)
        }
    }

    /// A batch of `bytes` that [`super::wire_check::check`] found clean,
    /// not decoded until a stage reads it: forwarded unchanged, it never
    /// is. What decoding will take is reserved from the start.
    pub fn checked(bytes: Bytes, clean: super::wire_check::Clean) -> Self {
        Self {
            encoded: OnceLock::from(bytes),
            pending_heap: clean.heap,
            pending_profiles: clean.profiles,
            samples: OnceLock::from(clean.samples),
            ..Self::default()
        }
    }

    /// Keeps `compressed`, what the batch's bytes were received as, for
    /// exporters that send with the same compression.
    pub fn with_compressed(mut self, compressed: Option<Compressed>) -> Self {
        debug_assert!(compressed
            .as_ref()
            .is_none_or(|c| self.encoded.get().map(Bytes::len) == Some(c.plain_len)));
        self.compressed = compressed;
        self
    }

    /// The messages, decoded on first use.
    fn decoded(&self) -> &ProfilesData {
        self.data.get_or_init(|| {
            let bytes = self.encoded().cloned().unwrap_or_default();
            // Reserved again if `hold_bytes_only` gave it back: a stage
            // that reads the batch after all is not refused its memory.
            self.grow_memory_to(self.held_bytes());
            // The wire check is held to prost by a differential test.
            crate::codec::decode(&bytes).expect("a batch checked on the wire decodes")
        })
    }

    fn grow_memory_to(&self, full: usize) {
        if let Some(m) = &self.meta.memory {
            if m.bytes() < full {
                m.set(full);
            }
        }
    }

    /// For a batch that will be forwarded as received: it keeps one form
    /// of its bytes, the compressed one when `compressed` is the encoding
    /// every exporter sends it with, and its memory reservation shrinks to
    /// them (from what decoding would take). Decoding it later reserves
    /// that again.
    pub fn hold_bytes_only(&mut self, compressed: Option<Encoding>) {
        if self.data.get().is_some() {
            return;
        }
        match &self.compressed {
            Some(c) if Some(c.encoding) == compressed => self.encoded = OnceLock::new(),
            _ => self.compressed = None,
        }
        let held = self.bytes_held();
        if let Some(m) = &self.meta.memory {
            m.set(held);
        }
    }

    /// For a batch that will only be sent as protobuf bytes: encodes it if
    /// a stage changed it, and drops its messages, keeping their counts.
    /// It then waits to be sent as its bytes, a fraction of the memory, and
    /// the thread that made its messages frees them while they are still
    /// in cache, rather than an exporter's, later. Decoding it again
    /// reserves what that takes, as for a batch checked on the wire.
    pub fn settle_to_bytes(&mut self) {
        if !self.is_decoded() {
            return;
        }
        let samples = self.sample_count();
        let profiles = self.profile_count();
        let data = self.data.get().expect("decoded");
        let changed = self.encoded.get().is_none() && self.compressed.is_none();
        if changed || self.pending_heap == 0 {
            self.pending_heap = *self.heap.get_or_init(|| super::footprint::heap_bytes(data));
        }
        if changed {
            let _ = self.encoded.set(Bytes::from(crate::codec::encode(data)));
        }
        self.pending_profiles = profiles;
        self.samples = OnceLock::from(samples);
        self.data = OnceLock::new();
        self.heap = OnceLock::new();
        if let Some(m) = &self.meta.memory {
            m.set(self.bytes_held());
        }
    }

    /// Forgets the compressed form of the received bytes, which no
    /// exporter will send, and gives back its memory.
    pub fn drop_compressed(&mut self) {
        if let (Some(c), Some(m)) = (self.compressed.take(), &self.meta.memory) {
            m.set(m.bytes().saturating_sub(c.bytes.len()));
        }
    }

    /// Whether the messages exist yet.
    pub fn is_decoded(&self) -> bool {
        self.data.get().is_some()
    }

    /// Decodes protobuf `ProfilesData` / `ExportProfilesServiceRequest` bytes.
    pub fn decode(bytes: Bytes) -> Result<Self, prost::DecodeError> {
        let data = crate::codec::decode(&bytes)?;
        Ok(Self::from_encoded(data, bytes))
    }

    pub fn with_meta(mut self, meta: BatchMeta) -> Self {
        self.meta = meta;
        self
    }

    pub fn data(&self) -> &ProfilesData {
        self.decoded()
    }

    /// Mutable access; forgets the received encoding and the count.
    pub fn data_mut(&mut self) -> &mut ProfilesData {
        self.decoded();
        self.encoded = OnceLock::new();
        self.compressed = None;
        self.samples = Default::default();
        self.heap = Default::default();
        self.data.get_mut().expect("decoded above")
    }

    /// Runs `edit` on every resource (`ResourceProfiles.resource`, created
    /// empty where absent; its references to the dictionary's strings
    /// resolved) and its schema URL, for processors that change only
    /// those. A batch not decoded yet stays so: its resources are edited
    /// in its bytes ([`crate::codec::edit_resources`]), and the samples
    /// are never decoded for it. Unless a resource changed, the batch
    /// keeps its received bytes (and their compressed form).
    pub fn edit_resources(&mut self, mut edit: impl FnMut(&mut Resource, &mut String)) {
        self.retain_resources(|r, url, _| {
            edit(r, url);
            true
        });
    }

    /// [`ProfileBatch::edit_resources`], where `keep` also tells whether
    /// each `ResourceProfiles` stays (it is given how many scopes it
    /// holds); one that goes takes all it holds. Returns the samples
    /// dropped.
    pub fn retain_resources(
        &mut self,
        mut keep: impl FnMut(&mut Resource, &mut String, usize) -> bool,
    ) -> u64 {
        use crate::codec::Edited;
        if !self.is_decoded() {
            if let Some(bytes) = self.encoded() {
                let (edited, dropped) = crate::codec::retain_resources(bytes, &mut keep);
                match edited {
                    Edited::Unchanged => return 0,
                    Edited::Bytes(b) => {
                        let samples = self.samples.get().map(|n| n - dropped.samples);
                        self.replace_bytes(Bytes::from(b));
                        self.samples = samples.map(OnceLock::from).unwrap_or_default();
                        self.pending_profiles -= dropped.profiles;
                        return dropped.samples;
                    }
                    Edited::Decode => {}
                }
            }
        }
        let data = self.data_mut();
        crate::dictionary::resolve_references(data);
        let mut dropped = 0;
        data.resource_profiles.retain_mut(|rp| {
            let scopes = rp.scope_profiles.len();
            let resource = rp.resource.get_or_insert_with(Default::default);
            let kept = keep(resource, &mut rp.schema_url, scopes);
            if !kept {
                dropped += profiles(std::slice::from_ref(rp))
                    .map(profile_sample_count)
                    .sum::<u64>();
            }
            kept
        });
        dropped
    }

    /// The first `Some` that `find` gives for the batch's resources, in
    /// order. A batch not decoded yet is not decoded for it: only its
    /// resources are read from its bytes.
    pub fn find_in_resources<R>(&self, find: impl FnMut(&Resource) -> Option<R>) -> Option<R> {
        if !self.is_decoded() {
            if let Some(rs) = self.encoded().and_then(|b| crate::codec::read_resources(b)) {
                return rs.iter().flatten().find_map(find);
            }
        }
        self.data()
            .resource_profiles
            .iter()
            .filter_map(|rp| rp.resource.as_ref())
            .find_map(find)
    }

    /// For a batch not decoded yet: `bytes` replace its encoding (and its
    /// compressed form), the same samples and profiles. What decoding will
    /// take grows by what the bytes grew, and so does the reservation.
    fn replace_bytes(&mut self, bytes: Bytes) {
        debug_assert!(!self.is_decoded());
        let held = self.bytes_held();
        let grown = bytes
            .len()
            .saturating_sub(self.encoded.get().map_or(0, Bytes::len));
        self.pending_heap += grown;
        self.encoded = OnceLock::from(bytes);
        self.compressed = None;
        if let Some(m) = &self.meta.memory {
            m.set((m.bytes() + self.bytes_held() + grown).saturating_sub(held));
        }
    }

    pub fn into_data(mut self) -> ProfilesData {
        self.decoded();
        self.data.take().expect("decoded above")
    }

    pub fn dictionary(&self) -> &ProfilesDictionary {
        crate::proto::dictionary_of(self.decoded())
    }

    /// The received bytes, if nothing changed the data since (inflated
    /// again if the batch held only their compressed form).
    pub fn encoded(&self) -> Option<&Bytes> {
        if let Some(b) = self.encoded.get() {
            return Some(b);
        }
        let c = self.compressed.as_ref()?;
        Some(self.encoded.get_or_init(|| {
            self.grow_memory_to(self.bytes_held() + c.plain_len);
            Bytes::from(
                c.inflate()
                    .expect("bytes inflated when received inflate again"),
            )
        }))
    }

    /// The received bytes if nothing changed the data since and they are
    /// held as they are (not only compressed).
    pub fn plain_bytes(&self) -> Option<&Bytes> {
        self.encoded.get()
    }

    /// The received bytes as their client compressed them, if nothing
    /// changed the data since.
    pub fn compressed(&self) -> Option<&Compressed> {
        self.compressed.as_ref()
    }

    /// [`ProfileBatch::compressed`]'s bytes if they are in `encoding`
    /// (what an exporter compresses with): they can be sent as they are.
    pub fn compressed_as(&self, encoding: Option<Encoding>) -> Option<&Bytes> {
        let c = self.compressed.as_ref()?;
        (Some(c.encoding) == encoding).then_some(&c.bytes)
    }

    /// Protobuf bytes of the batch: the received ones when still valid.
    pub fn encode_to_bytes(&self) -> Bytes {
        match self.encoded() {
            Some(b) => b.clone(),
            None => Bytes::from(crate::codec::encode(self.decoded())),
        }
    }

    /// Bytes the batch holds in memory: its decoded messages (for a batch
    /// not decoded yet, what decoding will take) and the received bytes
    /// kept for pass-through.
    pub fn held_bytes(&self) -> usize {
        let heap = match self.data.get() {
            Some(d) => *self.heap.get_or_init(|| super::footprint::heap_bytes(d)),
            None => self.pending_heap,
        };
        heap + self.bytes_held()
    }

    /// The received bytes held, plain and compressed.
    fn bytes_held(&self) -> usize {
        self.encoded.get().map_or(0, Bytes::len)
            + self.compressed.as_ref().map_or(0, |c| c.bytes.len())
    }

    pub fn encoded_len(&self) -> usize {
        match (self.encoded.get(), &self.compressed) {
            (Some(b), _) => b.len(),
            (None, Some(c)) => c.plain_len,
            (None, None) => crate::codec::encoded_len(self.decoded()),
        }
    }

    /// Number of observations: each OTLP `Sample` counts
    /// `max(values.len(), timestamps.len(), 1)`. This is the unit every profcol
    /// metric counts; unlike the number of `Sample` messages it does not change
    /// when samples with the same stack are merged, and for Sentry input it
    /// equals the number of Sentry samples.
    pub fn sample_count(&self) -> u64 {
        *self.samples.get_or_init(|| {
            profiles(&self.decoded().resource_profiles)
                .map(profile_sample_count)
                .sum()
        })
    }

    pub fn profile_count(&self) -> u64 {
        let Some(data) = self.data.get() else {
            return self.pending_profiles;
        };
        data.resource_profiles
            .iter()
            .flat_map(|r| &r.scope_profiles)
            .map(|s| s.profiles.len() as u64)
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.profile_count() == 0
    }
}

/// Every profile of `resources`, in order.
pub fn profiles(resources: &[ResourceProfiles]) -> impl Iterator<Item = &Profile> {
    resources
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
}

/// [`profiles`], to change them.
pub fn profiles_mut(resources: &mut [ResourceProfiles]) -> impl Iterator<Item = &mut Profile> {
    resources
        .iter_mut()
        .flat_map(|r| &mut r.scope_profiles)
        .flat_map(|s| &mut s.profiles)
}

/// Observations in one profile; see [`ProfileBatch::sample_count`].
pub fn profile_sample_count(p: &Profile) -> u64 {
    p.samples.iter().map(sample_observations).sum()
}

/// Observations in one `Sample`: `max(values.len(), timestamps.len(), 1)`,
/// the unit of every profcol metric ([`ProfileBatch::sample_count`]).
#[inline]
pub fn sample_observations(s: &Sample) -> u64 {
    s.values.len().max(s.timestamps_unix_nano.len()).max(1) as u64
}
