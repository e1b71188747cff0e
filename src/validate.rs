//! Input checking and the tool schemas, both driven by one table of fields so
//! that what the model is told is exactly what is enforced.

use std::collections::hash_map::Entry;

use rustc_hash::FxHashMap;
use serde_json::{json, Value as Json};
use thiserror::Error;

use crate::model::{ids_rise, Status};

/// A key of an object: the keys validation knows are kept without a copy.
pub type Key = std::borrow::Cow<'static, str>;

/// A value that arrived from Lisp or JSON, already taken apart.  Conversion
/// never fails: what cannot be represented becomes `Unsupported` or `Invalid`,
/// so that the error can name the field it sits in.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Array(Vec<Input>),
    Map(Vec<(Key, Input)>),
    /// A Lisp object with no JSON meaning (buffer, marker, symbol, ...); the
    /// text describes it.
    Unsupported(String),
    /// A value that could not be read at all (invalid UTF-8, circular list,
    /// nesting too deep); the text says why.
    Invalid(String),
}

impl Input {
    /// An object of PAIRS, its keys taken as they are.
    pub fn map_of<K: Into<Key>>(pairs: impl IntoIterator<Item = (K, Input)>) -> Input {
        Input::Map(pairs.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }
}

impl Input {
    pub fn describe(&self) -> String {
        match self {
            Input::Null => "nil".into(),
            Input::Bool(b) => format!("boolean {b}"),
            Input::Int(n) => format!("integer {n}"),
            // A huge float printed in full is 300 digits of error message.
            Input::Float(x) if x.is_finite() && *x != 0.0 && !(1e-6..1e15).contains(&x.abs()) => {
                format!("number {x:e}")
            }
            Input::Float(x) => format!("number {x}"),
            Input::Str(s) => format!("string {}", quote(s)),
            Input::Array(items) => format!("an array of {} elements", items.len()),
            Input::Map(_) => "an object".into(),
            Input::Unsupported(what) => what.clone(),
            Input::Invalid(why) => why.clone(),
        }
    }

    pub fn get(&self, key: &str) -> Option<&Input> {
        match self {
            Input::Map(pairs) => pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Converts parsed JSON; nesting beyond MAX_DEPTH becomes `Invalid`.
    pub fn from_json(value: &Json) -> Input {
        Input::from_json_at(value, 0)
    }

    fn from_json_at(value: &Json, depth: usize) -> Input {
        if depth > MAX_DEPTH {
            return Input::Invalid(format!("nested deeper than {MAX_DEPTH} levels"));
        }
        match value {
            Json::Null => Input::Null,
            Json::Bool(b) => Input::Bool(*b),
            Json::Number(n) => n
                .as_i64()
                .map(Input::Int)
                .unwrap_or_else(|| Input::Float(n.as_f64().unwrap_or(f64::NAN))),
            Json::String(s) => Input::Str(s.clone()),
            Json::Array(items) => Input::Array(
                items
                    .iter()
                    .map(|v| Input::from_json_at(v, depth + 1))
                    .collect(),
            ),
            Json::Object(map) => Input::Map(
                map.iter()
                    .map(|(k, v)| (k.clone().into(), Input::from_json_at(v, depth + 1)))
                    .collect(),
            ),
        }
    }
}

/// Deeper than any real tool input; stops hostile nesting before it costs stack.
pub const MAX_DEPTH: usize = 32;

/// Text shown in messages, cut so that a 1 MB string does not become a 1 MB error.
pub fn quote(text: &str) -> String {
    const SHOWN: usize = 60;
    let mut shown: String = text.chars().take(SHOWN).collect();
    if text.chars().nth(SHOWN).is_some() {
        shown.push_str("...");
    }
    format!("{shown:?}")
}

/// An input the model or a caller got wrong.  `path` names the field, e.g.
/// `todos[2].status`, so the model can fix exactly that.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("{path}: {message}")]
pub struct InvalidInput {
    pub path: String,
    pub message: String,
}

impl InvalidInput {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> InvalidInput {
        InvalidInput {
            path: path.into(),
            message: message.into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_items: usize,
    pub max_content_chars: usize,
    pub max_description_chars: usize,
    /// Most blockers one item may wait for.
    pub max_blockers: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_items: 1000,
            max_content_chars: 2000,
            max_description_chars: 4000,
            max_blockers: 50,
        }
    }
}

/// What a field of a todo item may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    Text,
    StatusEnum,
    /// A status, or `deleted` to remove the item (TaskUpdate).
    TaskStatusEnum,
    /// Item ids: `t3`, `3` or `#3` each.
    IdList,
    /// One item id, `t3`, `3` or `#3`.
    Id,
}

#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub name: &'static str,
    /// Other spellings accepted on input (never advertised).
    pub aliases: &'static [&'static str],
    pub kind: FieldKind,
    pub required: bool,
    pub description: &'static str,
}

pub const ID: Field = Field {
    name: "id",
    aliases: &[],
    kind: FieldKind::Text,
    required: false,
    description: "The id an earlier todo_write result gave this item (t1, t2, ...). Omit it only for a new item; the backend assigns ids.",
};
pub const CONTENT: Field = Field {
    name: "content",
    aliases: &[],
    kind: FieldKind::Text,
    required: true,
    description: "What to do, in the imperative (\"Fix the parser bug\"). Required for a new item; with merge, send it only to reword an item.",
};
pub const STATUS: Field = Field {
    name: "status",
    aliases: &[],
    kind: FieldKind::StatusEnum,
    required: true,
    description: "pending, in_progress (at most one item), completed, or cancelled for work that will not be done. Required unless merge is true.",
};
pub const ACTIVE_FORM: Field = Field {
    name: "activeForm",
    aliases: &["active_form"],
    kind: FieldKind::Text,
    required: false,
    description:
        "The same step in the present continuous (\"Fixing the parser bug\"), shown while it runs.",
};

pub const PARENT: Field = Field {
    name: "parent",
    aliases: &[],
    kind: FieldKind::Text,
    required: false,
    description: "The id of the item this one is a step of (up to 3 levels). Omit for a top-level item; with merge, give it to move an item, or \"\" to make it top-level.",
};

pub const DESCRIPTION: Field = Field {
    name: "description",
    aliases: &[],
    kind: FieldKind::Text,
    required: false,
    description: "Optional details the step needs (what, where, how to check it). Shown only when asked for, never in every result.",
};

pub const BLOCKED_BY: Field = Field {
    name: "blocked_by",
    aliases: &["blockedBy"],
    kind: FieldKind::IdList,
    required: false,
    description: "Ids of the items that must be finished before this one can start ([\"t1\", \"t2\"]). With merge it replaces the item's blockers; [] removes them.",
};

pub const OWNER: Field = Field {
    name: "owner",
    aliases: &[],
    kind: FieldKind::Text,
    required: false,
    description: "Who works on the item (an agent's name). Optional; with merge, \"\" clears it.",
};

pub const TODO_FIELDS: [Field; 8] = [
    ID,
    CONTENT,
    STATUS,
    ACTIVE_FORM,
    PARENT,
    DESCRIPTION,
    BLOCKED_BY,
    OWNER,
];

/// The key of a todo_write input that asks for a partial update.
pub const MERGE: &str = "merge";

const MERGE_DESCRIPTION: &str = "true to send only changes: an item with an id updates just the fields it carries, an item without an id is added at the end, items left out stay as they are. Omit it to send the whole new list.";

pub const TODO_WRITE_DESCRIPTION: &str = "Plan and track multi-step work. Call it first with the whole plan when a request needs three or more steps, first item in_progress; the result gives each item an id.

