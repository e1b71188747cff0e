//! The Emacs dynamic module.  This is the only file that knows about Emacs:
//! it turns Lisp values into the plain types of the other modules and back.
//! Lisp calls these functions through lisp/efrit-todo.el, never directly.

pub mod breaker;
pub mod guide;
pub mod history;
pub mod ledger;
pub mod model;
pub mod reconcile;
pub mod render;
pub mod session;
pub mod store;
pub mod tree;
pub mod validate;

use emacs::{defun, Env, IntoLisp, Result, Value, Vector};
use serde_json::Value as Json;

use crate::breaker::BreakerLimits;
use crate::guide::GuideOptions;
use crate::model::{Item, Status};
use crate::session::{
    check_session_name, registry, ExternalItem, LoopOptions, Options, Session, Stop, UserEdit,
};
use crate::validate::{
    checked_name, checked_text, non_blank, parse_status, Input, InvalidInput, Limits, MAX_DEPTH,
};

emacs::plugin_is_GPL_compatible!();

emacs::define_errors! {
    efrit_todo_invalid_input "Invalid efrit-todo input" (error)
}

emacs::use_symbols! {
    kw_id => ":id"
    kw_content => ":content"
    kw_active_form => ":active-form"
    kw_status => ":status"
    kw_parent => ":parent"
    kw_priority => ":priority"
    kw_created => ":created"
    kw_started => ":started"
    kw_completed => ":completed"
    kw_total => ":total"
    kw_pending => ":pending"
    kw_in_progress => ":in-progress"
    kw_cancelled => ":cancelled"
    kw_tool => ":tool"
    kw_input => ":input"
    kw_result => ":result"
    kw_error => ":error"
    kw_todo => ":todo"
    kw_time => ":time"
    kw_duration => ":duration"
    kw_tripped => ":tripped"
    kw_reason => ":reason"
    kw_calls => ":calls"
    kw_since_progress => ":since-progress"
    kw_same_tool => ":same-tool"
    kw_identical => ":identical"
    kw_errors => ":errors"
    kw_churn => ":churn"
    kw_allowed => ":allowed"
    kw_text => ":text"
    kw_model_text => ":model-text"
    kw_complex => ":complex"
    kw_score => ":score"
    kw_steps => ":steps"
    kw_suggestion => ":suggestion"
    kw_false => ":false"
    kw_json_false => ":json-false"
    kw_null => ":null"
    kw_json_null => ":json-null"
    st_pending => "pending"
    st_in_progress => "in-progress"
    st_completed => "completed"
    st_cancelled => "cancelled"
    ty_integer => "integer"
    ty_float => "float"
    ty_string => "string"
    ty_vector => "vector"
    ty_cons => "cons"
    ty_symbol => "symbol"
    ty_hash_table => "hash-table"
    lisp_t => "t"
    st_todo => "todo"
    priority_medium => "medium"
    proper_list_p => "proper-list-p"
    fn_vconcat => "vconcat"
    fn_gethash => "gethash"
    fn_symbol_name => "symbol-name"
    fn_format => "format"
    fn_vector => "vector"
    fn_hash_table_count => "hash-table-count"
    fn_maphash => "maphash"
    fn_table_entry => "efrit-todo--module-table-entry"
    fn_set => "set"
    var_breaker_tripped => "efrit-todo--breaker-tripped"
}

/// VALUE, which should be a string: read at once as one, and walked as
/// anything else only when that fails.  A todo item's fields are strings
/// all but always, and checking the type first costs three module calls.
fn text_or_input(env: &Env, value: Value, depth: usize) -> Result<Input> {
    match short_text(value) {
        Some(Ok(text)) => Ok(Input::Str(text)),
        // Not valid UTF-8, not a string, or longer than the buffer.
        _ => to_input(env, value, depth),
    }
}

/// VALUE's text in one module call, when it is a string that fits the
/// buffer: None when it is not, Some(Err) when it is not valid UTF-8.
/// Only for values that are short strings all but always: otherwise the
/// failed call costs a caught signal, which `debug-on-signal' would show.
fn short_text(value: Value) -> Option<std::result::Result<String, std::string::FromUtf8Error>> {
    STRING_BUFFER.with(|buffer| {
        let mut buffer = buffer.borrow_mut();
        value
            .copy_string_contents(&mut buffer[..])
            .ok()
            .map(|bytes| String::from_utf8(bytes.to_vec()))
    })
}

/// Lists, vectors and hash tables longer than this are not walked: a todo
/// list or tool input never comes near it, and walking one would only waste
/// time before the error.
const MAX_ELEMENTS: usize = 100_000;

#[emacs::module(
    name = "efrit-todo-module",
    defun_prefix = "efrit-todo--module",
    separator = "-"
)]
fn init(env: &Env) -> Result<()> {
    // A panic is already reported to Lisp as a `rust-panic' error with its
    // message; the default hook would also print a backtrace over the
    // terminal Emacs may be running in.
    std::panic::set_hook(Box::new(|_| {}));
    let keys = KNOWN_KEYS
        .iter()
        .map(|key| Ok((*key, key.into_lisp(env)?.make_global_ref())))
        .collect::<Result<Vec<_>>>()?;
    let _ = KNOWN_KEY_REFS.set(keys);
    let absent = env
        .call("make-symbol", ("efrit-todo-absent",))?
        .make_global_ref();
    let _ = ABSENT.set(absent);
    Ok(())
}

/// The keys validation reads.  An `equal' hash table holding only these
/// (every todo item Efrit parses) is read with one `gethash' per key instead
/// of listing its keys, which allocates and is most of the cost of a write.
const KNOWN_KEYS: [&str; 7] = [
    "content",
    "status",
    "activeForm",
    "id",
    "active_form",
    "parent",
    "todos",
];

static KNOWN_KEY_REFS: once_cell::sync::OnceCell<Vec<(&'static str, emacs::GlobalRef)>> =
    once_cell::sync::OnceCell::new();

/// What `gethash' returns for a key that is absent, told apart from nil.
static ABSENT: once_cell::sync::OnceCell<emacs::GlobalRef> = once_cell::sync::OnceCell::new();

/// Reads TABLE through the known keys when they are all it holds; None when
/// it holds others (then its keys must be listed).
fn known_fields(
    env: &Env,
    table: Value,
    count: usize,
    depth: usize,
) -> Result<Option<Vec<(String, Input)>>> {
    let (Some(keys), Some(absent)) = (KNOWN_KEY_REFS.get(), ABSENT.get()) else {
        return Ok(None);
    };
    if count > keys.len() {
        return Ok(None);
    }
    let absent = absent.bind(env);
    let mut pairs = Vec::with_capacity(count);
    for (index, (name, key)) in keys.iter().enumerate() {
        if pairs.len() == count {
            break;
        }
        let value = env.call(fn_gethash, (key.bind(env), table, absent))?;
        if value != absent {
            pairs.push((name.to_string(), text_or_input(env, value, depth + 1)?));
        } else if index == 0 {
            // Every todo item has content; a table without it is a todo_write
            // input (todos) or some other tool's input, read by listing keys.
            let todos = &keys[keys.len() - 1];
            let value = env.call(fn_gethash, (todos.1.bind(env), table, absent))?;
            if value == absent || count != 1 {
                return Ok(None);
            }
            return Ok(Some(vec![(
                todos.0.to_string(),
                to_input(env, value, depth + 1)?,
            )]));
        }
    }
    Ok((pairs.len() == count).then_some(pairs))
}

/// TEXT as a Lisp string: ASCII as a unibyte string, which Emacs makes in
/// one allocation (a multibyte one takes two), and which is `equal' to the
/// multibyte string of the same characters.
fn lisp_text<'e>(env: &'e Env, text: &str) -> Result<Value<'e>> {
    if text.is_ascii() {
        text.as_bytes().into_lisp(env)
    } else {
        text.into_lisp(env)
    }
}

/// The text of a Lisp string of any length, in two module calls (length,
/// then bytes), which never signal for a string.  Text Emacs cannot encode
/// reads as None (not UTF-8), as the caller's mistake rather than a module
/// error.
fn lisp_string(value: Value) -> Option<String> {
    value
        .clone_string_contents()
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
}

/// Strings up to this size are read by `short_text' in one module call.
const SHORT_STRING_BYTES: usize = 4096;

thread_local! {
    /// The buffer of `short_text', kept rather than zeroed on every call.
    static STRING_BUFFER: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; SHORT_STRING_BYTES]);
}

/// Signals `efrit-todo-invalid-input` with a message that names the field.
fn invalid<T>(env: &Env, error: InvalidInput) -> Result<T> {
    env.signal(efrit_todo_invalid_input, (error.to_string(),))
}

/// Runs F and turns its validation error into the Lisp signal.
fn checked<'e, T: IntoLisp<'e>>(
    env: &'e Env,
    result: std::result::Result<T, InvalidInput>,
) -> Result<Value<'e>> {
    match result {
        Ok(value) => value.into_lisp(env),
        Err(error) => invalid(env, error),
    }
}

