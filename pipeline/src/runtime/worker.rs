use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::component::{ProcessContext, Processor, Verdict};
use crate::config::ComponentId;
use crate::model::ProfileBatch;
use crate::telemetry::Telemetry;

use super::QueueHandle;

/// One pipeline: takes batches from its inbox, runs its processor chain and
/// hands the result to each of its exporters' queues.
pub(crate) struct Worker {
    pub id: String,
    pub inbox: mpsc::Receiver<Arc<ProfileBatch>>,
    pub processors: Vec<(ComponentId, Box<dyn Processor>)>,
    pub exporters: Vec<QueueHandle>,
    pub telemetry: Arc<Telemetry>,
}

impl Worker {
    /// Runs until the inbox closes and is drained, or `hard_stop` fires, in
    /// which case what is still queued is counted as dropped (`shutdown`).
    pub async fn run(mut self, hard_stop: CancellationToken) {
        let names: Arc<[String]> = self
            .processors
            .iter()
            .map(|(id, _)| id.to_string())
            .collect();
        let id: Arc<str> = self.id.as_str().into();
        loop {
            let next = tokio::select! {
                b = self.inbox.recv() => b,
                _ = hard_stop.cancelled() => break,
            };
            let Some(batch) = next else { return };
            let out = if self.processors.is_empty() {
                (!batch.is_empty()).then_some(batch)
            } else {
                // Processors are CPU-bound (a big batch takes milliseconds):
                // run them off the async threads, so receivers keep answering.
                let mut chain = Chain {
                    processors: std::mem::take(&mut self.processors),
                    names: names.clone(),
                    id: id.clone(),
                    telemetry: self.telemetry.clone(),
                };
                let (chain, out) = tokio::task::spawn_blocking(move || {
                    let out = chain.process(batch);
                    (chain, out)
                })
                .await
                .expect("a processor panicked");
                self.processors = chain.processors;
                out
            };
            if let Some(batch) = out {
                for e in &self.exporters {
                    e.enqueue(batch.clone()).await;
                }
            }
        }
        while let Ok(b) = self.inbox.try_recv() {
            self.telemetry
                .pipeline_dropped(&self.id, b.sample_count(), "shutdown");
        }
    }
}

/// A pipeline's processors, moved onto a blocking thread for each batch.
struct Chain {
    processors: Vec<(ComponentId, Box<dyn Processor>)>,
    names: Arc<[String]>,
    id: Arc<str>,
    telemetry: Arc<Telemetry>,
}

impl Chain {
    /// Runs the chain. A batch is copied only if another pipeline still
    /// shares it; `None` when nothing is left to export.
    fn process(&mut self, batch: Arc<ProfileBatch>) -> Option<Arc<ProfileBatch>> {
        let mut batch = Arc::unwrap_or_clone(batch);
        for ((_, p), name) in self.processors.iter_mut().zip(self.names.iter()) {
            let before = batch.sample_count();
            let mut ctx = ProcessContext::new(&self.id, name, &self.telemetry);
            let verdict = p.process(&mut batch, &mut ctx);
            let after = match verdict {
                Verdict::Keep => batch.sample_count(),
                Verdict::Drop => 0,
            };
            self.telemetry
                .processor_in_out(&self.id, name, before, after);
            // A processor must count what it removes; anything it lost
            // silently is counted here so the totals still add up.
            let accounted = after + ctx.dropped_total();
            if accounted < before {
                let lost = before - accounted;
                tracing::error!(pipeline = %self.id, processor = %name, lost, "processor lost samples without counting them");
                self.telemetry
                    .processor_dropped(&self.id, name, lost, "uncounted");
            }
            if verdict == Verdict::Drop || batch.is_empty() {
                return None;
            }
        }
        Some(Arc::new(batch))
    }
}
