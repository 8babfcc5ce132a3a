//! The small leaves every layer may use, each one rule written once: replacing a file whole (`atomic_file`), vector arithmetic for the exact scan
//! (`vector`), the crate's one hash (`fnv`), order-preserving strict JSON (`json`), whether a value conforms to a JSON schema of the small subset tool schemas use (`json_schema`), the one shape of a bad request field (`invalid`), how a client's bad value
//! is quoted in an error, a short escaped excerpt (`excerpt`), the HTTP transport shared by the OpenAI-compatible clients
//! (`openai_compat`), every Prometheus series memgym exports (`prometheus`) how a long-lived buffer grows (`grow`) and huge pages for the large buffers searches read at random (`huge`). They know nothing above them.

pub mod atomic_file;
pub mod excerpt;
pub mod fnv;
pub mod grow;
pub mod huge;
pub mod invalid;
pub mod json;
pub mod json_schema;
pub mod openai_compat;
pub mod prometheus;
pub mod vector;
