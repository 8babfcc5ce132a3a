//! How a long-lived buffer grows: by a quarter of what it holds, not double. A server holds tens of
//! thousands of open episodes, each with a few small lists that grow call by call; doubling leaves a quarter
//! of their room unused on average, across every episode.

/// The capacity to add to a buffer holding `held` elements that needs room for `more`.
pub fn extra(held: usize, more: usize) -> usize {
    more.max(held / 4 + 4)
}

/// Makes room in `v` for `more` elements, growing by [`extra`].
pub fn room<T>(v: &mut Vec<T>, more: usize) {
    if v.capacity() - v.len() < more {
        v.reserve_exact(extra(v.len(), more));
    }
}