/// SESSION as the module reads it: a string naming the session.
/// Shared rather than a String, because the one read last is handed out
/// again on every call of that session.
fn session_name(env: &Env, name: Value) -> Result<std::rc::Rc<str>> {
    read_cached_text(&LAST_SESSION, env, name, || {
        match string_arg(env, name, "session")?
            .and_then(|text| check_session_name(&text).map(|()| text))
        {
            Ok(text) => Ok(text.into()),
            Err(error) => invalid(env, error),
        }
    })
}

/// VALUE as READ reads it, unless it is the object CACHE read last.
fn read_cached<T: Clone>(
    cache: &'static std::thread::LocalKey<LastRead<T>>,
    env: &Env,
    value: Value,
    read: impl FnOnce() -> Result<T>,
) -> Result<T> {
    if let Some(known) = cache.with(|last| last.get(value)) {
        return Ok(known);
    }
    let read = read()?;
    cache.with(|last| last.remember(env, value, read.clone()))?;
    Ok(read)
}

/// The string VALUE as READ reads it, unless it is the string CACHE read
/// last and still holds the same text.  A string can be changed in place
/// (`aset', `fillarray') and stay `eq' to itself, so identity alone would
/// hand out what it held before: a session name altered after use would
/// send writes to the old session.  Comparing the text costs one copy into
/// a kept buffer, no allocation and no checking.
fn read_cached_text(
    cache: &'static std::thread::LocalKey<LastRead<std::rc::Rc<str>>>,
    env: &Env,
    value: Value,
    read: impl FnOnce() -> Result<std::rc::Rc<str>>,
) -> Result<std::rc::Rc<str>> {
    if let Some(known) = cache.with(|last| last.get(value)) {
        let unchanged = STRING_BUFFER.with(|buffer| {
            let mut buffer = buffer.borrow_mut();
            value
                .copy_string_contents(&mut buffer[..])
                .is_ok_and(|text| text == known.as_bytes())
        });
        if unchanged {
            return Ok(known);
        }
    }
    let read = read()?;
    cache.with(|last| last.remember(env, value, read.clone()))?;
    Ok(read)
}

/// The last Lisp object read in some place, and what it read as, so that
/// the same object (`eq') need not be read again.  Only for objects nobody
/// alters in place.
struct LastRead<T>(std::cell::RefCell<Option<(emacs::GlobalRef, T)>>);

impl<T: Clone> LastRead<T> {
    const fn new() -> Self {
        LastRead(std::cell::RefCell::new(None))
    }

    /// What VALUE read as, if it is the object read last.
    fn get(&self, value: Value) -> Option<T> {
        match &*self.0.borrow() {
            Some((seen, read)) if *seen == value => Some(read.clone()),
            _ => None,
        }
    }

    /// Remembers that VALUE read as READ, letting go of the previous object.
    fn remember(&self, env: &Env, value: Value, read: T) -> Result<()> {
        let previous = self.0.borrow_mut().replace((value.make_global_ref(), read));
        match previous {
            Some((seen, _)) => seen.free(env),
            None => Ok(()),
        }
    }
}

thread_local! {
    /// The session string read last.  Efrit passes the same string object
    /// on every call of a session (its session id), so an `eq' test
    /// replaces reading and checking it again.
    static LAST_SESSION: LastRead<std::rc::Rc<str>> = const { LastRead::new() };
}

fn options(max_items: i64, max_content_chars: i64, full_list_up_to: i64) -> Options {
    let clamp = |n: i64| usize::try_from(n.max(0)).unwrap_or(usize::MAX);
    Options {
        limits: Limits {
            max_items: clamp(max_items),
            max_content_chars: clamp(max_content_chars),
        },
        full_list_up_to: clamp(full_list_up_to),
    }
}

fn is(env: &Env, value: Value, symbol: &emacs::OnceGlobalRef) -> bool {
    value == symbol.bind(env)
}

/// The name of a symbol; a name that is not valid UTF-8 (a symbol interned
/// from raw bytes) reads as U+FFFD rather than failing the whole call.
fn symbol_name(value: Value) -> Result<String> {
    Ok(value
        .env
        .call(fn_symbol_name, (value,))?
        .into_rust()
        .unwrap_or_else(|_| "\u{FFFD}".to_string()))
}

/// A key of an object: a string, or a symbol or keyword naming it.
fn key_of(env: &Env, key: Value) -> Result<Option<String>> {
    let ty = env.type_of(key)?;
    if is(env, ty, ty_string) {
        Ok(lisp_string(key))
    } else if is(env, ty, ty_symbol) && key.is_not_nil() {
        let name = symbol_name(key)?;
        Ok(Some(
            name.strip_prefix(':').map(str::to_string).unwrap_or(name),
        ))
    } else {
        Ok(None)
    }
}

fn is_keyword(env: &Env, value: Value) -> Result<bool> {
    Ok(is(env, env.type_of(value)?, ty_symbol) && symbol_name(value)?.starts_with(':'))
}

/// Whether LIST starts like a plist: a keyword, then an even length.  An
/// alist pair never does, so `((:id "t1" ...))` is a list of one plist.
fn is_plist(env: &Env, list: Value) -> Result<bool> {
    if !is_keyword(env, list.car()?)? {
        return Ok(false);
    }
    let length = env.call(proper_list_p, (list,))?;
    Ok(length.is_not_nil() && length.into_rust::<i64>()? % 2 == 0)
}

/// A Lisp list is read as a plist when it alternates keywords and values, as
/// an alist when every element is a pair with a string or symbol key, and as
/// an array otherwise.
fn list_to_input(env: &Env, elements: Vector, depth: usize) -> Result<Input> {
    let len = elements.len();
    let at = |i: usize| elements.get::<Value>(i);
    let mut plist = len % 2 == 0;
    for i in (0..len).step_by(2) {
        if !plist || !is_keyword(env, at(i)?)? {
            plist = false;
            break;
        }
    }
    if plist {
        let mut pairs = Vec::with_capacity(len / 2);
        for i in (0..len).step_by(2) {
            let key = symbol_name(at(i)?)?.trim_start_matches(':').to_string();
            pairs.push((key, to_input(env, at(i + 1)?, depth + 1)?));
        }
        return Ok(Input::Map(pairs));
    }
    let mut keys = Vec::with_capacity(len);
    for i in 0..len {
        let element = at(i)?;
        let key = if is(env, env.type_of(element)?, ty_cons) && !is_plist(env, element)? {
            key_of(env, element.car()?)?
        } else {
            None
        };
        match key {
            Some(key) => keys.push(key),
            None => break,
        }
    }
    if keys.len() == len {
        let mut pairs = Vec::with_capacity(len);
        for (i, key) in keys.into_iter().enumerate() {
            pairs.push((key, to_input(env, at(i)?.cdr()?, depth + 1)?));
        }
        return Ok(Input::Map(pairs));
    }
    vector_to_input(env, elements, depth)
}

fn vector_to_input(env: &Env, elements: Vector, depth: usize) -> Result<Input> {
    let mut items = Vec::with_capacity(elements.len());
    for i in 0..elements.len() {
        items.push(to_input(env, elements.get(i)?, depth + 1)?);
    }
    Ok(Input::Array(items))
}

/// Walks a Lisp value into an `Input`.  Only Emacs failures are errors here;
/// anything the model or caller got wrong becomes a value that validation
/// reports with its field path.
fn to_input(env: &Env, value: Value, depth: usize) -> Result<Input> {
    if depth > MAX_DEPTH {
        return Ok(Input::Invalid(format!(
            "nested deeper than {MAX_DEPTH} levels"
        )));
    }
    if !value.is_not_nil() {
        return Ok(Input::Null);
    }
    let ty = env.type_of(value)?;
    if is(env, ty, ty_string) {
        return Ok(match lisp_string(value) {
            Some(text) => Input::Str(text),
            None => Input::Invalid("a string that is not valid UTF-8".into()),
        });
    }
    // Types in the order they are met: strings and tables (Efrit's JSON)
    // first, as each test is a module call.
    if is(env, ty, ty_hash_table) {
        return table_to_input(env, value, depth);
    }
    if is(env, ty, ty_integer) {
        return Ok(match value.into_rust::<i64>() {
            Ok(n) => Input::Int(n),
            Err(_) => Input::Invalid("an integer out of range".into()),
        });
    }
    if is(env, ty, ty_float) {
        return Ok(Input::Float(value.into_rust()?));
    }
    if is(env, ty, ty_symbol) {
        if is(env, value, lisp_t) {
            return Ok(Input::Bool(true));
        }
        if is(env, value, kw_false) || is(env, value, kw_json_false) {
            return Ok(Input::Bool(false));
        }
        if is(env, value, kw_null) || is(env, value, kw_json_null) {
            return Ok(Input::Null);
        }
        return Ok(Input::Unsupported(format!(
            "symbol {}",
            symbol_name(value)?
        )));
    }
    if is(env, ty, ty_vector) {
        let elements: Vector = value.into_rust()?;
        if elements.len() > MAX_ELEMENTS {
            return Ok(Input::Invalid(format!(
                "a vector of more than {MAX_ELEMENTS} elements"
            )));
        }
        return vector_to_input(env, elements, depth);
    }
    if is(env, ty, ty_cons) {
        let length = env.call(proper_list_p, (value,))?;
        if !length.is_not_nil() {
            return Ok(Input::Invalid("a circular or dotted list".into()));
        }
        if length.into_rust::<i64>()? as usize > MAX_ELEMENTS {
            return Ok(Input::Invalid(format!(
                "a list of more than {MAX_ELEMENTS} elements"
            )));
        }
        let elements: Vector = env.call(fn_vconcat, (value,))?.into_rust()?;
        return list_to_input(env, elements, depth);
    }
    Ok(Input::Unsupported(format!("a {}", symbol_name(ty)?)))
}