After that, send only what changed, by id, with merge:
{\"merge\": true, \"todos\": [{\"id\": \"t1\", \"status\": \"completed\"}, {\"id\": \"t2\", \"status\": \"in_progress\"}]}

Rules:
- Exactly one item in_progress while you work; mark it completed as soon as it is done.
- Set cancelled for work you will not do; never leave an item out to drop it.
- Without merge, the list you send replaces the whole list: send every item, with its id.
- content is imperative (\"Run the tests\"), activeForm is present continuous (\"Running the tests\").
- A step of a bigger item names it as parent (its id), up to 3 levels; complete or cancel the steps before their parent.

The result names the items that changed, with their ids, and what to do next.";

/// One item as the model proposed it, checked but not yet reconciled.  It
/// borrows its texts from the input: most of them equal what the list
/// already holds, and reconcile copies only the ones that are new.
#[derive(Debug, Clone, PartialEq)]
pub struct ProposedItem<'a> {
    pub id: Option<&'a str>,
    pub content: &'a str,
    pub active_form: Option<&'a str>,
    pub status: Status,
    /// The id of the item this one is a step of; None for a top-level item.
    pub parent: Option<&'a str>,
    pub description: Option<&'a str>,
    /// The ids it waits for, spelled as ids (`3` and `#3` became `t3`).
    pub blocked_by: Vec<String>,
    pub owner: Option<&'a str>,
}

/// The value of each of SPECS in MAP: the first pair with its name, else
/// the first with one of its aliases, null counting as absent.  One pass
/// over the pairs finds all the names.
fn fields<'a, const N: usize>(map: &'a Input, specs: &[Field; N]) -> [Option<&'a Input>; N] {
    let mut found: [Option<&Input>; N] = [None; N];
    if let Input::Map(pairs) = map {
        // Nearly every item holds its first three fields in order (Efrit's
        // JSON as the module reads it), one string each: found at once.
        if let [(k0, v0), (k1, v1), (k2, v2)] = pairs.as_slice() {
            if let Some(first) = specs.iter().position(|spec| spec.name == k0.as_ref()) {
                let rest = &specs[first..];
                if rest.len() >= 3
                    && rest[1].name == k1.as_ref()
                    && rest[2].name == k2.as_ref()
                    && [v0, v1, v2].iter().all(|v| matches!(v, Input::Str(_)))
                {
                    found[first] = Some(v0);
                    found[first + 1] = Some(v1);
                    found[first + 2] = Some(v2);
                    return found;
                }
            }
        }
        for (key, value) in pairs {
            if let Some(n) = specs.iter().position(|spec| key.as_ref() == spec.name) {
                found[n].get_or_insert(value);
            }
        }
    }
    for (slot, spec) in found.iter_mut().zip(specs) {
        if slot.is_none() {
            *slot = spec.aliases.iter().find_map(|alias| map.get(alias));
        }
    }
    found.map(|value| value.filter(|value| !matches!(value, Input::Null)))
}

/// Checks a string for what would break the buffer, the prompt or the JSON
/// sent back to the API.
pub fn checked_text(value: &Input, path: &str, max_chars: usize) -> Result<String, InvalidInput> {
    checked_text_at(value, || path.to_string(), max_chars)
}

/// `checked_text` with the path built only for an error: a write of 1000
/// items should not format 4000 paths it never shows.
fn checked_text_at(
    value: &Input,
    path: impl Fn() -> String,
    max_chars: usize,
) -> Result<String, InvalidInput> {
    checked_str_at(value, path, max_chars).map(str::to_string)
}

fn checked_str_at(
    value: &Input,
    path: impl Fn() -> String,
    max_chars: usize,
) -> Result<&str, InvalidInput> {
    let text = match value {
        Input::Str(s) => s,
        other => {
            return Err(InvalidInput::new(
                path(),
                format!("expected a string, got {}", other.describe()),
            ))
        }
    };
    free_of_nul(text, &path)?;
    // Bytes bound characters from above, so short texts skip the count.
    if text.len() > max_chars {
        let chars = text.chars().count();
        if chars > max_chars {
            return Err(InvalidInput::new(
                path(),
                format!("is {chars} characters long; the limit is {max_chars}"),
            ));
        }
    }
    Ok(text)
}

fn free_of_nul(text: &str, path: impl Fn() -> String) -> Result<(), InvalidInput> {
    if text.contains('\0') {
        Err(InvalidInput::new(path(), "contains a NUL character"))
    } else {
        Ok(())
    }
}

/// TEXT as a name: free of NUL and not blank.  Takes the string over rather
/// than copy it, as `checked_text` does: names are checked on every tool call.
pub fn checked_name(text: String, path: &str) -> Result<String, InvalidInput> {
    free_of_nul(&text, || path.to_string())?;
    non_blank(text, path)
}

pub fn non_blank(text: String, path: &str) -> Result<String, InvalidInput> {
    if text.trim().is_empty() {
        Err(InvalidInput::new(path, "must not be empty"))
    } else {
        Ok(text)
    }
}

pub fn status_choices() -> String {
    let names: Vec<&str> = Status::ALL.iter().map(|s| s.wire_name()).collect();
    format!(
        "{}, {} or {}",
        names[..names.len() - 2].join(", "),
        names[names.len() - 2],
        names[names.len() - 1]
    )
}

pub fn parse_status(value: &Input, path: &str) -> Result<Status, InvalidInput> {
    parse_status_at(value, || path.to_string())
}

fn parse_status_at(value: &Input, path: impl Fn() -> String) -> Result<Status, InvalidInput> {
    let got = match value {
        Input::Str(text) => match Status::parse(text) {
            Some(status) => return Ok(status),
            None => quote(text),
        },
        other => other.describe(),
    };
    Err(InvalidInput::new(
        path(),
        format!("expected {}, got {got}", status_choices()),
    ))
}

fn parse_item<'a>(
    value: &'a Input,
    index: usize,
    limits: &Limits,
) -> Result<ProposedItem<'a>, InvalidInput> {
    if !matches!(value, Input::Map(_)) {
        return Err(InvalidInput::new(
            format!("todos[{index}]"),
            format!(
                "expected an object with content and status, got {}",
                value.describe()
            ),
        ));
    }
    let at = |spec: &Field| format!("todos[{index}].{}", spec.name);
    let [id_value, content_value, status_value, active_form_value, parent_value, description_value, blocked_by_value, owner_value] =
        fields(value, &TODO_FIELDS);
    let text_of =
        |spec: &Field, found: Option<&'a Input>| -> Result<Option<&'a str>, InvalidInput> {
            match found {
                None if spec.required => Err(InvalidInput::new(at(spec), "is required")),
                None => Ok(None),
                Some(v) => checked_str_at(v, || at(spec), limits.max_content_chars).map(Some),
            }
        };
    // What trim() would leave empty, found without trimming.
    let blank = |text: &str| text.chars().all(char::is_whitespace);
    let id = match text_of(&ID, id_value)? {
        Some(id) if blank(id) => return Err(InvalidInput::new(at(&ID), "must not be empty")),
        Some(id) => Some(id.trim()),
        None => None,
    };
    let content = text_of(&CONTENT, content_value)?.unwrap_or_default();
    if blank(content) {
        return Err(InvalidInput::new(at(&CONTENT), "must not be empty"));
    }
    let status = match status_value {
        None => {
            return Err(InvalidInput::new(
                at(&STATUS),
                format!("is required: one of {}", status_choices()),
            ))
        }
        Some(v) => parse_status_at(v, || at(&STATUS))?,
    };
    let active_form = text_of(&ACTIVE_FORM, active_form_value)?.filter(|s| !blank(s));
    // In a whole list, "" and no parent both mean a top-level item.
    let parent = parent_id(text_of(&PARENT, parent_value)?);
    let description = description_value
        .map(|v| checked_str_at(v, || at(&DESCRIPTION), limits.max_description_chars))
        .transpose()?
        .filter(|s| !blank(s));
    let owner = text_of(&OWNER, owner_value)?
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let blocked_by = match blocked_by_value {
        None => Vec::new(),
        Some(v) => id_list(v, || at(&BLOCKED_BY), limits)?,
    };
    Ok(ProposedItem {
        id,
        content,
        active_form,
        status,
        parent,
        description,
        blocked_by,
        owner,
    })
}

