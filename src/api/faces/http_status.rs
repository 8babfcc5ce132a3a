//! The one table from a refusal's gRPC code to the HTTP status each JSON face answers with (NeMo Gym's
//! resources server, OpenEnv's HTTP routes, the Open Reward Standard), and when a `Retry-After` goes with
//! it. The faces agree on every code; they differ only where their protocol says so: a bad argument is
//! FastAPI's 422 on the two FastAPI-shaped faces and 400 on ORS, whose own request errors are 400.
//! Whether a refused tool call is shown to the policy is [`crate::api::status::fault_of`]'s, the same on
//! every face. The book's "Errors and limits" prints this table; a test keeps the two equal.

use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use tonic::Code;

/// An HTTP face.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpFace {
    /// NeMo Gym's resources server (`--nemo-gym-addr`).
    NemoGym,
    /// OpenEnv's HTTP routes (`--openenv-addr`; the WebSocket carries the same in its error frames).
    OpenEnv,
    /// The Open Reward Standard (`--ors-addr`).
    Ors,
}

impl HttpFace {
    /// Every HTTP face, in the table's column order.
    pub const ALL: [HttpFace; 3] = [HttpFace::NemoGym, HttpFace::OpenEnv, HttpFace::Ors];

    /// Its name in the table.
    pub fn name(self) -> &'static str {
        match self {
            HttpFace::NemoGym => "NeMo Gym",
            HttpFace::OpenEnv => "OpenEnv",
            HttpFace::Ors => "ORS",
        }
    }
}

/// Every gRPC code but OK, in the table's row order.
pub const CODES: [Code; 16] = [
    Code::InvalidArgument,
    Code::OutOfRange,
    Code::NotFound,
    Code::AlreadyExists,
    Code::FailedPrecondition,
    Code::Aborted,
    Code::ResourceExhausted,
    Code::Unavailable,
    Code::DeadlineExceeded,
    Code::Unauthenticated,
    Code::PermissionDenied,
    Code::Unimplemented,
    Code::Cancelled,
    Code::Unknown,
    Code::Internal,
    Code::DataLoss,
];

/// The HTTP status `face` answers for a refusal with `code`.
pub fn http_status(face: HttpFace, code: Code) -> StatusCode {
    match code {
        Code::InvalidArgument | Code::OutOfRange => match face {
            HttpFace::NemoGym | HttpFace::OpenEnv => StatusCode::UNPROCESSABLE_ENTITY,
            HttpFace::Ors => StatusCode::BAD_REQUEST,
        },
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::AlreadyExists | Code::FailedPrecondition | Code::Aborted => StatusCode::CONFLICT,
        // A cap of the server's, not a rate limit of the client's: 503 with Retry-After, as for a dependency down.
        Code::ResourceExhausted | Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Code::Ok | Code::Cancelled | Code::Unknown | Code::Internal | Code::DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// Seconds a client should wait before trying again after a 503 (`Retry-After`), the gRPC face's
/// `RetryInfo` delay rounded up to whole seconds.
pub fn retry_after_secs() -> u64 {
    crate::api::status::RETRY_DELAY.as_secs_f64().ceil().max(1.0) as u64
}

/// Adds `Retry-After` to a 503: clients (the openreward SDK, HTTP retry middleware) back off by it.
pub fn with_retry_after(mut response: Response) -> Response {
    if response.status() == StatusCode::SERVICE_UNAVAILABLE {
        let value = HeaderValue::from_str(&retry_after_secs().to_string()).unwrap_or(HeaderValue::from_static("1"));
        response.headers_mut().insert(axum::http::header::RETRY_AFTER, value);
    }
    response
}

/// The table as the book prints it: a row per code, a column per face.
pub fn markdown_table() -> String {
    let mut out = String::from("| gRPC code |");
    for face in HttpFace::ALL {
        out.push_str(&format!(" {} |", face.name()));
    }
    out.push_str("\n|---|");
    out.push_str(&"---:|".repeat(HttpFace::ALL.len()));
    out.push('\n');
    for code in CODES {
        out.push_str(&format!("| `{}` |", crate::api::status::code_name(code).to_ascii_uppercase()));
        for face in HttpFace::ALL {
            out.push_str(&format!(" {} |", http_status(face, code).as_u16()));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_faces_agree_but_where_their_protocol_differs() {
        for code in CODES {
            let statuses: Vec<StatusCode> = HttpFace::ALL.iter().map(|f| http_status(*f, code)).collect();
            let differ = statuses.windows(2).any(|w| w[0] != w[1]);
            assert_eq!(differ, matches!(code, Code::InvalidArgument | Code::OutOfRange), "{code:?}: {statuses:?}");
            assert!(statuses.iter().all(|s| s.is_client_error() || s.is_server_error()), "{code:?}");
        }
        // The two disagreements found before this table: a cap and an unknown id.
        for face in HttpFace::ALL {
            assert_eq!(http_status(face, Code::ResourceExhausted), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(http_status(face, Code::NotFound), StatusCode::NOT_FOUND);
        }
    }

    #[test]
    fn a_503_carries_retry_after() {
        use axum::response::IntoResponse;
        let busy = with_retry_after(StatusCode::SERVICE_UNAVAILABLE.into_response());
        assert_eq!(busy.headers()[axum::http::header::RETRY_AFTER], "1");
        let bad = with_retry_after(StatusCode::UNPROCESSABLE_ENTITY.into_response());
        assert!(bad.headers().get(axum::http::header::RETRY_AFTER).is_none());
    }

    #[test]
    fn the_book_prints_this_table() {
        let book = include_str!("../../../docs/book/src/errors-and-limits.md");
        assert!(book.contains(&markdown_table()), "docs/book/src/errors-and-limits.md lacks the table:\n{}", markdown_table());
    }
}