/// Reads a hash table, through the keys of a todo item first (see
/// `known_fields').
fn table_to_input(env: &Env, table: Value, depth: usize) -> Result<Input> {
    let count: i64 = env.call(fn_hash_table_count, (table,))?.into_rust()?;
    let count = usize::try_from(count).unwrap_or(0);
    if count > MAX_ELEMENTS {
        return Ok(Input::Invalid(format!(
            "an object of more than {MAX_ELEMENTS} entries"
        )));
    }
    if let Some(pairs) = known_fields(env, table, count, depth)? {
        return Ok(Input::Map(pairs));
    }
    walk_table(env, table, count, depth)
}

/// The input of a tool call, for the ledger and the breaker.  Tool inputs
/// seldom have a todo item's keys, so a table is walked straight away,
/// without counting it first: the walk stops reading at `MAX_ELEMENTS`.
fn call_input(env: &Env, value: Value) -> Result<Input> {
    if value.is_not_nil() && is(env, env.type_of(value)?, ty_hash_table) {
        return walk_table(env, value, 4, 0);
    }
    to_input(env, value, 0)
}

/// One hash table being walked by `maphash' into `table_entry'.
struct TableWalk {
    depth: usize,
    pairs: Vec<(String, Input)>,
    bad_key: bool,
    /// Entries past `MAX_ELEMENTS`, counted but not read.
    too_many: bool,
}

thread_local! {
    /// The tables being walked, innermost last (a value may be a table).
    static TABLE_WALKS: std::cell::RefCell<Vec<TableWalk>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Reads every entry of TABLE with one `maphash' calling back into this
/// module: no list of keys, no vector, no `gethash' per key.  CAPACITY is
/// the number of entries expected.
fn walk_table(env: &Env, table: Value, capacity: usize, depth: usize) -> Result<Input> {
    let walk = TableWalk {
        depth,
        pairs: Vec::with_capacity(capacity),
        bad_key: false,
        too_many: false,
    };
    TABLE_WALKS.with(|walks| walks.borrow_mut().push(walk));
    let walked = env.call(fn_maphash, (fn_table_entry.bind(env), table));
    let walk = TABLE_WALKS.with(|walks| walks.borrow_mut().pop());
    walked?;
    Ok(match walk {
        Some(walk) if walk.too_many => {
            Input::Invalid(format!("an object of more than {MAX_ELEMENTS} entries"))
        }
        Some(walk) if !walk.bad_key => Input::Map(walk.pairs),
        _ => Input::Invalid("an object with a key that is not a string or symbol".into()),
    })
}

/// The `maphash' callback of `walk_table'; outside a walk it does nothing.
#[defun]
fn table_entry(env: &Env, key: Value, value: Value) -> Result<()> {
    let Some((depth, full)) = TABLE_WALKS.with(|walks| {
        let mut walks = walks.borrow_mut();
        let walk = walks.last_mut()?;
        walk.too_many |= walk.pairs.len() >= MAX_ELEMENTS;
        Some((walk.depth, walk.too_many))
    }) else {
        return Ok(());
    };
    if full {
        return Ok(());
    }
    // Keys are strings all but always (Efrit's JSON): read one as such at
    // once, and look at its type only when that fails.
    let key = match short_text(key) {
        Some(Ok(text)) => Some(text),
        _ => key_of(env, key)?,
    };
    let entry = match key {
        Some(name) => Some((name, to_input(env, value, depth + 1)?)),
        None => None,
    };
    TABLE_WALKS.with(|walks| {
        if let Some(walk) = walks.borrow_mut().last_mut() {
            match entry {
                Some(pair) => walk.pairs.push(pair),
                None => walk.bad_key = true,
            }
        }
    });
    Ok(())
}

/// Reads a tool input: Lisp data as it is, or a string as JSON text.
fn tool_input(env: &Env, value: Value) -> Result<std::result::Result<Input, InvalidInput>> {
    if is(env, env.type_of(value)?, ty_string) {
        let Some(text) = lisp_string(value) else {
            return Ok(Err(InvalidInput::new(
                "input",
                "a string that is not valid UTF-8",
            )));
        };
        return Ok(serde_json::from_str::<Json>(&text)
            .map(|json| Input::from_json(&json))
            .map_err(|e| InvalidInput::new("input", format!("not valid JSON: {e}"))));
    }
    to_input(env, value, 0).map(Ok)
}

fn time_value(env: &Env, at: Option<f64>) -> Result<Value<'_>> {
    at.into_lisp(env)
}

fn status_symbol(env: &Env, status: Status) -> Value<'_> {
    match status {
        Status::Pending => st_pending.bind(env),
        Status::InProgress => st_in_progress.bind(env),
        Status::Completed => st_completed.bind(env),
        Status::Cancelled => st_cancelled.bind(env),
    }
}

fn item_plist<'e>(env: &'e Env, item: &Item) -> Result<Value<'e>> {
    env.list(&[
        kw_id.bind(env),
        item.id.as_str().into_lisp(env)?,
        kw_content.bind(env),
        item.content.as_str().into_lisp(env)?,
        kw_active_form.bind(env),
        item.active_form.as_str().into_lisp(env)?,
        kw_status.bind(env),
        status_symbol(env, item.status),
        kw_parent.bind(env),
        item.parent.as_deref().into_lisp(env)?,
        kw_priority.bind(env),
        item.priority.as_deref().into_lisp(env)?,
        kw_created.bind(env),
        item.created.into_lisp(env)?,
        kw_started.bind(env),
        time_value(env, item.started)?,
        kw_completed.bind(env),
        time_value(env, item.completed)?,
    ])
}

/// ITEM as Efrit's `efrit-todo-item' vector: id content status priority
/// created-at completed-at, with Efrit's `todo' for pending.
fn item_struct<'e>(env: &'e Env, item: &Item) -> Result<Value<'e>> {
    env.call(
        fn_vector,
        [
            lisp_text(env, &item.id)?,
            lisp_text(env, &item.content)?,
            struct_status(env, item.status),
            struct_priority(env, item)?,
            item.created.into_lisp(env)?,
            time_value(env, item.completed)?,
        ],
    )
}

/// STATUS as Efrit's structs spell it: `todo' for pending.
fn struct_status(env: &Env, status: Status) -> Value<'_> {
    match status {
        Status::Pending => st_todo.bind(env),
        other => status_symbol(env, other),
    }
}

/// The priority symbol of ITEM in Efrit's structs: `medium' unless set.
fn struct_priority<'e>(env: &'e Env, item: &Item) -> Result<Value<'e>> {
    match item.priority.as_deref() {
        None | Some("medium") => Ok(priority_medium.bind(env)),
        Some(name) => env.intern(name),
    }
}

fn items_list<'e>(env: &'e Env, items: &[Item]) -> Result<Value<'e>> {
    let plists = items
        .iter()
        .map(|item| item_plist(env, item))
        .collect::<Result<Vec<_>>>()?;
    env.list(&plists)
}

/// Converts JSON (tool schemas) into Efrit's shape: objects as alists with
/// string keys, arrays as vectors.
fn json_to_lisp<'e>(env: &'e Env, json: &Json) -> Result<Value<'e>> {
    match json {
        Json::Null => ().into_lisp(env),
        Json::Bool(true) => Ok(lisp_t.bind(env)),
        Json::Bool(false) => Ok(kw_json_false.bind(env)),
        Json::Number(n) => match n.as_i64() {
            Some(i) => i.into_lisp(env),
            None => n.as_f64().unwrap_or(0.0).into_lisp(env),
        },
        Json::String(s) => s.as_str().into_lisp(env),
        Json::Array(items) => {
            let values = items
                .iter()
                .map(|v| json_to_lisp(env, v))
                .collect::<Result<Vec<_>>>()?;
            env.vector(&values)
        }
        Json::Object(map) => {
            let pairs = map
                .iter()
                .map(|(k, v)| env.cons(k.as_str(), json_to_lisp(env, v)?))
                .collect::<Result<Vec<_>>>()?;
            env.list(&pairs)
        }
    }
}