/// The items of a todo_write input, before any of them is checked.
fn todo_values<'a>(input: &'a Input, limits: &Limits) -> Result<&'a [Input], InvalidInput> {
    let todos = match input {
        Input::Map(_) => input
            .get("todos")
            .ok_or_else(|| InvalidInput::new("todos", "is required: the list of items"))?,
        // A bare array is what a Lisp caller means by "the list".
        Input::Array(_) => input,
        other => {
            return Err(InvalidInput::new(
                "input",
                format!(
                    "expected an object with a todos array, got {}",
                    other.describe()
                ),
            ))
        }
    };
    let items = match todos {
        Input::Array(items) => items.as_slice(),
        // JSON null is no list at all: taking it as an empty one would
        // drop every item.
        other => {
            return Err(InvalidInput::new(
                "todos",
                format!("expected an array of items, got {}", other.describe()),
            ))
        }
    };
    if items.len() > limits.max_items {
        return Err(InvalidInput::new(
            "todos",
            format!(
                "has {} items; the limit is {}",
                items.len(),
                limits.max_items
            ),
        ));
    }
    Ok(items)
}

/// Checks a whole todo_write input that replaces the list, before anything
/// changes.
pub fn parse_write<'a>(
    input: &'a Input,
    limits: &Limits,
) -> Result<Vec<ProposedItem<'a>>, InvalidInput> {
    let items = todo_values(input, limits)?;
    let mut parsed = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        parsed.push(parse_item(item, i, limits)?);
    }
    check_unique_ids(parsed.len(), |i| parsed[i].id)?;
    Ok(parsed)
}

/// One item of a merged write: the fields it carries, nothing more.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MergeItem<'a> {
    pub id: Option<&'a str>,
    pub content: Option<&'a str>,
    pub active_form: Option<&'a str>,
    pub status: Option<Status>,
    /// None: not given, the parent stays; Some(None): "", the item goes to
    /// the top level; Some(Some(id)): the item becomes a step of id.
    pub parent: Option<Option<&'a str>>,
    /// None: not given; Some(None): "", cleared; Some(Some(text)): set.
    pub description: Option<Option<&'a str>>,
    /// None: not given, the blockers stay; Some(ids): the new blockers.
    pub blocked_by: Option<Vec<String>>,
    /// As `description`.
    pub owner: Option<Option<&'a str>>,
}

/// A checked todo_write input: a whole new list, or changes to merge.
#[derive(Debug, Clone, PartialEq)]
pub enum WriteRequest<'a> {
    Replace(Vec<ProposedItem<'a>>),
    Merge(Vec<MergeItem<'a>>),
}

/// Whether INPUT asks for a merged write: `merge` must be a boolean.
fn merge_flag(input: &Input) -> Result<bool, InvalidInput> {
    match input.get(MERGE) {
        None | Some(Input::Null) => Ok(false),
        Some(Input::Bool(merge)) => Ok(*merge),
        Some(other) => Err(InvalidInput::new(
            MERGE,
            format!("expected true or false, got {}", other.describe()),
        )),
    }
}

/// Checks a todo_write input of either kind before anything changes.
pub fn parse_request<'a>(
    input: &'a Input,
    limits: &Limits,
) -> Result<WriteRequest<'a>, InvalidInput> {
    if !merge_flag(input)? {
        return parse_write(input, limits).map(WriteRequest::Replace);
    }
    let items = todo_values(input, limits)?;
    let mut parsed = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        parsed.push(parse_merge_item(item, i, limits)?);
    }
    check_unique_ids(parsed.len(), |i| parsed[i].id)?;
    Ok(WriteRequest::Merge(parsed))
}

fn parse_merge_item<'a>(
    value: &'a Input,
    index: usize,
    limits: &Limits,
) -> Result<MergeItem<'a>, InvalidInput> {
    if !matches!(value, Input::Map(_)) {
        return Err(InvalidInput::new(
            format!("todos[{index}]"),
            format!(
                "expected an object with an id and the fields to change, got {}",
                value.describe()
            ),
        ));
    }
    let at = |spec: &Field| format!("todos[{index}].{}", spec.name);
    let [id, content, status, active_form, parent, description, blocked_by, owner] =
        fields(value, &TODO_FIELDS);
    let blank = |text: &str| text.chars().all(char::is_whitespace);
    let text_of =
        |spec: &Field, found: Option<&'a Input>| -> Result<Option<&'a str>, InvalidInput> {
            found
                .map(|v| checked_str_at(v, || at(spec), limits.max_content_chars))
                .transpose()
        };
    let id = match text_of(&ID, id)? {
        Some(id) if blank(id) => return Err(InvalidInput::new(at(&ID), "must not be empty")),
        id => id.map(str::trim),
    };
    let content = text_of(&CONTENT, content)?;
    if content.is_some_and(blank) {
        return Err(InvalidInput::new(at(&CONTENT), "must not be empty"));
    }
    let status = status
        .map(|v| parse_status_at(v, || at(&STATUS)))
        .transpose()?;
    let active_form = text_of(&ACTIVE_FORM, active_form)?.filter(|s| !blank(s));
    let parent = text_of(&PARENT, parent)?.map(|text| parent_id(Some(text)));
    let description = description
        .map(|v| checked_str_at(v, || at(&DESCRIPTION), limits.max_description_chars))
        .transpose()?
        .map(|text| Some(text).filter(|s| !blank(s)));
    let owner = text_of(&OWNER, owner)?.map(|text| Some(text.trim()).filter(|s| !s.is_empty()));
    let blocked_by = blocked_by
        .map(|v| id_list(v, || at(&BLOCKED_BY), limits))
        .transpose()?;
    match id {
        None if content.is_none() => Err(InvalidInput::new(
            at(&CONTENT),
            "is required for a new item (one without an id)",
        )),
        Some(id)
            if content.is_none()
                && status.is_none()
                && active_form.is_none()
                && parent.is_none()
                && description.is_none()
                && blocked_by.is_none()
                && owner.is_none() =>
        {
            Err(InvalidInput::new(
                format!("todos[{index}]"),
                format!(
                    "names {} but changes nothing; give status, content, activeForm, description, blocked_by or owner",
                    quote(id)
                ),
            ))
        }
        _ => Ok(MergeItem {
            id,
            content,
            active_form,
            status,
            parent,
            description,
            blocked_by,
            owner,
        }),
    }
}

/// An id as the model may write it, `t3`, `3` or `#3`, spelled `t3`.
/// Other texts stay as they are (trimmed), to be reported as unknown.
pub fn normalise_id(text: &str) -> String {
    let text = text.trim();
    let bare = text.strip_prefix('#').unwrap_or(text);
    if !bare.is_empty() && bare.bytes().all(|b| b.is_ascii_digit()) {
        format!("t{bare}")
    } else {
        bare.to_string()
    }
}

/// One id (a string or an integer), normalised.
pub fn id_value(value: &Input, path: impl Fn() -> String) -> Result<String, InvalidInput> {
    match value {
        Input::Int(n) if *n >= 0 => Ok(format!("t{n}")),
        Input::Str(text) => {
            free_of_nul(text, &path)?;
            let id = normalise_id(text);
            if id.is_empty() {
                Err(InvalidInput::new(path(), "must not be empty"))
            } else if id.chars().count() > MAX_ID_CHARS {
                Err(InvalidInput::new(
                    path(),
                    format!("{} is no id", quote(&id)),
                ))
            } else {
                Ok(id)
            }
        }
        other => Err(InvalidInput::new(
            path(),
            format!("expected an id like \"t3\", got {}", other.describe()),
        )),
    }
}

