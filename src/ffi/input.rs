//! Reading Lisp values: tool inputs, strings and arguments into the plain
//! types of the pure modules.

use super::errors::{guarded, invalid, valid};
use super::raw::{Handle, Key as RawKey, Raw};
use super::symbols::*;
use crate::validate::{checked_name, Input, InvalidInput, Key, MAX_DEPTH, MERGE};
use emacs::{defun, Env, Result, Value, Vector};
use serde_json::Value as Json;

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

/// Spare strings and pair vectors, taken back from inputs already used
/// (`recycle'), so that reading the next input does not allocate: a
/// todo_write of 1000 items reads 3000 strings and 1000 tables, and
/// allocating and freeing them is a sixth of its time.
struct Spares {
    strings: Vec<String>,
    pairs: Vec<Vec<(Key, Input)>>,
    /// The items of the last todo_write, kept whole: the next one, most
    /// often the same list with a status changed, is read into them in
    /// place (`todo_write_input').
    items: Vec<Input>,
    /// The buffer `short_text' reads into, here rather than in
    /// `STRING_BUFFER' so that a text read takes one thread-local.
    buffer: Vec<u8>,
}

/// The most spares of each kind kept: a full list of 1000 items, and some.
const MAX_SPARES: usize = 4096;

/// A spare string kept no longer than this: a long text is rare, and
/// holding on to it would only keep its memory.
const MAX_SPARE_BYTES: usize = 256;

/// A spare pair vector kept with room for no more than this: a todo
/// item has eight keys at most.
const MAX_SPARE_PAIRS: usize = 16;

thread_local! {
    static SPARES: std::cell::RefCell<Spares> = std::cell::RefCell::new(Spares {
        strings: Vec::new(),
        pairs: Vec::new(),
        items: Vec::new(),
        buffer: vec![0; SHORT_STRING_BYTES],
    });
}

/// TEXT in a string of its own: SPARE, when there is one.
fn owned_text(text: &str, spare: Option<String>) -> String {
    match spare {
        Some(mut string) => {
            string.clear();
            string.push_str(text);
            string
        }
        None => text.to_string(),
    }
}

/// An empty vector of pairs with room for CAPACITY, a spare one when
/// there is one.
fn pair_vec(capacity: usize) -> Vec<(Key, Input)> {
    let spare = SPARES.with(|spares| spares.borrow_mut().pairs.pop());
    match spare {
        Some(mut pairs) => {
            pairs.reserve(capacity);
            pairs
        }
        None => Vec::with_capacity(capacity),
    }
}

/// Takes INPUT apart once it is no longer needed, keeping its strings and
/// pair vectors for the next input read.
pub(super) fn recycle(input: Input) {
    SPARES.with(|spares| {
        let mut spares = spares.borrow_mut();
        let mut input = input;
        if let Input::Map(pairs) = &mut input {
            if let Some((_, Input::Array(items))) =
                pairs.iter_mut().find(|(key, _)| key == TODOS_KEY)
            {
                let previous = std::mem::replace(&mut spares.items, std::mem::take(items));
                keep_spares(&mut spares, Input::Array(previous));
            }
        }
        keep_spares(&mut spares, input);
    });
}

fn keep_spares(spares: &mut Spares, input: Input) {
    match input {
        Input::Str(string)
            if spares.strings.len() < MAX_SPARES && string.capacity() <= MAX_SPARE_BYTES =>
        {
            spares.strings.push(string);
        }
        Input::Array(items) => {
            for item in items {
                keep_spares(spares, item);
            }
        }
        Input::Map(mut pairs) => {
            for (_, value) in pairs.drain(..) {
                keep_spares(spares, value);
            }
            if spares.pairs.len() < MAX_SPARES && pairs.capacity() <= MAX_SPARE_PAIRS {
                spares.pairs.push(pairs);
            }
        }
        _ => {}
    }
}

/// VALUE's text in one module call, when it is a string that fits the
/// buffer: None when it is not, Some(Err) when it is not valid UTF-8.
/// Only for values that are short strings all but always: otherwise the
/// failed call costs a caught signal, which `debug-on-signal' would show.
fn short_text(value: Value) -> Option<std::result::Result<String, std::str::Utf8Error>> {
    SPARES.with(|spares| {
        let mut spares = spares.borrow_mut();
        let Spares {
            buffer, strings, ..
        } = &mut *spares;
        value
            .copy_string_contents(&mut buffer[..])
            .ok()
            .map(|bytes| std::str::from_utf8(bytes).map(|text| owned_text(text, strings.pop())))
    })
}