fn with_existing<'e, F>(env: &'e Env, name: Value<'e>, f: F) -> Result<Value<'e>>
where
    F: FnOnce(&'e Env, Option<&Session>) -> Result<Value<'e>>,
{
    let name = session_name(env, name)?;
    let registry = registry();
    f(env, registry.get(&name))
}

/// The version of this module; the Lisp side refuses a module that differs.
#[defun]
fn version() -> Result<String> {
    Ok(env!("CARGO_PKG_VERSION").to_string())
}

/// The todo_write tool for SESSION: validate INPUT, reconcile, return the
/// result text.
#[allow(clippy::too_many_arguments)]
#[defun]
fn write<'e>(
    env: &'e Env,
    session: Value<'e>,
    input: Value<'e>,
    max_items: i64,
    max_content: i64,
    full_up_to: i64,
    auto_complete: Value<'e>,
    known_tools: Value<'e>,
) -> Result<Value<'e>> {
    let session = session_name(env, session)?;
    let input = match tool_input(env, input)? {
        Ok(input) => input,
        Err(error) => return invalid(env, error),
    };
    let options = options(max_items, max_content, full_up_to);
    let known_tools = match to_input(env, known_tools, 0)? {
        Input::Array(names) => names
            .into_iter()
            .filter_map(|n| if let Input::Str(s) = n { Some(s) } else { None })
            .collect(),
        _ => Vec::new(),
    };
    let outcome = registry().session(&session).write(
        &input,
        &options,
        auto_complete.is_not_nil(),
        known_tools,
    );
    match outcome {
        Ok(outcome) => lisp_text(env, &outcome.text),
        Err(error) => invalid(env, error),
    }
}

#[defun]
fn items<'e>(env: &'e Env, session: Value<'e>) -> Result<Value<'e>> {
    with_existing(env, session, |env, s| {
        items_list(env, s.map(|s| s.items.as_slice()).unwrap_or_default())
    })
}

/// The items of SESSION in Efrit's shape, for `efrit-todo--current-todos'.
/// OLD is the variable's current value: when it has one struct per item it
/// is updated in place and returned, so that refreshing the variable after
/// every write allocates only for what changed (Efrit's own code mutates
/// these structs in place too).  Otherwise a new list is built.
#[defun]
fn structs<'e>(env: &'e Env, session: Value<'e>, old: Value<'e>) -> Result<Value<'e>> {
    let name = session_name(env, session)?;
    let registry = registry();
    let items = registry
        .get(&name)
        .map(|s| s.items.as_slice())
        .unwrap_or_default();
    if let Some(list) = update_mirror(env, &name, items, old)? {
        return Ok(list);
    }
    let (list, structs) = match update_structs(env, items, old)? {
        Some((list, structs)) => (list, structs),
        None => {
            let structs = items
                .iter()
                .map(|item| item_struct(env, item))
                .collect::<Result<Vec<_>>>()?;
            (env.list(&structs)?, structs)
        }
    };
    remember_mirror(env, &name, items, list, &structs)?;
    Ok(list)
}

/// A struct's fields as `structs' last set them.
#[derive(PartialEq)]
struct Shown {
    id: String,
    content: String,
    status: Status,
    priority: Option<String>,
    created: u64,
    completed: Option<u64>,
}

impl Shown {
    fn of(item: &Item) -> Shown {
        Shown {
            id: item.id.clone(),
            content: item.content.clone(),
            status: item.status,
            priority: item.priority.clone(),
            created: item.created.to_bits(),
            completed: item.completed.map(f64::to_bits),
        }
    }

    fn shows(&self, item: &Item) -> bool {
        self.id == item.id
            && self.content == item.content
            && self.status == item.status
            && self.priority == item.priority
            && self.created == item.created.to_bits()
            && self.completed == item.completed.map(f64::to_bits)
    }
}

/// What `structs' last handed to `efrit-todo--current-todos': the session,
/// the list, a Lisp vector of the same structs (reached by index rather
/// than by walking the list), and what each struct shows.
struct Mirror {
    session: String,
    list: emacs::GlobalRef,
    structs: emacs::GlobalRef,
    shown: Vec<Shown>,
}

thread_local! {
    static MIRROR: std::cell::RefCell<Option<Mirror>> = const { std::cell::RefCell::new(None) };
}

/// Brings the structs of OLD up to ITEMS by touching only the items that
/// changed, when OLD is the list `structs' last returned for SESSION and
/// has as many items.  After a write of 1000 items that moved one along,
/// that is two structs, not six slots of a thousand compared through the
/// module API.  A struct Efrit changed in place with `setf' keeps its
/// change until the module's item changes; the module's list is the truth
/// and the next full rebuild shows it.
fn update_mirror<'e>(
    env: &'e Env,
    session: &str,
    items: &[Item],
    old: Value<'e>,
) -> Result<Option<Value<'e>>> {
    MIRROR.with(|mirror| {
        let mut mirror = mirror.borrow_mut();
        let Some(mirror) = mirror.as_mut() else {
            return Ok(None);
        };
        if items.is_empty()
            || mirror.session != session
            || mirror.shown.len() != items.len()
            || mirror.list != old
        {
            return Ok(None);
        }
        let structs: Vector = mirror.structs.bind(env).into_rust()?;
        for (index, (item, shown)) in items.iter().zip(mirror.shown.iter_mut()).enumerate() {
            if shown.shows(item) {
                continue;
            }
            let vector: Vector = structs.get(index)?;
            if shown.id != item.id {
                vector.set(0, lisp_text(env, &item.id)?)?;
            }
            if shown.content != item.content {
                vector.set(1, lisp_text(env, &item.content)?)?;
            }
            if shown.status != item.status {
                vector.set(2, struct_status(env, item.status))?;
            }
            if shown.priority != item.priority {
                vector.set(3, struct_priority(env, item)?)?;
            }
            if shown.created != item.created.to_bits() {
                vector.set(4, item.created)?;
            }
            if shown.completed != item.completed.map(f64::to_bits) {
                vector.set(5, time_value(env, item.completed)?)?;
            }
            *shown = Shown::of(item);
        }
        Ok(Some(old))
    })
}

/// Remembers LIST, made of STRUCTS showing ITEMS, as SESSION's mirror.
fn remember_mirror(
    env: &Env,
    session: &str,
    items: &[Item],
    list: Value,
    structs: &[Value],
) -> Result<()> {
    let next = if items.is_empty() {
        None
    } else {
        Some(Mirror {
            session: session.to_string(),
            list: list.make_global_ref(),
            structs: env.call(fn_vector, structs)?.make_global_ref(),
            shown: items.iter().map(Shown::of).collect(),
        })
    };
    let previous = MIRROR.with(|mirror| std::mem::replace(&mut *mirror.borrow_mut(), next));
    if let Some(previous) = previous {
        previous.list.free(env)?;
        previous.structs.free(env)?;
    }
    Ok(())
}

/// Updates OLD, a list of `efrit-todo-item' vectors, to ITEMS in place; None
/// when OLD does not have that shape and length.
fn update_structs<'e>(
    env: &'e Env,
    items: &[Item],
    old: Value<'e>,
) -> Result<Option<(Value<'e>, Vec<Value<'e>>)>> {
    if items.is_empty() || !is(env, env.type_of(old)?, ty_cons) {
        return Ok(None);
    }
    let length = env.call(proper_list_p, (old,))?;
    if !length.is_not_nil() || length.into_rust::<i64>()? as usize != items.len() {
        return Ok(None);
    }
    let mut structs = Vec::with_capacity(items.len());
    let mut cell = old;
    for _ in items {
        let element = cell.car()?;
        if !is(env, env.type_of(element)?, ty_vector) {
            return Ok(None);
        }
        let vector: Vector = element.into_rust()?;
        if vector.len() != 6 {
            return Ok(None);
        }
        structs.push(vector);
        cell = cell.cdr()?;
    }
    // Types are checked first: a failed conversion builds an error, which
    // captures a backtrace when RUST_BACKTRACE is set.
    let same_text = |slot: Value, text: &str| -> Result<bool> {
        Ok(is(env, env.type_of(slot)?, ty_string)
            && slot.into_rust::<String>().is_ok_and(|old| old == text))
    };
    let same_time = |slot: Value, at: Option<f64>| -> Result<bool> {
        Ok(match at {
            None => !slot.is_not_nil(),
            Some(at) => {
                is(env, env.type_of(slot)?, ty_float)
                    && slot
                        .into_rust::<f64>()
                        .is_ok_and(|old| old.to_bits() == at.to_bits())
            }
        })
    };
    let values = structs.iter().map(Vector::value).collect();
    for (item, vector) in items.iter().zip(structs) {
        if !same_text(vector.get(0)?, &item.id)? {
            vector.set(0, lisp_text(env, &item.id)?)?;
        }
        if !same_text(vector.get(1)?, &item.content)? {
            vector.set(1, lisp_text(env, &item.content)?)?;
        }
        let status = struct_status(env, item.status);
        if vector.get::<Value>(2)? != status {
            vector.set(2, status)?;
        }
        let priority = struct_priority(env, item)?;
        if vector.get::<Value>(3)? != priority {
            vector.set(3, priority)?;
        }
        if !same_time(vector.get(4)?, Some(item.created))? {
            vector.set(4, item.created)?;
        }
        if !same_time(vector.get(5)?, item.completed)? {
            vector.set(5, time_value(env, item.completed)?)?;
        }
    }
    Ok(Some((old, values)))
}