/// Longest id accepted: ids are short, and each is quoted back in errors.
const MAX_ID_CHARS: usize = 200;

/// A list of ids (an array; a single id is taken as a list of one),
/// normalised, each named once, at most `max_blockers` of them.
pub fn id_list(
    value: &Input,
    path: impl Fn() -> String,
    limits: &Limits,
) -> Result<Vec<String>, InvalidInput> {
    let values = match value {
        Input::Array(values) => values.as_slice(),
        Input::Str(_) | Input::Int(_) => std::slice::from_ref(value),
        other => {
            return Err(InvalidInput::new(
                path(),
                format!("expected an array of ids, got {}", other.describe()),
            ))
        }
    };
    // Counted before they are read: a hostile list of 100000 ids is refused
    // before it costs a quadratic search for repeats.
    if values.len() > limits.max_blockers {
        return Err(InvalidInput::new(
            path(),
            format!(
                "names {} items; at most {} may block one item",
                values.len(),
                limits.max_blockers
            ),
        ));
    }
    let mut ids: Vec<String> = Vec::with_capacity(values.len());
    for (k, v) in values.iter().enumerate() {
        let id = id_value(v, || format!("{}[{k}]", path()))?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// A given parent as an id: trimmed like ids, None when blank ("" names
/// the top level).
fn parent_id(text: Option<&str>) -> Option<&str> {
    text.map(str::trim).filter(|id| !id.is_empty())
}

/// Fails on the first of N items (ID_AT gives each one's id) whose id an
/// earlier item has, naming both.
fn check_unique_ids<'a>(
    n: usize,
    id_at: impl Fn(usize) -> Option<&'a str>,
) -> Result<(), InvalidInput> {
    match duplicate_id(n, &id_at) {
        None => Ok(()),
        Some((i, first)) => Err(InvalidInput::new(
            format!("todos[{i}].id"),
            format!(
                "{} is also the id of todos[{first}]; every item needs its own id",
                quote(id_at(i).unwrap_or_default())
            ),
        )),
    }
}

/// The first item whose id an earlier item has, with that earlier item.
fn duplicate_id<'a>(n: usize, id_at: impl Fn(usize) -> Option<&'a str>) -> Option<(usize, usize)> {
    if ids_rise((0..n).filter_map(&id_at)) {
        return None;
    }
    // A few items are compared directly: cheaper than a table.
    if n <= 8 {
        return (0..n).find_map(|i| {
            let id = id_at(i)?;
            (0..i)
                .find(|&j| id_at(j) == Some(id))
                .map(|first| (i, first))
        });
    }
    let mut first_with: FxHashMap<&str, usize> = FxHashMap::default();
    for i in 0..n {
        if let Some(id) = id_at(i) {
            match first_with.entry(id) {
                Entry::Vacant(slot) => {
                    slot.insert(i);
                }
                Entry::Occupied(first) => return Some((i, *first.get())),
            }
        }
    }
    None
}

fn field_schema(spec: &Field) -> Json {
    match spec.kind {
        FieldKind::Text => json!({"type": "string", "description": spec.description}),
        FieldKind::StatusEnum => json!({
            "type": "string",
            "enum": Status::ALL.iter().map(|s| s.wire_name()).collect::<Vec<_>>(),
            "description": spec.description,
        }),
        FieldKind::TaskStatusEnum => json!({
            "type": "string",
            "enum": Status::ALL.iter().map(|s| s.wire_name()).chain([DELETED]).collect::<Vec<_>>(),
            "description": spec.description,
        }),
        FieldKind::IdList => json!({
            "type": "array",
            "items": {"type": "string"},
            "description": spec.description,
        }),
        FieldKind::Id => json!({"type": "string", "description": spec.description}),
    }
}

fn object_schema(fields: &[Field]) -> Json {
    let mut properties = serde_json::Map::new();
    for spec in fields {
        properties.insert(spec.name.to_string(), field_schema(spec));
    }
    let required: Vec<&str> = fields
        .iter()
        .filter(|f| f.required)
        .map(|f| f.name)
        .collect();
    json!({"type": "object", "properties": properties, "required": required})
}

/// The todo_write tool in the shape the Messages API takes.  No item field
/// is marked required: a merged write carries only what changes, and the
/// descriptions say when content and status are needed.
pub fn todo_write_schema() -> Json {
    let mut item = object_schema(&TODO_FIELDS);
    if let Some(item) = item.as_object_mut() {
        item.remove("required");
    }
    json!({
        "name": "todo_write",
        "description": TODO_WRITE_DESCRIPTION,
        "input_schema": {
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "description": "The items, in order: the whole list, or with merge only the changed and new ones.",
                    "items": item,
                },
                MERGE: {"type": "boolean", "description": MERGE_DESCRIPTION},
            },
            "required": ["todos"],
        }
    })
}

pub const REASON: Field = Field {
    name: "reason",
    aliases: &[],
    kind: FieldKind::Text,
    required: true,
    description: "Why you must stop with items still open (1 to 500 characters): what blocks you and what the user should do.",
};

pub const TODO_PAUSE_DESCRIPTION: &str = "Stop working with items still open, and say why. Use it only when you cannot go on without the user (missing information, a decision, a failing tool you cannot work around). You will not be asked to continue, and the reason goes into the final report. Finish or cancel items instead when you can.";

/// The todo_pause tool in the shape the Messages API takes.
pub fn todo_pause_schema() -> Json {
    json!({
        "name": "todo_pause",
        "description": TODO_PAUSE_DESCRIPTION,
        "input_schema": object_schema(&[REASON]),
    })
}

/// Which tools the model is offered over the one list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolStyle {
    /// todo_write and todo_pause.
    #[default]
    Todo,
    /// TaskCreate, TaskUpdate, TaskGet, TaskList and todo_pause.
    Tasks,
    /// All of them.
    Both,
}

impl ToolStyle {
    pub const ALL: [ToolStyle; 3] = [ToolStyle::Todo, ToolStyle::Tasks, ToolStyle::Both];

    pub fn name(self) -> &'static str {
        match self {
            ToolStyle::Todo => "todo",
            ToolStyle::Tasks => "tasks",
            ToolStyle::Both => "both",
        }
    }

    pub fn parse(name: &str) -> Option<ToolStyle> {
        ToolStyle::ALL
            .into_iter()
            .find(|style| style.name() == name)
    }

    pub fn has_todo_write(self) -> bool {
        self != ToolStyle::Tasks
    }

    pub fn has_tasks(self) -> bool {
        self != ToolStyle::Todo
    }

    /// The tool that marks an item completed or cancelled, as the texts
    /// the model reads name it: one the style offers.
    pub fn update_tool(self) -> &'static str {
        match self {
            ToolStyle::Todo => "todo_write",
            ToolStyle::Tasks => "TaskUpdate",
            ToolStyle::Both => "todo_write or TaskUpdate",
        }
    }
}

/// The tools of STYLE, in the shape the Messages API takes.
pub fn style_schemas(style: ToolStyle) -> Vec<Json> {
    let mut schemas = Vec::new();
    if style.has_todo_write() {
        schemas.push(todo_write_schema());
    }
    if style.has_tasks() {
        schemas.extend(TASK_TOOLS.iter().map(task_schema));
    }
    schemas.push(todo_pause_schema());
    schemas
}

pub fn tool_schemas() -> Vec<Json> {
    style_schemas(ToolStyle::Todo)
}

/// The status TaskUpdate takes to remove an item.
pub const DELETED: &str = "deleted";

