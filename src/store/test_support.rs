//! What the tests of the store share: private directories, sessions with
//! some history, and the failures of a flush that concern one test.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{json, Value as Json};

use crate::session::{Options, Session, UserEdit};
use crate::validate::{Input, Limits};

static COUNTER: AtomicU64 = AtomicU64::new(0);

pub(super) fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "efrit-todo-store-{tag}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = fs::remove_dir_all(&dir);
    dir
}

pub(super) fn write(session: &mut Session, todos: Json) {
    session
        .write(
            &Input::from_json(&json!({ "todos": todos })),
            &Options::default(),
            false,
            vec![],
        )
        .unwrap();
}

pub(super) fn busy_session() -> Session {
    let mut s = Session::default();
    write(
        &mut s,
        json!([{"content": "Read", "status": "in_progress"}, {"content": "Fix", "status": "pending"}]),
    );
    write(
        &mut s,
        json!([{"id": "t1", "content": "Read", "status": "completed"}, {"content": "Test", "status": "in_progress"}]),
    );
    s.user_edit(
        UserEdit::Add {
            content: "Ship it".into(),
        },
        &Limits::default(),
    )
    .unwrap();
    s.after_tool(
        "eval",
        Input::Str("(+ 1 2)".into()),
        Some("3".into()),
        false,
        None,
        &Default::default(),
    );
    s
}

/// The failures of FLUSH that name SESSION: other tests share the writer.
pub(super) fn failures_of(session: &str, errors: Vec<String>) -> Vec<String> {
    errors.into_iter().filter(|e| e.contains(session)).collect()
}

pub(super) fn json_of(path: &Path) -> Json {
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}

/// The text of FIELD in each element of the array at KEY of JSON, as a
/// saved file holds them (each item's content, each peer's name).
pub(super) fn texts_of_each(json: &Json, key: &str, field: &str) -> Vec<String> {
    json[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|element| element[field].as_str().unwrap().to_string())
        .collect()
}