#[defun]
fn counts<'e>(env: &'e Env, session: Value<'e>) -> Result<Value<'e>> {
    with_existing(env, session, |env, s| {
        let c = s.map(Session::counts).unwrap_or_default();
        env.list([
            kw_total.bind(env),
            (c.total as i64).into_lisp(env)?,
            kw_pending.bind(env),
            (c.pending as i64).into_lisp(env)?,
            kw_in_progress.bind(env),
            (c.in_progress as i64).into_lisp(env)?,
            kw_completed.bind(env),
            (c.completed as i64).into_lisp(env)?,
            kw_cancelled.bind(env),
            (c.cancelled as i64).into_lisp(env)?,
        ])
    })
}

#[defun]
fn current<'e>(env: &'e Env, session: Value<'e>) -> Result<Value<'e>> {
    with_existing(env, session, |env, s| match s.and_then(Session::current) {
        Some(item) => item_plist(env, item),
        None => ().into_lisp(env),
    })
}

#[defun]
fn find<'e>(env: &'e Env, session: Value<'e>, id: String) -> Result<Value<'e>> {
    with_existing(env, session, |env, s| match s.and_then(|s| s.find(&id)) {
        Some(item) => item_plist(env, item),
        None => ().into_lisp(env),
    })
}

#[defun]
fn reset<'e>(env: &'e Env, session: Value<'e>) -> Result<()> {
    let session = session_name(env, session)?;
    // `efrit-todo--breaker-tripped' is left as it is: undoing a trip never
    // arms a breaker, and the next `before_tool' clears what is stale.
    registry().reset(&session);
    Ok(())
}

#[defun]
fn sessions(env: &Env) -> Result<Value<'_>> {
    let names = registry().names();
    let values = names
        .iter()
        .map(|n| n.as_str().into_lisp(env))
        .collect::<Result<Vec<_>>>()?;
    env.list(&values)
}

#[defun]
fn tool_schemas(env: &Env) -> Result<Value<'_>> {
    let schemas = validate::tool_schemas()
        .iter()
        .map(|s| json_to_lisp(env, s))
        .collect::<Result<Vec<_>>>()?;
    env.list(&schemas)
}

/// The system prompt's part for SESSION: the same text on every call, the
/// list as it stood at the first one.
#[defun]
fn prompt_guidance<'e>(env: &'e Env, session: Value<'e>, full_up_to: i64) -> Result<String> {
    let session = session_name(env, session)?;
    let full_up_to = options(0, 0, full_up_to).full_list_up_to;
    Ok(registry()
        .session(&session)
        .prompt_guidance(full_up_to)
        .to_string())
}

/// One edit by the user.  OP is status, edit, add, move or clear-finished;
/// ARG is the status, the new content or the offset.  Returns the note the
/// model will read ("" when nothing changed).
#[defun]
fn user_edit<'e>(
    env: &'e Env,
    session: Value<'e>,
    op: String,
    id: Value<'e>,
    arg: Value<'e>,
    max_items: i64,
    max_content: i64,
) -> Result<Value<'e>> {
    let session = session_name(env, session)?;
    let options = options(max_items, max_content, 0);
    let arg = to_input(env, arg, 0)?;
    let id = match to_input(env, id, 0)? {
        Input::Null => Err(InvalidInput::new("id", "is required")),
        Input::Str(id) => Ok(id),
        other => Err(InvalidInput::new(
            "id",
            format!("expected a string, got {}", other.describe()),
        )),
    };
    let id = || id.clone();
    let text = |path: &str| checked_text(&arg, path, options.limits.max_content_chars);
    let edit = match op.as_str() {
        "status" => id().and_then(|id| {
            Ok(UserEdit::SetStatus {
                id,
                status: parse_status(&arg, "status")?,
            })
        }),
        "edit" => id().and_then(|id| {
            Ok(UserEdit::EditContent {
                id,
                content: text("content")?,
            })
        }),
        "add" => text("content").map(|content| UserEdit::Add { content }),
        "move" => id().and_then(|id| match arg {
            Input::Int(offset) => Ok(UserEdit::Move { id, offset }),
            ref other => Err(InvalidInput::new(
                "offset",
                format!("expected an integer, got {}", other.describe()),
            )),
        }),
        "clear-finished" => Ok(UserEdit::ClearFinished),
        other => Err(InvalidInput::new(
            "op",
            format!("unknown edit {}", validate::quote(other)),
        )),
    };
    let note = edit.and_then(|edit| registry().session(&session).user_edit(edit, &options));
    checked(env, note)
}

/// Efrit's `efrit-todo-add`: append a pending item, return its plist.
#[defun]
fn add<'e>(
    env: &'e Env,
    session: Value<'e>,
    content: Value<'e>,
    priority: Option<String>,
    max_items: i64,
    max_content: i64,
) -> Result<Value<'e>> {
    let session = session_name(env, session)?;
    let options = options(max_items, max_content, 0);
    let content = match to_input(env, content, 0)? {
        Input::Null => Err(InvalidInput::new("content", "is required")),
        input => checked_text(&input, "content", options.limits.max_content_chars)
            .and_then(|t| non_blank(t, "content")),
    };
    let added = content.and_then(|content| {
        registry()
            .session(&session)
            .add(content, priority, &options)
    });
    match added {
        Ok(item) => item_plist(env, &item),
        Err(error) => invalid(env, error),
    }
}

/// Sets the status (a wire or Lisp spelling) of item ID; nil when absent.
#[defun]
fn set_status<'e>(
    env: &'e Env,
    session: Value<'e>,
    id: String,
    status: String,
) -> Result<Value<'e>> {
    let session = session_name(env, session)?;
    let status = match parse_status(&Input::Str(status), "status") {
        Ok(status) => status,
        Err(error) => return invalid(env, error),
    };
    match registry().session(&session).set_status(&id, status) {
        Some(item) => item_plist(env, &item),
        None => ().into_lisp(env),
    }
}

fn external_item(
    input: &Input,
    index: usize,
    limits: &Limits,
) -> std::result::Result<ExternalItem, InvalidInput> {
    let path = |field: &str| format!("todos[{index}].{field}");
    let text = |field: &str| -> std::result::Result<Option<String>, InvalidInput> {
        match input.get(field) {
            None | Some(Input::Null) => Ok(None),
            Some(value) => checked_text(value, &path(field), limits.max_content_chars).map(Some),
        }
    };
    let time = |field: &str| match input.get(field) {
        Some(Input::Float(x)) => Some(*x),
        Some(Input::Int(n)) => Some(*n as f64),
        _ => None,
    };
    let content = non_blank(text("content")?.unwrap_or_default(), &path("content"))?;
    let status = match input.get("status") {
        Some(value) => parse_status(value, &path("status"))?,
        None => Status::Pending,
    };
    Ok(ExternalItem {
        id: text("id")?,
        content,
        status,
        priority: text("priority")?,
        created: time("created"),
        completed: time("completed"),
    })
}

/// Efrit's `efrit-todo-set-all`: ITEMS is a list of plists
/// (:id :content :status :priority :created :completed).
#[defun]
fn set_all<'e>(
    env: &'e Env,
    session: Value<'e>,
    items: Value<'e>,
    max_items: i64,
    max_content: i64,
) -> Result<Value<'e>> {
    let session = session_name(env, session)?;
    let options = options(max_items, max_content, 0);
    let parsed = match to_input(env, items, 0)? {
        Input::Null => Ok(vec![]),
        Input::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| external_item(item, i, &options.limits))
            .collect(),
        other => Err(InvalidInput::new(
            "todos",
            format!("expected a list of items, got {}", other.describe()),
        )),
    };
    let result = parsed.and_then(|items| registry().session(&session).set_all(items, &options));
    checked(env, result.map(|()| true))
}

/// The number of the last change to SESSION's list: it moves exactly when
/// the list changes.
#[defun]
fn change_seq<'e>(env: &'e Env, session: Value<'e>) -> Result<Value<'e>> {
    with_existing(env, session, |env, s| {
        (s.map_or(0, |s| s.history.last_seq()) as i64).into_lisp(env)
    })
}

#[defun]
fn allocate_id<'e>(env: &'e Env, session: Value<'e>) -> Result<String> {
    let session = session_name(env, session)?;
    Ok(registry().session(&session).allocate_id())
}

#[defun]
fn id_counter<'e>(env: &'e Env, session: Value<'e>) -> Result<i64> {
    let session = session_name(env, session)?;
    let issued = registry()
        .get(&session)
        .map(|s| s.ids.issued())
        .unwrap_or(0);
    Ok(i64::try_from(issued).unwrap_or(i64::MAX))
}