/// Lists, vectors and hash tables longer than this are not walked: a todo
/// list or tool input never comes near it, and walking one would only waste
/// time before the error.
const MAX_ELEMENTS: usize = 100_000;

/// The keys validation reads.  An `equal' hash table holding only these
/// (every todo item Efrit parses) is read with one `gethash' per key instead
/// of listing its keys, which allocates and is most of the cost of a write.
/// A todo item's keys come first (`ITEM_KEYS' of them), then a todo_write
/// input's own.
pub(super) const KNOWN_KEYS: [&str; 11] = [
    "content",
    "status",
    "activeForm",
    "id",
    "active_form",
    "parent",
    "description",
    "blocked_by",
    "owner",
    TODOS_KEY,
    MERGE,
];

/// How many of `KNOWN_KEYS' a todo item may have.
const ITEM_KEYS: usize = 9;

const TODOS_KEY: &str = "todos";

pub(super) static KNOWN_KEY_REFS: once_cell::sync::OnceCell<Vec<(&'static str, emacs::GlobalRef)>> =
    once_cell::sync::OnceCell::new();

/// The entries of a todo item's table: content, status, activeForm, the
/// first of `KNOWN_KEYS'.
const USUAL_KEYS: usize = 3;

/// The number 3, the entries of a todo item's table (content, status,
/// activeForm).
pub(super) static USUAL_COUNT: once_cell::sync::OnceCell<emacs::GlobalRef> =
    once_cell::sync::OnceCell::new();

/// What `gethash' returns for a key that is absent, told apart from nil.
pub(super) static ABSENT: once_cell::sync::OnceCell<emacs::GlobalRef> =
    once_cell::sync::OnceCell::new();

/// Reads TABLE through the known keys when they are all it holds; None when
/// it holds others (then its keys must be listed).
fn known_fields(
    env: &Env,
    table: Value,
    count: usize,
    depth: usize,
) -> Result<Option<Vec<(Key, Input)>>> {
    let (Some(keys), Some(absent)) = (KNOWN_KEY_REFS.get(), ABSENT.get()) else {
        return Ok(None);
    };
    if count > keys.len() {
        return Ok(None);
    }
    let absent = absent.bind(env);
    let mut pairs = pair_vec(count);
    for (index, (name, key)) in keys[..ITEM_KEYS].iter().enumerate() {
        if pairs.len() == count {
            break;
        }
        let value = env.call(fn_gethash, (key.bind(env), table, absent))?;
        if value != absent {
            pairs.push((Key::Borrowed(name), text_or_input(env, value, depth + 1)?));
        } else if index == 0 {
            // Every todo item has content; a table without it is some tool's
            // input, read by listing its keys.
            break;
        }
    }
    if pairs.len() == count {
        Ok(Some(pairs))
    } else {
        recycle(Input::Map(pairs));
        Ok(None)
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
    pub(super) static STRING_BUFFER: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; SHORT_STRING_BYTES]);
}

pub(super) fn is(env: &Env, value: Value, symbol: &emacs::OnceGlobalRef) -> bool {
    value == symbol.bind(env)
}

/// The name of a symbol; a name that is not valid UTF-8 (a symbol interned
/// from raw bytes) reads as U+FFFD rather than failing the whole call.
pub(super) fn symbol_name(value: Value) -> Result<String> {
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
            pairs.push((key.into(), to_input(env, at(i + 1)?, depth + 1)?));
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
            pairs.push((key.into(), to_input(env, at(i)?.cdr()?, depth + 1)?));
        }
        return Ok(Input::Map(pairs));
    }
    vector_to_input(env, elements, depth)
}

fn vector_to_input(env: &Env, elements: Vector, depth: usize) -> Result<Input> {
    let mut items = Vec::with_capacity(elements.len());
    for i in 0..elements.len() {
        let element = elements.get(i)?;
        let item = match usual_item(env, element)? {
            Some(item) => item,
            None => to_input(env, element, depth + 1)?,
        };
        items.push(item);
    }
    Ok(Input::Array(items))
}

