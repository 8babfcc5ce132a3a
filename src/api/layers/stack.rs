//! One tower layer for the gRPC server's middleware ([`crate::api::layers::deadline`], [`crate::api::layers::observe`]): a hook reads
//! what it needs of the request before the route runs, then drives the route's future. The `Layer` and
//! `Service` plumbing is written once here; each hook holds only its own rule.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tonic::body::Body;
use tower_layer::Layer;
use tower_service::Service;

/// A boxed response future.
pub type Call<E> = Pin<Box<dyn Future<Output = Result<http::Response<Body>, E>> + Send>>;

/// What a middleware does around each call.
pub trait Hook: Clone + Send + 'static {
    /// What it keeps of the request.
    type Seen: Send + 'static;
    /// Reads the request before the route takes it.
    fn see<B>(&self, req: &http::Request<B>) -> Self::Seen;
    /// Drives the route's future.
    fn around<E: Send + 'static>(seen: Self::Seen, call: Call<E>) -> Call<E>;
}

/// Wraps every route in [`Around`] with `H`.
#[derive(Debug, Clone, Copy, Default)]
pub struct AroundLayer<H>(pub H);

impl<S, H: Hook> Layer<S> for AroundLayer<H> {
    type Service = Around<S, H>;
    fn layer(&self, inner: S) -> Self::Service {
        Around { inner, hook: self.0.clone() }
    }
}

/// A route with a hook around it.
#[derive(Debug, Clone)]
pub struct Around<S, H> {
    inner: S,
    hook: H,
}

impl<S, B, H> Service<http::Request<B>> for Around<S, H>
where
    S: Service<http::Request<B>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    H: Hook,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = Call<S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let seen = self.hook.see(&req);
        H::around(seen, Box::pin(self.inner.call(req)))
    }
}
