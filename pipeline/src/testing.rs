//! Test support shared by every crate of the workspace: the fixtures and
//! tools of `profcol_model::testing`, and a receiver's output captured
//! with the runtime's admission in front.

pub use profcol_model::testing::*;

/// An [`Output`](crate::component::Output) whose one pipeline queues every
/// batch in a queue the test reads: what a receiver hands over, with the
/// runtime's admission (memory budget of `budget` bytes, `queue_size`
/// batches) in front.
pub fn capture(
    receiver: &str,
    queue_size: usize,
    budget: usize,
    telemetry: std::sync::Arc<crate::telemetry::Telemetry>,
) -> (crate::component::Output, Capture) {
    use std::sync::Arc;
    let budget = profcol_model::memory::MemoryBudget::new(budget);
    let queue = Arc::new(profcol_queue::MemoryQueue::new(
        queue_size,
        crate::config::Sizer::Requests,
    ));
    let exporter = crate::runtime::ExporterQueue {
        id: "capture".into(),
        queue: queue.clone(),
        block: false,
        gauges: false,
        telemetry: telemetry.clone(),
        decodes: true,
        sends_compressed: None,
    };
    let pipeline = crate::runtime::Pipeline::new(
        "profiles",
        64,
        std::time::Duration::ZERO,
        Vec::new(),
        vec![exporter],
        budget.clone(),
        telemetry.clone(),
    );
    let output =
        crate::component::Output::new(receiver, vec![Arc::new(pipeline)], budget, telemetry);
    (output, Capture(queue))
}

/// The batches a [`capture`] output queued.
pub struct Capture(std::sync::Arc<profcol_queue::MemoryQueue>);

impl Capture {
    /// The next batch, waiting for it.
    pub async fn recv(&mut self) -> Option<std::sync::Arc<profcol_model::ProfileBatch>> {
        use profcol_queue::Queue;
        self.0.take().await.map(|(r, _)| r.batch)
    }

    /// The next batch if one is queued.
    pub fn try_recv(&mut self) -> Option<std::sync::Arc<profcol_model::ProfileBatch>> {
        use profcol_queue::Queue;
        if self.0.size() == 0 {
            return None;
        }
        futures::executor::block_on(self.0.take()).map(|(r, _)| r.batch)
    }
}