/// ELEMENT read as a todo item the way Efrit's JSON makes nearly all of
/// them: a table of exactly content, status and activeForm, each a short
/// string.  None for anything else, which `to_input' then reads in full.
/// A todo_write's table is read by `todo_write_input'; this is for the
/// items of other vectors (a bare vector from a Lisp caller), with the
/// module calls it cannot do without and the spares touched once.
fn usual_item(env: &Env, element: Value) -> Result<Option<Input>> {
    let (Some(keys), Some(absent), Some(usual)) =
        (KNOWN_KEY_REFS.get(), ABSENT.get(), USUAL_COUNT.get())
    else {
        return Ok(None);
    };
    if !is(env, env.type_of(element)?, ty_hash_table)
        || env.call(fn_hash_table_count, (element,))? != usual.bind(env)
    {
        return Ok(None);
    }
    let absent = absent.bind(env);
    let mut values = [absent; USUAL_KEYS];
    for (value, (_, key)) in values.iter_mut().zip(keys) {
        *value = env.call(fn_gethash, (key.bind(env), element, absent))?;
        if *value == absent {
            return Ok(None);
        }
    }
    Ok(usual_fields(values, |value, buffer| {
        value.copy_string_contents(buffer).ok()
    }))
}

/// The item of the usual three fields whose VALUES (content, status,
/// activeForm) READ copies into a buffer, their bytes returned; None when
/// one is not a string that fits or is not UTF-8, and the item must be
/// read in full.  The strings and the pair vector come from the spares.
fn usual_fields<V: Copy>(
    values: [V; USUAL_KEYS],
    read: impl for<'b> Fn(V, &'b mut [u8]) -> Option<&'b [u8]>,
) -> Option<Input> {
    SPARES.with(|spares| {
        let mut spares = spares.borrow_mut();
        let mut fields = spares
            .pairs
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(USUAL_KEYS));
        let Spares {
            buffer, strings, ..
        } = &mut *spares;
        for (value, name) in values.into_iter().zip(KNOWN_KEYS) {
            let text =
                read(value, &mut buffer[..]).and_then(|bytes| std::str::from_utf8(bytes).ok());
            match text {
                Some(text) => fields.push((
                    Key::Borrowed(name),
                    Input::Str(owned_text(text, strings.pop())),
                )),
                None => break,
            }
        }
        if fields.len() == USUAL_KEYS {
            Some(Input::Map(fields))
        } else {
            keep_spares(&mut spares, Input::Map(fields));
            None
        }
    })
}

/// A todo_write's INPUT read through direct module calls (see raw.rs): a
/// table of todos, a vector, and perhaps merge, as `tool_input' reads it.
/// Its items of the usual three fields are read here, any other by
/// `to_input'.  None when INPUT has another shape, for `tool_input'.
pub(super) fn todo_write_input<'e>(raw: &Raw<'e>, input: Handle<'e>) -> Result<Option<Input>> {
    if !raw.is_table(input) {
        return Ok(None);
    }
    let count = raw.count(input)?;
    if !(1..=2).contains(&count) {
        return Ok(None);
    }
    let Some(todos) = raw.lookup(input, RawKey::Todos)? else {
        return Ok(None);
    };
    let merge = match count {
        1 => None,
        _ => match raw.lookup(input, RawKey::Merge)? {
            Some(merge) => Some(merge),
            None => return Ok(None),
        },
    };
    if !raw.is_vector(todos) {
        return Ok(None);
    }
    let length = raw.vector_len(todos);
    if length > MAX_ELEMENTS {
        return Ok(None);
    }
    let mut items = SPARES.with(|spares| std::mem::take(&mut spares.borrow_mut().items));
    items.reserve(length.saturating_sub(items.len()));
    for i in 0..length {
        // Never None (a vector's length is fixed), but not taken on trust.
        let Some(element) = raw.element(todos, i) else {
            items.truncate(i);
            break;
        };
        let values = raw_usual_values(raw, element)?;
        if let (Some(values), Some(place)) = (values, items.get_mut(i)) {
            if refill_usual(place, values, |value, buffer| raw.text(value, buffer)) {
                continue;
            }
        }
        let read = values.and_then(|values| usual_fields(values, |v, b| raw.text(v, b)));
        let item = match read {
            Some(item) => item,
            None => to_input(raw.env(), raw.value(element), 2)?,
        };
        match items.get_mut(i) {
            Some(place) => recycle(std::mem::replace(place, item)),
            None => items.push(item),
        }
    }
    if items.len() > length {
        recycle(Input::Array(items.split_off(length)));
    }
    if items.len() < length {
        recycle(Input::Array(items));
        return Ok(None);
    }
    let mut pairs = pair_vec(1 + usize::from(merge.is_some()));
    pairs.push((Key::Borrowed(TODOS_KEY), Input::Array(items)));
    if let Some(merge) = merge {
        pairs.push((
            Key::Borrowed(MERGE),
            to_input(raw.env(), raw.value(merge), 1)?,
        ));
    }
    Ok(Some(Input::Map(pairs)))
}

