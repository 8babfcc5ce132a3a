//! The WebSocket message and action readers never panic, and refuse with the code OpenEnv uses.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::session::{Action, ErrorCode};
use super::ws::{parse, Request};

#[test]
fn messages_are_read_as_openenv_sends_them() {
    assert!(matches!(parse(r#"{"type":"reset"}"#), Ok(Request::Reset(m)) if m.is_empty()));
    assert!(matches!(parse(r#"{"type":"reset","data":{"seed":1}}"#), Ok(Request::Reset(m)) if m["seed"] == 1));
    assert!(matches!(parse(r#"{"type":"step","data":{"type":"score"}}"#), Ok(Request::Step(_))));
    assert!(matches!(parse(r#"{"type":"state"}"#), Ok(Request::State)));
    assert!(matches!(parse(r#"{"type":"close"}"#), Ok(Request::Close)));
    let code = |s: &str| parse(s).err().map(|f| f.code);
    assert_eq!(code("{"), Some(ErrorCode::InvalidJson));
    assert_eq!(code(r#"{"type":"fly"}"#), Some(ErrorCode::UnknownType));
    assert_eq!(code(r#"{"type":1}"#), Some(ErrorCode::UnknownType));
    assert_eq!(code(r#"{"type":"step"}"#), Some(ErrorCode::Validation));
    assert_eq!(code(r#"{"type":"state","data":{}}"#), Some(ErrorCode::Validation));
    assert_eq!(code(r#"{"type":"reset","data":[1]}"#), Some(ErrorCode::Validation));
    assert_eq!(code("[]"), Some(ErrorCode::Validation));
}

#[test]
fn actions_are_strict_about_their_keys() {
    assert!(matches!(Action::parse(&json!({"type": "list_tools", "metadata": {}})), Ok(Action::ListTools)));
    assert!(
        matches!(Action::parse(&json!({"type": "call_tool", "tool_name": "x"})), Ok(Action::CallTool { arguments, .. }) if arguments == json!({}))
    );
    for bad in [
        json!({"type": "score", "x": 1}),
        json!({"type": "call_tool"}),
        json!({"type": "call_tool", "tool_name": "a", "arguments": [1]}),
        json!(3),
        json!({}),
    ] {
        let f = Action::parse(&bad).unwrap_err();
        assert_eq!(f.code, ErrorCode::Validation, "{bad}");
        assert!(f.message.starts_with("action"), "{}", f.message);
    }
}

proptest! {
    #[test]
    fn any_frame_is_read_or_refused_without_panicking(frame in ".{0,64}") {
        let _ = parse(&frame);
    }

    #[test]
    fn any_json_action_is_read_or_refused_without_panicking(
        ty in prop_oneof![Just("list_tools".to_string()), Just("call_tool".to_string()), Just("score".to_string()), ".{0,8}"],
        name in prop::option::of(".{0,8}"), args in prop::option::of(prop_oneof![Just(json!({})), Just(json!([])), Just(json!("a"))]),
        extra in prop::option::of("[a-z]{1,6}"),
    ) {
        let mut v = json!({"type": ty});
        if let Some(n) = name { v["tool_name"] = Value::from(n); }
        if let Some(a) = args { v["arguments"] = a; }
        if let Some(e) = extra { v[e] = json!(1); }
        if let Err(f) = Action::parse(&v) {
            prop_assert_eq!(f.code, ErrorCode::Validation);
        }
    }
}

#[test]
fn idle_json_rpc_sessions_give_their_place_back_and_attached_ones_stay() {
    use std::sync::Arc;
    use std::time::Duration;

    use super::Slots;

    let idle = Duration::from_millis(50);
    let slots = Arc::new(Slots { active: 0.into(), max: 1, parked: crate::api::faces::sessions::SessionTable::new(1, idle) });
    let id = slots.park(slots.acquire().unwrap());
    assert_eq!(slots.acquire().err(), Some((1, 1)));
    std::thread::sleep(idle * 2);
    let place = slots.acquire().expect("the idle session was dropped");
    assert_eq!(slots.close(&id), None, "and is gone");
    drop(place);

    let id = slots.park(slots.acquire().unwrap());
    let socket = slots.attach(&id).expect("attaches");
    assert!(slots.attach(&id).is_none(), "once");
    std::thread::sleep(idle * 2);
    assert!(slots.acquire().is_err(), "an attached session is not idle");
    assert_eq!(slots.close(&id), Some(false), "its socket holds it");
    drop(socket);
    slots.detach(&id);
    assert!(slots.acquire().is_ok());
}

#[test]
fn hosts_match_like_rmcp_does() {
    use super::http::host_allowed;
    let allowed: Vec<String> = ["localhost", "127.0.0.1", "::1", "memgym.internal:8000"].iter().map(|s| s.to_string()).collect();
    for ok in ["localhost", "LOCALHOST:8000", "127.0.0.1:1", "[::1]:8000", "::1", "memgym.internal:8000"] {
        assert!(host_allowed(&allowed, ok), "{ok}");
    }
    for bad in ["memgym.internal:9000", "memgym.internal", "127.0.0.2", "localhost.attacker.example", "", "[::2]:80"] {
        assert!(!host_allowed(&allowed, bad), "{bad}");
    }
}