pub const TASK_ID: Field = Field {
    name: "taskId",
    aliases: &["task_id", "id"],
    kind: FieldKind::Id,
    required: true,
    description: "The task's id (t3; 3 and #3 are read as t3).",
};
pub const SUBJECT: Field = Field {
    name: "subject",
    aliases: &["content"],
    kind: FieldKind::Text,
    required: true,
    description: "What to do, in the imperative (\"Fix the parser bug\").",
};
const SUBJECT_UPDATE: Field = Field {
    required: false,
    description: "A new wording of the task, in the imperative.",
    ..SUBJECT
};
const TASK_DESCRIPTION: Field = Field {
    description:
        "Optional details the task needs (what, where, how to check it). Shown by TaskGet only.",
    ..DESCRIPTION
};
const TASK_ACTIVE_FORM: Field = Field {
    description:
        "The task in the present continuous (\"Fixing the parser bug\"), shown while it runs.",
    ..ACTIVE_FORM
};
const TASK_BLOCKED_BY: Field = Field {
    name: "blockedBy",
    aliases: &["blocked_by"],
    description: "Ids of the tasks that must be finished before this one can start.",
    ..BLOCKED_BY
};
const TASK_PARENT: Field = Field {
    description:
        "The id of the task this one is a step of (up to 3 levels). Omit for a top-level task.",
    ..PARENT
};
const TASK_STATUS: Field = Field {
    name: "status",
    aliases: &[],
    kind: FieldKind::TaskStatusEnum,
    required: false,
    description: "pending, in_progress (one task at a time; only when no open task blocks it), completed, cancelled for work that will not be done, or deleted to remove the task (its id is never reused).",
};
const TASK_OWNER: Field = Field {
    description: "Who works on the task (an agent's name); \"\" clears it.",
    ..OWNER
};
const ADD_BLOCKED_BY: Field = Field {
    name: "addBlockedBy",
    aliases: &[],
    kind: FieldKind::IdList,
    required: false,
    description: "Ids of tasks this one must wait for.",
};
const REMOVE_BLOCKED_BY: Field = Field {
    name: "removeBlockedBy",
    aliases: &[],
    kind: FieldKind::IdList,
    required: false,
    description: "Ids of tasks this one no longer waits for.",
};
const ADD_BLOCKS: Field = Field {
    name: "addBlocks",
    aliases: &[],
    kind: FieldKind::IdList,
    required: false,
    description: "Ids of tasks that must wait for this one.",
};
const REMOVE_BLOCKS: Field = Field {
    name: "removeBlocks",
    aliases: &[],
    kind: FieldKind::IdList,
    required: false,
    description: "Ids of tasks that no longer wait for this one.",
};

pub const TASK_CREATE_FIELDS: [Field; 5] = [
    SUBJECT,
    TASK_DESCRIPTION,
    TASK_ACTIVE_FORM,
    TASK_BLOCKED_BY,
    TASK_PARENT,
];
pub const TASK_UPDATE_FIELDS: [Field; 10] = [
    TASK_ID,
    TASK_STATUS,
    SUBJECT_UPDATE,
    TASK_DESCRIPTION,
    TASK_ACTIVE_FORM,
    TASK_OWNER,
    ADD_BLOCKED_BY,
    REMOVE_BLOCKED_BY,
    ADD_BLOCKS,
    REMOVE_BLOCKS,
];
pub const TASK_GET_FIELDS: [Field; 1] = [TASK_ID];

/// One Task tool: its name, what the model is told, its fields.
pub struct TaskTool {
    pub name: &'static str,
    pub description: &'static str,
    pub fields: &'static [Field],
}

pub const TASK_TOOLS: [TaskTool; 4] = [
    TaskTool {
        name: "TaskCreate",
        description: "Add one task to the plan. The result gives its id (t1, t2, ...). Name the tasks it must wait for in blockedBy; a task with open blockers is not ready and cannot be started.",
        fields: &TASK_CREATE_FIELDS,
    },
    TaskTool {
        name: "TaskUpdate",
        description: "Change one task by its id: status (mark it in_progress when you start it, completed as soon as it is done, cancelled if it will not be done, deleted to remove it), wording, owner, or dependencies (addBlockedBy, removeBlockedBy, addBlocks, removeBlocks). The result says which tasks became ready.",
        fields: &TASK_UPDATE_FIELDS,
    },
    TaskTool {
        name: "TaskGet",
        description: "Show one task in full: status, description, owner, what blocks it and what it blocks.",
        fields: &TASK_GET_FIELDS,
    },
    TaskTool {
        name: "TaskList",
        description: "List every task, one line each: id, status, subject, owner and open blockers. Use it when you lost track; results of the other tools already say what changed.",
        fields: &[],
    },
];

fn task_schema(tool: &TaskTool) -> Json {
    json!({
        "name": tool.name,
        "description": tool.description,
        "input_schema": object_schema(tool.fields),
    })
}

/// A TaskUpdate status: a status of the list, or deletion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    Set(Status),
    Deleted,
}

/// A checked TaskUpdate.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TaskUpdate<'a> {
    pub task_id: String,
    pub status: Option<TaskStatus>,
    pub subject: Option<&'a str>,
    pub description: Option<Option<&'a str>>,
    pub active_form: Option<&'a str>,
    pub owner: Option<Option<&'a str>>,
    pub add_blocked_by: Vec<String>,
    pub remove_blocked_by: Vec<String>,
    pub add_blocks: Vec<String>,
    pub remove_blocks: Vec<String>,
}

/// A checked call of one of the Task tools.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskRequest<'a> {
    Create {
        subject: &'a str,
        description: Option<&'a str>,
        active_form: Option<&'a str>,
        blocked_by: Vec<String>,
        parent: Option<&'a str>,
    },
    Update(TaskUpdate<'a>),
    Get {
        task_id: String,
    },
    List,
}