/// The content, status and activeForm of ELEMENT when it is a table of
/// these three keys, through direct module calls; None otherwise.
fn raw_usual_values<'e>(
    raw: &Raw<'e>,
    element: Handle<'e>,
) -> Result<Option<[Handle<'e>; USUAL_KEYS]>> {
    if !raw.is_table(element) || !raw.has_three(element)? {
        return Ok(None);
    }
    let mut values = [element; USUAL_KEYS];
    for (value, key) in values
        .iter_mut()
        .zip([RawKey::Content, RawKey::Status, RawKey::ActiveForm])
    {
        match raw.lookup(element, key)? {
            Some(found) => *value = found,
            None => return Ok(None),
        }
    }
    Ok(Some(values))
}

/// Reads VALUES, an item's content, status and activeForm (see
/// `usual_fields'), into PLACE, an item of the usual three fields read
/// before, reusing its strings; false when PLACE has another shape or a
/// value is not a short UTF-8 string (PLACE may then hold some of the
/// new texts: the caller replaces it).
fn refill_usual<V: Copy>(
    place: &mut Input,
    values: [V; USUAL_KEYS],
    read: impl for<'b> Fn(V, &'b mut [u8]) -> Option<&'b [u8]>,
) -> bool {
    let Input::Map(fields) = place else {
        return false;
    };
    if fields.len() != USUAL_KEYS {
        return false;
    }
    SPARES.with(|spares| {
        let buffer = &mut spares.borrow_mut().buffer;
        for ((key, field), (value, name)) in
            fields.iter_mut().zip(values.into_iter().zip(KNOWN_KEYS))
        {
            let Input::Str(string) = field else {
                return false;
            };
            if key != name {
                return false;
            }
            match read(value, &mut buffer[..]).and_then(|bytes| std::str::from_utf8(bytes).ok()) {
                Some(text) => {
                    string.clear();
                    string.push_str(text);
                }
                None => return false,
            }
        }
        true
    })
}

/// Walks a Lisp value into an `Input`.  Only Emacs failures are errors here;
/// anything the model or caller got wrong becomes a value that validation
/// reports with its field path.
pub(super) fn to_input(env: &Env, value: Value, depth: usize) -> Result<Input> {
    if depth > MAX_DEPTH {
        return Ok(Input::Invalid(format!(
            "nested deeper than {MAX_DEPTH} levels"
        )));
    }
    if !value.is_not_nil() {
        return Ok(Input::Null);
    }
    let ty = env.type_of(value)?;
    // Types in the order they are met: tables, vectors and strings
    // (Efrit's JSON) first, as each test is a module call.  A todo item's texts are read
    // as strings before they come here (`text_or_input'), its table not.
    if is(env, ty, ty_hash_table) {
        return table_to_input(env, value, depth);
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
    if is(env, ty, ty_string) {
        return Ok(match lisp_string(value) {
            Some(text) => Input::Str(text),
            None => Input::Invalid("a string that is not valid UTF-8".into()),
        });
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
    counted_table_to_input(env, table, table_count(env, table)?, depth)
}

/// The number of entries of TABLE.
fn table_count(env: &Env, table: Value) -> Result<usize> {
    let count = env.call(fn_hash_table_count, (table,))?;
    // A todo item holds three keys all but always: a test of identity
    // costs less than reading the number.
    let count: i64 = match USUAL_COUNT.get() {
        Some(usual) if count == usual.bind(env) => 3,
        _ => count.into_rust()?,
    };
    Ok(usize::try_from(count).unwrap_or(0))
}

/// A tool input's TABLE: todo_write's todos, and merge, read with a lookup
/// each; any other table as `table_to_input' reads it.
fn tool_table(env: &Env, table: Value) -> Result<Input> {
    let count = table_count(env, table)?;
    if let (1..=2, Some(keys), Some(absent)) = (count, KNOWN_KEY_REFS.get(), ABSENT.get()) {
        let absent = absent.bind(env);
        let mut pairs = pair_vec(count);
        for (name, key) in &keys[ITEM_KEYS..ITEM_KEYS + count] {
            let value = env.call(fn_gethash, (key.bind(env), table, absent))?;
            if value == absent {
                break;
            }
            pairs.push((Key::Borrowed(name), to_input(env, value, 1)?));
        }
        if pairs.len() == count {
            return Ok(Input::Map(pairs));
        }
        recycle(Input::Map(pairs));
    }
    counted_table_to_input(env, table, count, 0)
}

/// `table_to_input' for TABLE of COUNT entries.
fn counted_table_to_input(env: &Env, table: Value, count: usize, depth: usize) -> Result<Input> {
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
pub(super) fn call_input(env: &Env, value: Value) -> Result<Input> {
    if value.is_not_nil() && is(env, env.type_of(value)?, ty_hash_table) {
        return walk_table(env, value, 4, 0);
    }
    to_input(env, value, 0)
}

/// One hash table being walked by `maphash' into `table_entry'.
struct TableWalk {
    depth: usize,
    pairs: Vec<(Key, Input)>,
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
    guarded(env, || {
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
                    Some((key, value)) => walk.pairs.push((key.into(), value)),
                    None => walk.bad_key = true,
                }
            }
        });
        Ok(())
    })
}

