//! Ending open task streams before a server stops.

use tokio_util::sync::CancellationToken;

/// The metadata key of the last event of a stream the server ended because
/// it is stopping. The event is a status update repeating the last status
/// the stream sent; the key's value says why and names the last task event
/// the stream sent (`lastEventId`, its generation). The task goes on: the
/// client subscribes again (SubscribeToTask, over SSE with that
/// `Last-Event-ID`), on another replica or on this one restarted. A client
/// that does not know the key sees one more status it already had.
pub const RESUBSCRIBE_KEY: &str = "https://heddle.dev/extensions/resubscribe/v1";

/// Why a drained stream ended, in its last event.
pub(crate) const RESUBSCRIBE_REASON: &str =
    "the server is stopping; subscribe to the task again to follow it";

/// Ends the open task streams of every handler built with it (see
/// [`HandlerBuilder::stream_drain`](super::HandlerBuilder::stream_drain)),
/// each with a last event keyed [`RESUBSCRIBE_KEY`]; streams opened after
/// [`start`](Self::start) end the same way at once. A server starts it when
/// it is told to stop, before it closes its connections: a stream then
/// ends cleanly, with where to pick it up, instead of breaking.
#[derive(Clone, Debug, Default)]
pub struct StreamDrain(CancellationToken);

impl StreamDrain {
    /// A drain not yet started.
    pub fn new() -> Self {
        Self::default()
    }

    /// Ends every open stream (and every later one) with its last event.
    pub fn start(&self) {
        self.0.cancel();
    }

    /// Whether [`start`](Self::start) was called.
    pub fn started(&self) -> bool {
        self.0.is_cancelled()
    }

    pub(crate) async fn wait(&self) {
        self.0.cancelled().await;
    }
}