/// Raises the id counter to N; it never goes down, so ids are never reused.
#[defun]
fn raise_counter<'e>(env: &'e Env, session: Value<'e>, n: Value<'e>) -> Result<i64> {
    let session = session_name(env, session)?;
    let n = match to_input(env, n, 0)? {
        Input::Int(n) if n >= 0 => n,
        other => {
            return invalid(
                env,
                InvalidInput::new(
                    "counter",
                    format!("expected a natural number, got {}", other.describe()),
                ),
            )
        }
    };
    let mut registry = registry();
    let ids = &mut registry.session(&session).ids;
    ids.raise_to(u64::try_from(n).unwrap_or(0));
    Ok(i64::try_from(ids.issued()).unwrap_or(i64::MAX))
}

#[defun]
fn clear<'e>(env: &'e Env, session: Value<'e>) -> Result<()> {
    let session = session_name(env, session)?;
    registry().session(&session).clear();
    Ok(())
}

/// Panics on purpose, so the tests can prove a panic becomes a Lisp error.
#[defun]
fn panic_for_test(message: String) -> Result<()> {
    panic!("{message}")
}

/// Reads the loop options vector the Lisp side builds from its defcustoms:
/// [without-progress same-tool identical error-warn error-trip oscillation
///  churn hard-cap max-continuations reminder-after reminders auto-complete
///  max-result-chars].
fn loop_options(env: &Env, vector: Value) -> Result<LoopOptions> {
    // Only a vector not seen before is checked and read.
    read_cached(&LOOP_OPTIONS, env, vector, || {
        read_loop_options(env, vector.into_rust()?)
    })
}

thread_local! {
    /// The options vector read last.  `efrit-todo--loop-options' hands the
    /// same vector back while no option changes, and never alters one it
    /// made, so a vector seen before need not be read again: that is 26
    /// module calls saved on every tool call.
    static LOOP_OPTIONS: LastRead<LoopOptions> = const { LastRead::new() };
}

fn read_loop_options(env: &Env, options: Vector) -> Result<LoopOptions> {
    let number = |i: usize| -> Result<u32> {
        let n: i64 = options.get(i)?;
        Ok(u32::try_from(n.max(0)).unwrap_or(u32::MAX))
    };
    let flag = |i: usize| -> Result<bool> { Ok(options.get::<Value>(i)?.is_not_nil()) };
    if options.len() != 13 {
        return invalid(
            env,
            InvalidInput::new(
                "options",
                format!("expected 13 elements, got {}", options.len()),
            ),
        );
    }
    Ok(LoopOptions {
        breaker: BreakerLimits {
            without_progress: number(0)?,
            same_tool: number(1)?,
            identical: number(2)?,
            error_warn: number(3)?,
            error_trip: number(4)?,
            oscillation: number(5)?,
            churn: number(6)?,
            hard_cap: number(7)?,
        },
        guide: GuideOptions {
            max_continuations: number(8)?,
            reminder_after: number(9)?,
            reminders: flag(10)?,
        },
        auto_complete: flag(11)?,
        max_result_chars: number(12)? as usize,
    })
}

/// A string argument named FIELD; anything else is the caller's mistake.
fn string_arg(
    env: &Env,
    value: Value,
    field: &str,
) -> Result<std::result::Result<String, InvalidInput>> {
    Ok(match to_input(env, value, 0)? {
        Input::Str(text) => Ok(text),
        other => Err(InvalidInput::new(
            field,
            format!("expected a string, got {}", other.describe()),
        )),
    })
}

/// A tool result as text, and whether that text is the result's own
/// string (then the result can be sent back as it is, without a copy).
struct ResultText {
    text: Option<String>,
    own: bool,
}

/// Lisp text of a tool result: strings as they are, nil as no output.
fn result_text(env: &Env, result: Value) -> Result<ResultText> {
    if !result.is_not_nil() {
        return Ok(ResultText {
            text: None,
            own: false,
        });
    }
    if is(env, env.type_of(result)?, ty_string) {
        return Ok(match lisp_string(result) {
            Some(text) => ResultText {
                text: Some(text),
                own: true,
            },
            None => ResultText {
                text: Some("<a result that is not valid UTF-8>".into()),
                own: false,
            },
        });
    }
    // Printing fails on structures nested too deep; the tool has run, so its
    // call is recorded with a description rather than refused.
    let text = match env
        .call(fn_format, ("%S", result))
        .and_then(|text| text.into_rust::<String>())
    {
        Ok(text) => text,
        Err(_) => format!(
            "<a result that could not be printed: {}>",
            symbol_name(env.type_of(result)?)?
        ),
    };
    Ok(ResultText {
        text: Some(text),
        own: false,
    })
}

/// A tool name from the adapter: a non-empty string without NUL.
fn tool_name(env: &Env, value: Value) -> Result<std::result::Result<String, InvalidInput>> {
    let name = match short_text(value) {
        Some(Ok(name)) => Ok(name),
        _ => string_arg(env, value, "name")?,
    };
    Ok(name.and_then(|name| checked_name(name, "name")))
}

/// DURATION in seconds: nil or a number.
fn duration_arg(env: &Env, value: Value) -> Result<std::result::Result<Option<f64>, InvalidInput>> {
    Ok(match to_input(env, value, 0)? {
        Input::Null => Ok(None),
        Input::Int(n) => Ok(Some(n as f64)),
        Input::Float(x) if x.is_finite() => Ok(Some(x)),
        other => Err(InvalidInput::new(
            "duration",
            format!(
                "expected a number of seconds or nil, got {}",
                other.describe()
            ),
        )),
    })
}

#[defun]
fn before_tool<'e>(
    env: &'e Env,
    session: Value<'e>,
    tool: Value<'e>,
    input: Value<'e>,
    options: Value<'e>,
) -> Result<Value<'e>> {
    let session = session_name(env, session)?;
    let options = loop_options(env, options)?;
    let tool = match tool_name(env, tool)? {
        Ok(tool) => tool,
        Err(error) => return invalid(env, error),
    };
    // The input is read only when the breaker may refuse: rarely.
    let armed = registry()
        .get(&session)
        .is_some_and(|s| s.breaker_armed(&options.breaker));
    let input = if armed {
        call_input(env, input)?
    } else {
        Input::Null
    };
    let (refusal, any_armed) = {
        let mut registry = registry();
        let refusal = registry
            .session(&session)
            .before_tool(&tool, || input, &options.breaker);
        (refusal, registry.any_armed(&options.breaker))
    };
    note_breakers(env, any_armed)?;
    refusal.into_lisp(env)
}

// The arity is the Lisp function's: one argument per thing the adapter knows.
#[allow(clippy::too_many_arguments)]
#[defun]
fn after_tool<'e>(
    env: &'e Env,
    session: Value<'e>,
    tool: Value<'e>,
    input: Value<'e>,
    result: Value<'e>,
    error: Value<'e>,
    duration: Value<'e>,
    options: Value<'e>,
) -> Result<Value<'e>> {
    let session = session_name(env, session)?;
    let options = loop_options(env, options)?;
    let tool = tool_name(env, tool)?;
    let duration = duration_arg(env, duration)?;
    let (tool, duration) = match tool.and_then(|tool| Ok((tool, duration?))) {
        Ok(checked) => checked,
        Err(error) => return invalid(env, error),
    };
    let input = call_input(env, input)?;
    let ResultText { text, own } = result_text(env, result)?;
    // The ledger takes the text over; a text printed from a result that is
    // not a string is needed again to send back, so it is copied first.
    let printed = if own { None } else { text.clone() };
    let (returned, tripped) = {
        let mut registry = registry();
        let session = registry.session(&session);
        let returned =
            session.after_tool(&tool, input, text, error.is_not_nil(), duration, &options);
        (returned, session.breaker_armed(&options.breaker))
    };
    if tripped {
        note_breakers(env, true)?;
    }
    match (returned, printed) {
        (Some(text), _) => lisp_text(env, &text),
        (None, Some(printed)) => lisp_text(env, &printed),
        // Usually the result goes back untouched: hand back the same string
        // rather than make a copy for the garbage collector to find.
        (None, None) => Ok(result),
    }
}

#[defun]
fn turn_end<'e>(
    env: &'e Env,
    session: Value<'e>,
    had_tool_calls: Value<'e>,
    options: Value<'e>,
) -> Result<Option<String>> {
    let session = session_name(env, session)?;
    let options = loop_options(env, options)?;
    let mut registry = registry();
    let session = registry.session(&session);
    Ok(session
        .guide
        .turn_end(had_tool_calls.is_not_nil(), &session.items, &options.guide))
}

#[defun]
fn pause<'e>(env: &'e Env, session: Value<'e>, reason: Value<'e>) -> Result<Value<'e>> {
    let session = session_name(env, session)?;
    let paused = string_arg(env, reason, "reason")?
        .and_then(|reason| registry().session(&session).guide.pause(&reason));
    checked(env, paused)
}

/// The reason SESSION's model gave with todo_pause, or nil.
#[defun]
fn pause_reason<'e>(env: &'e Env, session: Value<'e>) -> Result<Value<'e>> {
    with_existing(env, session, |env, s| {
        s.and_then(|s| s.guide.pause_reason()).into_lisp(env)
    })
}