/// Reads a tool input: Lisp data as it is, or a string as JSON text.
pub(super) fn tool_input(
    env: &Env,
    value: Value,
) -> Result<std::result::Result<Input, InvalidInput>> {
    let ty = env.type_of(value)?;
    // A table (Efrit's JSON) as `to_input' reads it, without testing its
    // type again.
    if is(env, ty, ty_hash_table) {
        return tool_table(env, value).map(Ok);
    }
    if is(env, ty, ty_string) {
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

/// A string argument named FIELD; anything else is the caller's mistake.
pub(super) fn string_arg(
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
pub(super) struct ResultText {
    pub(super) text: Option<String>,
    pub(super) own: bool,
}

/// Lisp text of a tool result: strings as they are, nil as no output.
pub(super) fn result_text(env: &Env, result: Value) -> Result<ResultText> {
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
pub(super) fn tool_name(
    env: &Env,
    value: Value,
) -> Result<std::result::Result<String, InvalidInput>> {
    let name = match short_text(value) {
        Some(Ok(name)) => Ok(name),
        _ => string_arg(env, value, "name")?,
    };
    Ok(name.and_then(|name| checked_name(name, "name")))
}

/// DURATION in seconds: nil or a number.
pub(super) fn duration_arg(
    env: &Env,
    value: Value,
) -> Result<std::result::Result<Option<f64>, InvalidInput>> {
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

/// A count argument named FIELD: an integer, a negative one read as 0.
pub(super) fn count_arg(env: &Env, value: Value, field: &str) -> Result<usize> {
    match value.into_rust::<i64>() {
        Ok(n) => Ok(usize::try_from(n.max(0)).unwrap_or(usize::MAX)),
        Err(_) => invalid(env, InvalidInput::new(field, "expected an integer")),
    }
}

/// A number of seconds named FIELD (an integer or a float) as a duration,
/// bounded to an hour; one that is not finite counts as none.
pub(super) fn seconds_arg(env: &Env, value: Value, field: &str) -> Result<std::time::Duration> {
    let seconds = |x: f64| {
        std::time::Duration::from_secs_f64(if x.is_finite() {
            x.clamp(0.0, 3600.0)
        } else {
            0.0
        })
    };
    match to_input(env, value, 0)? {
        Input::Int(n) => Ok(seconds(n as f64)),
        Input::Float(x) => Ok(seconds(x)),
        other => invalid(
            env,
            InvalidInput::new(
                field,
                format!("expected a number, got {}", other.describe()),
            ),
        ),
    }
}

/// A string argument named FIELD, or the signal naming it.
pub(super) fn text_arg(env: &Env, value: Value, field: &str) -> Result<String> {
    valid(env, string_arg(env, value, field)?)
}
