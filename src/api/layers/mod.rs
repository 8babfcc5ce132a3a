//! The middleware every face passes through, as tower layers on one stack (`stack`): deadlines
//! (`deadline`), request metrics (`observe`), API keys (`auth`), and the replica header and drain refusals
//! (`drain`).

pub mod auth;
pub mod deadline;
pub mod drain;
pub mod observe;
pub mod stack;