/// SESSION's open items on one line, at most ten named: "t2 [in_progress]
/// Fix it; t3 [pending] Test it", or "" with none.
#[defun]
fn open_items<'e>(env: &'e Env, session: Value<'e>) -> Result<Value<'e>> {
    with_existing(env, session, |env, s| {
        lisp_text(
            env,
            &s.map(|s| guide::open_items(&s.items)).unwrap_or_default(),
        )
    })
}

#[defun]
fn complete<'e>(
    env: &'e Env,
    session: Value<'e>,
    message: Value<'e>,
    options: Value<'e>,
) -> Result<Value<'e>> {
    let session = session_name(env, session)?;
    let options = loop_options(env, options)?;
    let message = if message.is_not_nil() {
        string_arg(env, message, "message")?
            .and_then(|text| checked_text(&Input::Str(text), "message", usize::MAX))
    } else {
        Ok(String::new())
    };
    let message = match message {
        Ok(message) => message,
        Err(error) => return invalid(env, error),
    };
    let completion = registry().session(&session).complete(&message, &options);
    env.list([
        kw_allowed.bind(env),
        completion.allowed.into_lisp(env)?,
        kw_text.bind(env),
        completion.text.into_lisp(env)?,
        kw_model_text.bind(env),
        completion.model_text.into_lisp(env)?,
    ])
}

#[defun]
fn report<'e>(env: &'e Env, session: Value<'e>, options: Value<'e>) -> Result<String> {
    let session = session_name(env, session)?;
    let options = loop_options(env, options)?;
    let registry = registry();
    Ok(match registry.get(&session) {
        Some(s) => s.report(None, &options),
        None => Session::default().report(None, &options),
    })
}

#[defun]
fn ledger<'e>(env: &'e Env, session: Value<'e>) -> Result<Value<'e>> {
    with_existing(env, session, |env, s| {
        let entries = s.map(Session::entries).unwrap_or_default();
        let plists = entries
            .iter()
            .map(|e| {
                env.list(&[
                    kw_tool.bind(env),
                    e.tool.as_str().into_lisp(env)?,
                    kw_input.bind(env),
                    e.input.summary().as_ref().into_lisp(env)?,
                    kw_result.bind(env),
                    e.result.as_str().into_lisp(env)?,
                    kw_error.bind(env),
                    e.error.into_lisp(env)?,
                    kw_todo.bind(env),
                    e.todo.as_deref().into_lisp(env)?,
                    kw_time.bind(env),
                    e.time.into_lisp(env)?,
                    kw_duration.bind(env),
                    e.duration.into_lisp(env)?,
                ])
            })
            .collect::<Result<Vec<_>>>()?;
        env.list(&plists)
    })
}

#[defun]
fn breaker<'e>(env: &'e Env, session: Value<'e>) -> Result<Value<'e>> {
    with_existing(env, session, |env, s| {
        let state = s.map(|s| s.breaker.state()).unwrap_or_default();
        let n = |v: u32| i64::from(v).into_lisp(env);
        env.list(&[
            kw_tripped.bind(env),
            state.tripped.into_lisp(env)?,
            kw_reason.bind(env),
            state.reason.as_deref().into_lisp(env)?,
            kw_calls.bind(env),
            n(state.calls)?,
            kw_since_progress.bind(env),
            n(state.since_progress)?,
            kw_same_tool.bind(env),
            n(state.same_tool)?,
            kw_identical.bind(env),
            n(state.identical)?,
            kw_errors.bind(env),
            n(state.errors)?,
            kw_churn.bind(env),
            n(state.churn)?,
        ])
    })
}

#[defun]
fn breaker_reset<'e>(env: &'e Env, session: Value<'e>) -> Result<()> {
    let session = session_name(env, session)?;
    // `efrit-todo--breaker-tripped' is left as it is: undoing a trip never
    // arms a breaker, and the next `before_tool' clears what is stale.
    registry().session(&session).breaker.reset();
    Ok(())
}

/// Starts a new turn of SESSION: fresh breaker, ledger and guide, same list.
#[defun]
fn begin_turn<'e>(env: &'e Env, session: Value<'e>) -> Result<()> {
    let session = session_name(env, session)?;
    // `efrit-todo--breaker-tripped' is left as it is: undoing a trip never
    // arms a breaker, and the next `before_tool' clears what is stale.
    registry().session(&session).begin_turn();
    Ok(())
}

/// STOP as a plist (:reason :time :running).
fn stop_plist<'e>(env: &'e Env, stop: &Stop) -> Result<Value<'e>> {
    env.list([
        kw_reason.bind(env),
        stop.reason.as_str().into_lisp(env)?,
        kw_time.bind(env),
        stop.at.into_lisp(env)?,
        keyword(env, "running")?,
        stop.running.as_deref().into_lisp(env)?,
    ])
}

/// SESSION's command stopped for REASON: kept as a stop when items are
/// open (returns t), else nothing happens (nil).
#[defun]
fn stop<'e>(env: &'e Env, session: Value<'e>, reason: Value<'e>) -> Result<Value<'e>> {
    let session = session_name(env, session)?;
    let stopped = string_arg(env, reason, "reason")?
        .and_then(|reason| registry().session(&session).stop(&reason));
    checked(env, stopped)
}

/// A new command takes stopped SESSION over.
#[defun]
fn resume<'e>(env: &'e Env, session: Value<'e>) -> Result<()> {
    let session = session_name(env, session)?;
    // `efrit-todo--breaker-tripped' is left as it is: undoing a trip never
    // arms a breaker, and the next `before_tool' clears what is stale.
    registry().session(&session).resume();
    Ok(())
}

/// How SESSION stopped with items open, as a plist, or nil.
#[defun]
fn stopped<'e>(env: &'e Env, session: Value<'e>) -> Result<Value<'e>> {
    with_existing(env, session, |env, s| {
        match s.and_then(|s| s.stopped.as_ref()) {
            Some(stop) => stop_plist(env, stop),
            None => ().into_lisp(env),
        }
    })
}

/// Forgets that SESSION stopped; t when it had.
#[defun]
fn forget_stop<'e>(env: &'e Env, session: Value<'e>) -> Result<bool> {
    let session = session_name(env, session)?;
    let mut registry = registry();
    Ok(registry.get(&session).is_some() && registry.session(&session).forget_stop())
}

/// (SESSION . STOP-PLIST) of the session that stopped last with items
/// open, or nil.
#[defun]
fn unfinished(env: &Env) -> Result<Value<'_>> {
    let registry = registry();
    match registry.unfinished() {
        Some((name, stop)) => env.cons(name.into_lisp(env)?, stop_plist(env, stop)?),
        None => ().into_lisp(env),
    }
}

/// Sets `efrit-todo--breaker-tripped', which must be non-nil whenever some
/// session's breaker may refuse a call (tripped, or a count rule at its
/// limit): while it is nil, `efrit-todo-before-tool' lets a call run
/// without asking the module.  Breakers arm only in `after_tool'; the
/// variable is cleared by `before_tool', which knows the limits.
fn note_breakers(env: &Env, any_armed: bool) -> Result<()> {
    env.call(fn_set, (var_breaker_tripped.bind(env), any_armed))?;
    Ok(())
}

#[defun]
fn analyze_request<'e>(env: &'e Env, text: Value<'e>) -> Result<Value<'e>> {
    let text = match string_arg(env, text, "text")? {
        Ok(text) => text,
        Err(error) => return invalid(env, error),
    };
    let analysis = guide::analyze_request(&text);
    env.list([
        kw_complex.bind(env),
        analysis.complex.into_lisp(env)?,
        kw_score.bind(env),
        analysis.score.into_lisp(env)?,
        kw_steps.bind(env),
        (analysis.steps as i64).into_lisp(env)?,
        kw_suggestion.bind(env),
        analysis.suggestion.into_lisp(env)?,
    ])
}

// ---------------------------------------------------------------------------
// History and persistence

fn strings<'e>(env: &'e Env, texts: &[String]) -> Result<Value<'e>> {
    let values = texts
        .iter()
        .map(|t| t.as_str().into_lisp(env))
        .collect::<Result<Vec<_>>>()?;
    env.list(&values)
}

fn keyword<'e>(env: &'e Env, name: &str) -> Result<Value<'e>> {
    env.intern(&format!(":{name}"))
}