/// Checks the INPUT of the Task tool named TOOL before anything changes.
pub fn parse_task<'a>(
    tool: &str,
    input: &'a Input,
    limits: &Limits,
) -> Result<TaskRequest<'a>, InvalidInput> {
    let object = match input {
        Input::Null if tool == "TaskList" => return Ok(TaskRequest::List),
        Input::Map(_) => input,
        other => {
            return Err(InvalidInput::new(
                "input",
                format!("expected an object, got {}", other.describe()),
            ))
        }
    };
    let blank = |text: &str| text.chars().all(char::is_whitespace);
    let text = |spec: &Field, value: Option<&'a Input>, max: usize| {
        value
            .map(|v| checked_str_at(v, || spec.name.to_string(), max))
            .transpose()
    };
    let required_id = |value: Option<&Input>| match value {
        None => Err(InvalidInput::new(TASK_ID.name, "is required")),
        Some(v) => id_value(v, || TASK_ID.name.to_string()),
    };
    let ids = |spec: &Field, value: Option<&Input>| match value {
        None => Ok(Vec::new()),
        Some(v) => id_list(v, || spec.name.to_string(), limits),
    };
    match tool {
        "TaskCreate" => {
            let [subject, description, active_form, blocked_by, parent] =
                fields(object, &TASK_CREATE_FIELDS);
            let subject = match text(&SUBJECT, subject, limits.max_content_chars)? {
                None => return Err(InvalidInput::new(SUBJECT.name, "is required")),
                Some(s) if blank(s) => {
                    return Err(InvalidInput::new(SUBJECT.name, "must not be empty"))
                }
                Some(s) => s,
            };
            Ok(TaskRequest::Create {
                subject,
                description: text(&DESCRIPTION, description, limits.max_description_chars)?
                    .filter(|s| !blank(s)),
                active_form: text(&ACTIVE_FORM, active_form, limits.max_content_chars)?
                    .filter(|s| !blank(s)),
                blocked_by: ids(&TASK_BLOCKED_BY, blocked_by)?,
                parent: parent_id(text(&PARENT, parent, limits.max_content_chars)?),
            })
        }
        "TaskUpdate" => {
            let [task_id, status, subject, description, active_form, owner, add_blocked_by, remove_blocked_by, add_blocks, remove_blocks] =
                fields(object, &TASK_UPDATE_FIELDS);
            let status = match status {
                None => None,
                Some(Input::Str(text)) if text.trim().eq_ignore_ascii_case(DELETED) => {
                    Some(TaskStatus::Deleted)
                }
                Some(v) => Some(TaskStatus::Set(
                    parse_status_at(v, || "status".into()).map_err(|e| {
                        InvalidInput::new(
                            e.path,
                            e.message
                                .replace(" or cancelled,", ", cancelled or deleted,"),
                        )
                    })?,
                )),
            };
            let subject = text(&SUBJECT, subject, limits.max_content_chars)?;
            if subject.is_some_and(blank) {
                return Err(InvalidInput::new(SUBJECT.name, "must not be empty"));
            }
            Ok(TaskRequest::Update(TaskUpdate {
                task_id: required_id(task_id)?,
                status,
                subject,
                description: text(&DESCRIPTION, description, limits.max_description_chars)?
                    .map(|s| Some(s).filter(|s| !blank(s))),
                active_form: text(&ACTIVE_FORM, active_form, limits.max_content_chars)?
                    .filter(|s| !blank(s)),
                owner: text(&OWNER, owner, limits.max_content_chars)?
                    .map(|s| Some(s.trim()).filter(|s| !s.is_empty())),
                add_blocked_by: ids(&ADD_BLOCKED_BY, add_blocked_by)?,
                remove_blocked_by: ids(&REMOVE_BLOCKED_BY, remove_blocked_by)?,
                add_blocks: ids(&ADD_BLOCKS, add_blocks)?,
                remove_blocks: ids(&REMOVE_BLOCKS, remove_blocks)?,
            }))
        }
        "TaskGet" => {
            let [task_id] = fields(object, &TASK_GET_FIELDS);
            Ok(TaskRequest::Get {
                task_id: required_id(task_id)?,
            })
        }
        "TaskList" => Ok(TaskRequest::List),
        other => Err(InvalidInput::new(
            "tool",
            format!(
                "unknown task tool {}; expected TaskCreate, TaskUpdate, TaskGet or TaskList",
                quote(other)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Vec<ProposedItem<'static>>, InvalidInput> {
        let value: Json = serde_json::from_str(json).expect("test JSON");
        // Leaked so the parsed items can borrow it; a few bytes per test.
        parse_write(
            Box::leak(Box::new(Input::from_json(&value))),
            &Limits::default(),
        )
    }

    fn error_of(json: &str) -> String {
        parse(json).expect_err("should be rejected").to_string()
    }

    #[test]
    fn a_good_list_parses_with_defaults() {
        let items = parse(
            r#"{"todos":[{"content":"Read it","status":"In Progress","activeForm":"Reading it"},
                         {"id":"t4","content":"Fix it","status":"pending","activeForm":""}]}"#,
        )
        .unwrap();
        assert_eq!(items[0].status, Status::InProgress);
        assert_eq!(items[0].active_form, Some("Reading it"));
        assert_eq!(items[1].id, Some("t4"));
        assert_eq!(items[1].active_form, None);
    }

    #[test]
    fn errors_name_the_field_path() {
        assert_eq!(
            error_of(
                r#"{"todos":[{"content":"a","status":"pending"},{"content":"b","status":"pending"},{"content":"c","status":"done"}]}"#
            ),
            "todos[2].status: expected pending, in_progress, completed or cancelled, got \"done\""
        );
        assert!(error_of(r#"{"todos":[{"status":"pending"}]}"#)
            .starts_with("todos[0].content: is required"));
        assert!(
            error_of(r#"{"todos":[{"content":"  ","status":"pending"}]}"#)
                .starts_with("todos[0].content: must not be empty")
        );
        assert!(error_of(r#"{"todos":[{"content":7,"status":"pending"}]}"#)
            .starts_with("todos[0].content: expected a string, got integer 7"));
        assert!(
            error_of(r#"{"todos":[{"content":"a"}]}"#).starts_with("todos[0].status: is required")
        );
        assert!(error_of(r#"{"todos":[3]}"#).starts_with("todos[0]: expected an object"));
        assert!(error_of(r#"{"todos":"x"}"#).starts_with("todos: expected an array"));
        assert!(error_of(r#"{"items":[]}"#).starts_with("todos: is required"));
        assert!(error_of(r#""x""#).starts_with("input: expected an object"));
        assert!(
            error_of(r#"{"todos":[{"content":"a\u0000b","status":"pending"}]}"#).contains("NUL")
        );
        assert!(
            error_of(r#"{"todos":[{"id":5,"content":"a","status":"pending"}]}"#)
                .starts_with("todos[0].id: expected a string")
        );
    }

    pub(super) fn request(json: &str) -> Result<WriteRequest<'static>, InvalidInput> {
        let value: Json = serde_json::from_str(json).expect("test JSON");
        parse_request(
            Box::leak(Box::new(Input::from_json(&value))),
            &Limits::default(),
        )
    }

    #[test]
    fn merge_items_carry_only_what_they_name() {
        let Ok(WriteRequest::Merge(items)) = request(
            r#"{"merge":true,"todos":[{"id":"t3","status":"completed"},{"content":"New one"},{"id":"t1","content":"Reworded","activeForm":"Rewording"}]}"#,
        ) else {
            panic!("a merge request");
        };
        assert_eq!(
            items[0],
            MergeItem {
                id: Some("t3"),
                content: None,
                active_form: None,
                status: Some(Status::Completed),
                parent: None,
                description: None,
                blocked_by: None,
                owner: None,
            }
        );
        assert_eq!(
            items[1],
            MergeItem {
                id: None,
                content: Some("New one"),
                active_form: None,
                status: None,
                parent: None,
                description: None,
                blocked_by: None,
                owner: None,
            }
        );
        assert_eq!(items[2].active_form, Some("Rewording"));
        assert!(matches!(
            request(r#"{"merge":false,"todos":[{"content":"a","status":"pending"}]}"#),
            Ok(WriteRequest::Replace(_))
        ));
        assert!(matches!(
            request(r#"{"merge":null,"todos":[]}"#),
            Ok(WriteRequest::Replace(_))
        ));
    }

    #[test]
    fn merge_mistakes_name_the_field() {
        let error = |json: &str| request(json).expect_err("should be rejected").to_string();
        assert_eq!(
            error(r#"{"merge":"yes","todos":[]}"#),
            "merge: expected true or false, got string \"yes\""
        );
        assert_eq!(
            error(r#"{"merge":1,"todos":[]}"#),
            "merge: expected true or false, got integer 1"
        );
        assert_eq!(
            error(r#"{"merge":true,"todos":[{"id":"t1","status":"completed"},{"id":"t2"}]}"#),
            "todos[1]: names \"t2\" but changes nothing; give status, content, activeForm, description, blocked_by or owner"
        );
        assert_eq!(
            error(r#"{"merge":true,"todos":[{"status":"pending"}]}"#),
            "todos[0].content: is required for a new item (one without an id)"
        );
        assert!(
            error(r#"{"merge":true,"todos":[{"id":"t1","status":"done"}]}"#)
                .starts_with("todos[0].status: expected pending")
        );
        assert!(
            error(r#"{"merge":true,"todos":[{"id":"t1","content":" "}]}"#)
                .starts_with("todos[0].content: must not be empty")
        );
        assert!(error(r#"{"merge":true,"todos":[{"id":"t1","status":"pending"},{"id":"t1","status":"completed"}]}"#)
            .starts_with("todos[1].id: \"t1\" is also the id of todos[0]"));
        assert!(error(r#"{"merge":true,"todos":[7]}"#).starts_with("todos[0]: expected an object"));
        assert!(error(r#"{"merge":true}"#).starts_with("todos: is required"));
    }

    #[test]
    fn null_todos_is_not_an_empty_list() {
        assert_eq!(
            error_of(r#"{"todos":null}"#),
            "todos: expected an array of items, got nil"
        );
    }

    #[test]
    fn duplicate_ids_are_rejected() {
        assert_eq!(
            error_of(
                r#"{"todos":[{"id":"t1","content":"a","status":"pending"},{"id":"t1","content":"b","status":"pending"}]}"#
            ),
            "todos[1].id: \"t1\" is also the id of todos[0]; every item needs its own id"
        );
    }

    #[test]
    fn a_repeated_id_names_the_first_item_that_had_it_in_long_lists_too() {
        for ids in [
            vec!["t1", "t2", "t3", "t2", "t1"],
            vec![
                "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9", "t10", "t11", "t4", "t1",
            ],
            vec![
                "x", "t9", "t3", "t4", "t5", "t6", "t7", "t8", "t2", "t10", "t11", "t12", "t8", "x",
            ],
        ] {
            let todos: Vec<Json> = ids
                .iter()
                .map(|id| json!({"id": id, "content": "c", "status": "pending"}))
                .collect();
            let repeat = ids
                .iter()
                .enumerate()
                .position(|(i, id)| ids[..i].contains(id))
                .unwrap();
            let first = ids.iter().position(|id| *id == ids[repeat]).unwrap();
            assert_eq!(
                error_of(&json!({ "todos": todos }).to_string()),
                format!("todos[{repeat}].id: {:?} is also the id of todos[{first}]; every item needs its own id", ids[repeat])
            );
        }
        let rising: Vec<Json> = (1..30)
            .map(|n| json!({"id": format!("t{n}"), "content": "c", "status": "pending"}))
            .collect();
        assert_eq!(
            parse(&json!({ "todos": rising }).to_string())
                .unwrap()
                .len(),
            29
        );
    }

    #[test]
    fn the_first_key_of_a_name_counts_and_null_is_absent() {
        let item = |pairs: Vec<(&str, Input)>| {
            let todo = Input::map_of(pairs.into_iter().map(|(k, v)| (k.to_string(), v)));
            let list = Box::leak(Box::new(Input::Array(vec![todo])));
            parse_write(list, &Limits::default()).map(|mut items| items.remove(0))
        };
        let text = |s: &str| Input::Str(s.into());
        let base = || vec![("content", text("first")), ("status", text("pending"))];
        let with =
            |extra: Vec<(&'static str, Input)>| base().into_iter().chain(extra).collect::<Vec<_>>();
        assert_eq!(
            item(with(vec![("content", text("second"))]))
                .unwrap()
                .content,
            "first"
        );
        assert_eq!(
            item(with(vec![("active_form", text("Alias"))]))
                .unwrap()
                .active_form,
            Some("Alias")
        );
        assert_eq!(
            item(with(vec![
                ("activeForm", Input::Null),
                ("active_form", text("Alias"))
            ]))
            .unwrap()
            .active_form,
            None
        );
        assert_eq!(
            item(with(vec![
                ("active_form", text("Alias")),
                ("activeForm", text("Name"))
            ]))
            .unwrap()
            .active_form,
            Some("Name")
        );
        assert_eq!(item(with(vec![("id", Input::Null)])).unwrap().id, None);
        assert_eq!(
            item(with(vec![("id", text(" t3 "))])).unwrap().id,
            Some("t3")
        );
        assert_eq!(
            item(vec![("status", text("pending")), ("content", Input::Null)])
                .unwrap_err()
                .to_string(),
            "todos[0].content: is required"
        );
    }

    #[test]
    fn limits_are_enforced_at_the_boundary() {
        let limits = Limits {
            max_items: 2,
            max_content_chars: 5,
            ..Limits::default()
        };
        let item = |c: &str| {
            Input::Map(vec![
                ("content".into(), Input::Str(c.into())),
                ("status".into(), Input::Str("pending".into())),
            ])
        };
        let list = |items: Vec<Input>| Input::Map(vec![("todos".into(), Input::Array(items))]);
        assert!(parse_write(&list(vec![item("12345"), item("é2345")]), &limits).is_ok());
        let err = parse_write(&list(vec![item("123456")]), &limits).unwrap_err();
        assert_eq!(
            err.to_string(),
            "todos[0].content: is 6 characters long; the limit is 5"
        );
        let err = parse_write(&list(vec![item("a"), item("b"), item("c")]), &limits).unwrap_err();
        assert_eq!(err.to_string(), "todos: has 3 items; the limit is 2");
    }

    #[test]
    fn deep_nesting_becomes_an_error_not_a_crash() {
        let deep = "[".repeat(100) + &"]".repeat(100);
        let value: Json = serde_json::from_str(&format!(
            r#"{{"todos":[{{"content":{deep},"status":"pending"}}]}}"#
        ))
        .unwrap_or(Json::Null);
        assert!(parse_write(&Input::from_json(&value), &Limits::default()).is_err());
    }

    #[test]
    fn no_alias_is_another_fields_name() {
        // `fields` takes three keys that are three fields' names as those
        // fields at once; an alias equal to a name would be missed there.
        let sets: [&[Field]; 4] = [
            &TODO_FIELDS,
            &TASK_CREATE_FIELDS,
            &TASK_UPDATE_FIELDS,
            &TASK_GET_FIELDS,
        ];
        for set in sets {
            for field in set {
                for alias in field.aliases {
                    assert!(
                        set.iter().all(|other| other.name != *alias),
                        "{alias} is an alias of {} and a name",
                        field.name
                    );
                }
            }
        }
    }

    #[test]
    fn usual_and_general_reading_agree() {
        let read = |json: &str| {
            let input = Input::from_json(&serde_json::from_str(json).unwrap_or(Json::Null));
            fields(&input, &TODO_FIELDS).map(|v| v.map(Input::describe))
        };
        // The usual three in order, then the same in another order and
        // with a value that is not a string, which take the general way.
        let usual = read(r#"{"content":"a","status":"pending","activeForm":"b"}"#);
        let shuffled = read(r#"{"status":"pending","activeForm":"b","content":"a"}"#);
        assert_eq!(usual, shuffled);
        assert!(usual[1].is_some() && usual[2].is_some() && usual[3].is_some());
        let null = read(r#"{"content":"a","status":"pending","activeForm":null}"#);
        assert!(null[3].is_none() && null[1].is_some());
    }

    #[test]
    fn schema_comes_from_the_same_fields() {
        let schema = todo_write_schema();
        let item = &schema["input_schema"]["properties"]["todos"]["items"];
        // A merged write may carry an id and one field, so the schema
        // requires no field of an item.
        assert!(item.get("required").is_none());
        assert_eq!(
            item["properties"]["status"]["enum"],
            json!(["pending", "in_progress", "completed", "cancelled"])
        );
        assert!(item["properties"]["id"].is_object());
        assert_eq!(
            schema["input_schema"]["properties"]["merge"]["type"],
            "boolean"
        );
        assert!(TODO_WRITE_DESCRIPTION.contains("\"merge\": true"));
        let pause = todo_pause_schema();
        assert_eq!(pause["input_schema"]["required"], json!(["reason"]));
        assert_eq!(tool_schemas().len(), 2);
    }

    mod properties {
        use super::*;
        use crate::model::Status;
        use crate::session::{Options, Session};
        use proptest::prelude::*;
        use std::collections::HashSet;

        const KEYS: [&str; 9] = [
            "todos",
            "content",
            "status",
            "activeForm",
            "active_form",
            "id",
            "priority",
            "",
            "x",
        ];

        fn arb_text() -> impl Strategy<Value = String> {
            prop_oneof![
                Just(String::new()),
                Just("pending".to_string()),
                Just("in_progress".to_string()),
                Just("In-Progress".to_string()),
                Just("completed".to_string()),
                Just("cancelled".to_string()),
                Just("done".to_string()),
                "t[0-9]{1,2}",
                "[a-c ]{0,6}",
                any::<String>(),
                "[\\x00-\\x7f]{0,8}",
            ]
        }

        fn arb_input() -> impl Strategy<Value = Input> {
            let leaf = prop_oneof![
                Just(Input::Null),
                any::<bool>().prop_map(Input::Bool),
                any::<i64>().prop_map(Input::Int),
                any::<f64>().prop_map(Input::Float),
                arb_text().prop_map(Input::Str),
                Just(Input::Unsupported("a buffer".into())),
                Just(Input::Invalid("a circular or dotted list".into())),
            ];
            leaf.prop_recursive(5, 64, 6, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..6).prop_map(Input::Array),
                    prop::collection::vec(
                        (
                            prop::sample::select(KEYS.to_vec()).prop_map(String::from),
                            inner
                        ),
                        0..6
                    )
                    .prop_map(Input::map_of),
                ]
            })
        }

        /// Mostly well-formed writes, so that reconcile sees many lists.
        fn arb_write() -> impl Strategy<Value = Input> {
            let item = (
                arb_text(),
                arb_text(),
                prop::option::of(arb_text()),
                prop::option::of(arb_input()),
            )
                .prop_map(|(content, status, id, extra)| {
                    let mut pairs = vec![
                        ("content".to_string(), Input::Str(content)),
                        ("status".to_string(), Input::Str(status)),
                    ];
                    if let Some(id) = id {
                        pairs.push(("id".to_string(), Input::Str(id)));
                    }
                    if let Some(extra) = extra {
                        pairs.push(("activeForm".to_string(), extra));
                    }
                    Input::map_of(pairs)
                });
            prop_oneof![
                3 => prop::collection::vec(item, 0..8).prop_map(|items| Input::Map(vec![("todos".into(), Input::Array(items))])),
                1 => arb_input(),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            #[test]
            fn validation_accepts_only_clean_items_and_names_the_field(input in arb_input(), max_chars in 1usize..50) {
                let limits = Limits { max_items: 5, max_content_chars: max_chars, ..Limits::default() };
                match parse_write(&input, &limits) {
                    Ok(items) => {
                        prop_assert!(items.len() <= 5);
                        let mut ids = HashSet::new();
                        for item in &items {
                            prop_assert!(!item.content.trim().is_empty());
                            prop_assert!(!item.content.contains('\0'));
                            prop_assert!(item.content.chars().count() <= max_chars);
                            if let Some(id) = &item.id {
                                prop_assert!(!id.is_empty() && ids.insert(*id));
                            }
                        }
                    }
                    Err(error) => {
                        prop_assert!(error.path == "input" || error.path.starts_with("todos"), "path {}", error.path);
                        prop_assert!(!error.message.is_empty());
                        prop_assert!(error.to_string().chars().count() < 300);
                    }
                }
            }

            #[test]
            fn repeated_ids_are_found_as_by_comparing_every_pair(ids in prop::collection::vec(prop::option::of(prop_oneof!["t[0-9]{1,2}", "[ax]"]), 0..24)) {
                // The reference compares every pair, as the rule is stated.
                let by_pairs = (0..ids.len()).find_map(|i| {
                    let id = ids[i].as_deref()?;
                    ids[..i].iter().position(|other| other.as_deref() == Some(id)).map(|first| (i, first))
                });
                prop_assert_eq!(duplicate_id(ids.len(), |i| ids[i].as_deref()), by_pairs);
            }

            #[test]
            fn any_json_text_is_read_or_refused_without_panic(text in any::<String>()) {
                if let Ok(json) = serde_json::from_str::<Json>(&text) {
                    let _ = parse_write(&Input::from_json(&json), &Limits::default());
                }
            }

            #[test]
            fn writes_keep_the_list_sound_and_failures_change_nothing(writes in prop::collection::vec(arb_write(), 1..10)) {
                let mut session = Session::default();
                let options = Options::default();
                for input in &writes {
                    let before = (session.items.clone(), session.ids.issued(), session.writes);
                    match session.write(input, &options, false, vec![]) {
                        Ok(outcome) => {
                            prop_assert!(outcome.text.starts_with("[TODO list updated"));
                            let ids: HashSet<&str> = session.items.iter().map(|i| i.id.as_str()).collect();
                            prop_assert_eq!(ids.len(), session.items.len());
                            prop_assert!(session.items.iter().filter(|i| i.status == Status::InProgress).count() <= 1);
                            prop_assert!(session.items.iter().all(|i| !i.content.trim().is_empty()));
                        }
                        Err(_) => {
                            prop_assert_eq!(&before, &(session.items.clone(), session.ids.issued(), session.writes));
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod parent_tests {
    use super::tests::request;
    use super::*;

    #[test]
    fn a_whole_list_item_may_name_its_parent() {
        let Ok(WriteRequest::Replace(items)) = request(
            r#"{"todos":[{"content":"a","status":"pending","parent":" t3 "},{"content":"b","status":"pending","parent":""},{"content":"c","status":"pending"}]}"#,
        ) else {
            panic!("a whole list");
        };
        assert_eq!(
            items.iter().map(|i| i.parent).collect::<Vec<_>>(),
            [Some("t3"), None, None]
        );
    }

    #[test]
    fn a_merge_item_moves_under_a_parent_or_to_the_top_level() {
        let Ok(WriteRequest::Merge(items)) = request(
            r#"{"merge":true,"todos":[{"id":"t4","parent":"t3"},{"id":"t5","parent":""},{"id":"t6","status":"completed"},{"content":"New","parent":"t3"}]}"#,
        ) else {
            panic!("a merge");
        };
        assert_eq!(
            items[0],
            MergeItem {
                id: Some("t4"),
                content: None,
                active_form: None,
                status: None,
                parent: Some(Some("t3")),
                description: None,
                blocked_by: None,
                owner: None,
            }
        );
        assert_eq!(items[1].parent, Some(None));
        assert_eq!(items[2].parent, None);
        assert_eq!(items[3].parent, Some(Some("t3")));
    }

    #[test]
    fn a_parent_that_is_not_text_is_refused() {
        let error = |json: &str| request(json).expect_err("should be rejected").to_string();
        assert_eq!(
            error(r#"{"todos":[{"content":"a","status":"pending","parent":3}]}"#),
            "todos[0].parent: expected a string, got integer 3"
        );
        assert_eq!(
            error(r#"{"merge":true,"todos":[{"id":"t1","parent":["t2"]}]}"#),
            "todos[0].parent: expected a string, got an array of 1 elements"
        );
        assert_eq!(
            error(r#"{"merge":true,"todos":[{"id":"t1","parent":"t\u0000"}]}"#),
            "todos[0].parent: contains a NUL character"
        );
        // Null is no parent given, so this merge item changes nothing.
        assert!(
            error(r#"{"merge":true,"todos":[{"id":"t1","parent":null}]}"#)
                .starts_with("todos[0]: names \"t1\" but changes nothing")
        );
    }

    #[test]
    fn the_schema_offers_parent() {
        let schema = todo_write_schema();
        let parent =
            &schema["input_schema"]["properties"]["todos"]["items"]["properties"]["parent"];
        assert_eq!(parent["type"], "string");
        assert!(parent["description"]
            .as_str()
            .unwrap_or_default()
            .contains("up to 3 levels"));
    }
}
