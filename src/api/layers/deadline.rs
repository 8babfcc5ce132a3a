//! Makes a call whose deadline passes inside the server end `DEADLINE_EXCEEDED`, never `CANCELLED`.
//!
//! Finding (issue 12, "5 of 200 calls whose deadline expired inside the server came back CANCELLED"):
//! tonic's server applies the client's `grpc-timeout` header in its own `GrpcTimeout` layer, and when
//! that timer fires it answers with the error `TimeoutExpired`, which tonic turns into
//! `Status::cancelled("Timeout expired")` (tonic 0.14, `status.rs`, `find_status_in_source_chain`). A
//! client that enforces its deadline itself normally reports DEADLINE_EXCEEDED first, but when the
//! server's CANCELLED trailer is processed before the client's own timer (grpcio under load with
//! hundreds of calls in flight, or a client that leaves the deadline to the server, as tonic's does) the
//! client reports CANCELLED. Nothing else in memgym produces CANCELLED.
//!
//! [`DeadlineLayer`] sits inside tonic's layer (`Server::layer` wraps the routes, `GrpcTimeout` wraps
//! that), reads the same header and answers DEADLINE_EXCEEDED. It cannot lose the race: tonic creates
//! our future before its own timer, so our deadline is never later than tonic's, and tonic polls our
//! future before its timer; once tonic's timer has fired the clock is past our deadline too, which we
//! check on every poll (not only through our own timer, whose wake-up may come a tick later).

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;

use crate::api::layers::stack::{AroundLayer, Call, Hook};
use crate::api::status::refusal;

/// Answers DEADLINE_EXCEEDED when the request's `grpc-timeout` passes before the call is done (the hook
/// of [`DeadlineLayer`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Deadline;

/// Wraps every route in [`Deadline`].
pub type DeadlineLayer = AroundLayer<Deadline>;

impl Hook for Deadline {
    type Seen = Option<Duration>;

    fn see<B>(&self, req: &http::Request<B>) -> Option<Duration> {
        grpc_timeout(req.headers())
    }

    fn around<E: Send + 'static>(timeout: Option<Duration>, call: Call<E>) -> Call<E> {
        let Some(timeout) = timeout else { return call };
        let at = Instant::now() + timeout;
        Box::pin(async move {
            let mut call = call;
            let mut timer = std::pin::pin!(tokio::time::sleep_until(at));
            std::future::poll_fn(|cx| {
                if let Poll::Ready(r) = call.as_mut().poll(cx) {
                    return Poll::Ready(r);
                }
                if Instant::now() >= at || timer.as_mut().poll(cx).is_ready() {
                    tracing::debug!(?timeout, "deadline exceeded inside the server");
                    return Poll::Ready(Ok(refusal(
                        tonic::Code::DeadlineExceeded,
                        "DEADLINE_EXCEEDED",
                        format!("the call's deadline ({timeout:?}) passed"),
                        None,
                    )
                    .into_http()));
                }
                Poll::Pending
            })
            .await
        })
    }
}

/// The `grpc-timeout` header as tonic reads it: 1 to 8 digits and a unit (H, M, S, m, u, n); `None`
/// when absent or malformed (tonic then applies no deadline either).
fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    let s = headers.get("grpc-timeout")?.to_str().ok()?;
    if s.len() < 2 || s.len() > 9 {
        return None;
    }
    let (digits, unit) = s.split_at(s.len() - 1);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_grpc_timeout_like_tonic() {
        let h = |v: &str| {
            let mut m = http::HeaderMap::new();
            m.insert("grpc-timeout", v.parse().unwrap());
            grpc_timeout(&m)
        };
        assert_eq!(h("5m"), Some(Duration::from_millis(5)));
        assert_eq!(h("99999999S"), Some(Duration::from_secs(99_999_999)));
        assert_eq!(h("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(h("100u"), Some(Duration::from_micros(100)));
        for bad in ["m", "123456789m", "5x", "-5m", "5 m"] {
            assert_eq!(h(bad), None, "{bad}");
        }
        assert_eq!(grpc_timeout(&http::HeaderMap::new()), None);
    }
}