/// The changes of SESSION's list, oldest first, as plists.
#[defun]
fn history<'e>(env: &'e Env, session: Value<'e>) -> Result<Value<'e>> {
    with_existing(env, session, |env, s| {
        let Some(s) = s else { return ().into_lisp(env) };
        let plists = s
            .history
            .changes()
            .map(|change| {
                let mut plist = vec![
                    keyword(env, "seq")?,
                    i64::try_from(change.seq)
                        .unwrap_or(i64::MAX)
                        .into_lisp(env)?,
                    keyword(env, "actor")?,
                    env.intern(change.actor.name())?,
                    keyword(env, "kind")?,
                    env.intern(change.kind.name())?,
                    kw_time.bind(env),
                    change.time.into_lisp(env)?,
                    keyword(env, "summary")?,
                    change.summary.as_str().into_lisp(env)?,
                ];
                for (name, ids) in change.ids.groups() {
                    plist.push(keyword(env, name)?);
                    plist.push(strings(env, ids)?);
                }
                plist.extend([
                    keyword(env, "moved")?,
                    change.ids.moved.into_lisp(env)?,
                    keyword(env, "undone")?,
                    change.undone.into_lisp(env)?,
                    keyword(env, "undoes")?,
                    change
                        .undoes
                        .map(|n| i64::try_from(n).unwrap_or(i64::MAX))
                        .into_lisp(env)?,
                    keyword(env, "undoable")?,
                    change.undo.is_some().into_lisp(env)?,
                ]);
                env.list(&plist)
            })
            .collect::<Result<Vec<_>>>()?;
        env.list(&plists)
    })
}

/// Undoes the newest change of SESSION's list; the note for the model, or
/// nil when there is nothing to undo.
#[defun]
fn undo(env: &Env, session: Value) -> Result<Option<String>> {
    let session = session_name(env, session)?;
    Ok(registry().session(&session).undo())
}

/// FAILURES as strings and WARNINGS as (warning TEXT) lists, in one list:
/// what the store has to say to the user.
fn store_news<'e>(env: &'e Env, failures: &[String], warnings: &[String]) -> Result<Value<'e>> {
    let warning = env.intern("warning")?;
    let mut news = failures
        .iter()
        .map(|f| lisp_text(env, f))
        .collect::<Result<Vec<_>>>()?;
    for text in warnings {
        news.push(env.list((warning, lisp_text(env, text)?))?);
    }
    env.list(&news)
}

/// Marks SESSION to be saved into DIR off the caller's path; returns the
/// failures of earlier background saves, and their warnings as (warning
/// TEXT).
#[defun]
fn store_schedule<'e>(env: &'e Env, session: Value<'e>, dir: Value<'e>) -> Result<Value<'e>> {
    let session = session_name(env, session)?;
    let dir = read_cached_text(&LAST_DIR, env, dir, || {
        Ok(dir.into_rust::<String>()?.into())
    })?;
    let failures = store::schedule(&session, std::path::Path::new(&*dir));
    let warnings = store::take_warnings();
    if failures.is_empty() && warnings.is_empty() {
        return ().into_lisp(env);
    }
    store_news(env, &failures, &warnings)
}

thread_local! {
    /// The directory string read last: the Lisp side passes the same
    /// expanded directory on every change.
    static LAST_DIR: LastRead<std::rc::Rc<str>> = const { LastRead::new() };
}

/// Writes every pending save now, waiting at most `store::FLUSH_WAIT`;
/// returns the saves that have not landed and the failures not reported yet.
#[defun]
fn store_flush(env: &Env) -> Result<Value<'_>> {
    store_news(env, &store::flush(), &store::take_warnings())
}

/// Asks the writer thread to write every pending save and retry every
/// failed one; returns the ticket that `store-flush-wait` waits for.
#[defun]
fn store_flush_begin() -> Result<i64> {
    Ok(i64::try_from(store::flush_begin()).unwrap_or(i64::MAX))
}

/// A duration in seconds from Lisp: a number, bounded to an hour.
fn seconds(value: f64) -> std::time::Duration {
    std::time::Duration::from_secs_f64(if value.is_finite() {
        value.clamp(0.0, 3600.0)
    } else {
        0.0
    })
}

/// Waits up to SECONDS (a float) for the flush TICKET; t once it is done.
/// Lisp waits in short slices, so that C-g stops the waiting.
#[defun]
fn store_flush_wait(ticket: i64, wait: f64) -> Result<bool> {
    Ok(store::flush_wait(
        u64::try_from(ticket).unwrap_or(0),
        seconds(wait),
    ))
}

/// The saves that have not landed after the flush TICKET, the failures
/// not reported yet, and, when the flush is not done after WAITED seconds,
/// that it gave up; then the warnings of saves as (warning TEXT).
#[defun]
fn store_flush_end(env: &Env, ticket: i64, waited: f64) -> Result<Value<'_>> {
    let failures = store::flush_end(u64::try_from(ticket).unwrap_or(0), seconds(waited));
    store_news(env, &failures, &store::take_warnings())
}

/// Saves SESSION into DIR now; the file name, or nil for an unknown session.
#[defun]
fn store_save<'e>(env: &'e Env, session: Value<'e>, dir: String) -> Result<Value<'e>> {
    let session = session_name(env, session)?;
    match store::save_now(&session, std::path::Path::new(&dir)) {
        Ok(file) => file
            .map(|f| f.to_string_lossy().into_owned())
            .into_lisp(env),
        Err(e) => env.call(
            "error",
            (
                "Efrit-todo: could not save session %S in %s: %s",
                session.to_string(),
                dir,
                e.to_string(),
            ),
        ),
    }
}

/// The state file of SESSION in DIR.
#[defun]
fn store_file(env: &Env, session: Value, dir: String) -> Result<String> {
    let session = session_name(env, session)?;
    Ok(store::file_path(std::path::Path::new(&dir), &session)
        .to_string_lossy()
        .into_owned())
}

/// `store-restore-within' at the default limits.
#[defun]
fn store_restore<'e>(
    env: &'e Env,
    dir: String,
    only_open: Value<'e>,
    force: Value<'e>,
) -> Result<Value<'e>> {
    restore(env, dir, only_open, force, &Limits::default())
}

/// Reads the sessions saved in DIR into the registry, within the limits
/// todo_write keeps (MAX-ITEMS, MAX-CONTENT).  With ONLY-OPEN, only
/// sessions with unfinished items; a session here whose list is not empty is
/// replaced only with FORCE.  Returns (:restored NAMES :kept NAMES
/// :moved ((FILE AS REASON) ...) :skipped ((FILE REASON) ...)
/// :warnings ((FILE TEXT) ...)).
#[defun]
fn store_restore_within<'e>(
    env: &'e Env,
    dir: String,
    only_open: Value<'e>,
    force: Value<'e>,
    max_items: i64,
    max_content: i64,
) -> Result<Value<'e>> {
    restore(
        env,
        dir,
        only_open,
        force,
        &options(max_items, max_content, 0).limits,
    )
}

fn restore<'e>(
    env: &'e Env,
    dir: String,
    only_open: Value<'e>,
    force: Value<'e>,
    limits: &Limits,
) -> Result<Value<'e>> {
    let report = match store::load_dir(std::path::Path::new(&dir), only_open.is_not_nil(), limits) {
        Ok(report) => report,
        Err(e) => {
            return env.call(
                "error",
                (
                    "Efrit-todo: could not read %s: %s",
                    dir.as_str(),
                    e.to_string(),
                ),
            )
        }
    };
    let (mut restored, mut kept) = (Vec::new(), Vec::new());
    {
        let mut registry = registry();
        // A save of a session read back here, or not wanted back (finished)
        // with no list of that name here, is this Emacs's to save over; a
        // live list kept instead is not.
        let dir_path = std::path::Path::new(&dir);
        for seen in &report.seen {
            if registry.get(&seen.name).is_none() {
                store::adopt(dir_path, seen);
            }
        }
        for loaded in report.loaded {
            let live = registry
                .get(&loaded.name)
                .is_some_and(|s| !s.items.is_empty());
            if live && !force.is_not_nil() {
                kept.push(loaded.name);
            } else {
                let mut session = loaded.session;
                // Ids this Emacs issued since the save keep their meaning.
                if let Some(issued) = registry.get(&loaded.name).map(|s| s.ids.issued()) {
                    session.ids.raise_to(issued);
                }
                registry.install(&loaded.name, session);
                restored.push(loaded.name);
            }
        }
        let installed: std::collections::HashSet<&str> =
            restored.iter().map(String::as_str).collect();
        for seen in report
            .seen
            .iter()
            .filter(|seen| installed.contains(seen.name.as_str()))
        {
            store::adopt(dir_path, seen);
        }
    }
    let path = |p: &std::path::Path| p.to_string_lossy().into_owned();
    let moved = report
        .moved_aside
        .iter()
        .map(|(from, to, why)| env.list((path(from), path(to), why.as_str())))
        .collect::<Result<Vec<_>>>()?;
    let skipped = report
        .skipped
        .iter()
        .map(|(file, why)| env.list((path(file), why.as_str())))
        .collect::<Result<Vec<_>>>()?;
    let warnings = report
        .warnings
        .iter()
        .map(|(file, text)| env.list((path(file), text.as_str())))
        .collect::<Result<Vec<_>>>()?;
    env.list([
        keyword(env, "restored")?,
        strings(env, &restored)?,
        keyword(env, "kept")?,
        strings(env, &kept)?,
        keyword(env, "moved")?,
        env.list(&moved)?,
        keyword(env, "skipped")?,
        env.list(&skipped)?,
        keyword(env, "warnings")?,
        env.list(&warnings)?,
    ])
}
