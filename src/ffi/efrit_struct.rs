//! The mirror of Efrit's `efrit-todo-item' struct, kept in step with the
//! module's items slot by slot.

use super::cache::session_name;
use super::errors::guarded;
use super::input::is;
use super::output::{lisp_text, status_symbol, time_value};
use super::symbols::*;
use crate::model::{Item, Status};
use crate::session::registry;
use emacs::{defun, Env, IntoLisp, Result, Value, Vector};

// Efrit's `efrit-todo-item' is a `cl-defstruct' of `:type vector' with
// these slots, in this order; its own code reads them by position.
const SLOT_ID: usize = 0;
const SLOT_CONTENT: usize = 1;
const SLOT_STATUS: usize = 2;
const SLOT_PRIORITY: usize = 3;
const SLOT_CREATED: usize = 4;
const SLOT_COMPLETED: usize = 5;
const SLOTS: usize = 6;

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

/// The items of SESSION in Efrit's shape, for `efrit-todo--current-todos'.
/// OLD is the variable's current value: when it has one struct per item it
/// is updated in place and returned, so that refreshing the variable after
/// every write allocates only for what changed (Efrit's own code mutates
/// these structs in place too).  Otherwise a new list is built.
#[defun]
fn structs<'e>(env: &'e Env, session: Value<'e>, old: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let name = session_name(env, session)?;
        let registry = registry();
        let session = registry.get(&name);
        let items = session.map(|s| s.items.as_slice()).unwrap_or_default();
        let counter = session.map_or(0, |s| s.ids.issued());
        if let Some(list) = update_mirror(env, &name, items, counter, old)? {
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
        remember_mirror(env, &name, items, counter, list, &structs)?;
        Ok(list)
    })
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
/// than by walking the list), what each struct shows, and the id counter
/// the Lisp side set `efrit-todo--counter' to then.
struct Mirror {
    session: String,
    list: emacs::GlobalRef,
    structs: emacs::GlobalRef,
    shown: Vec<Shown>,
    counter: u64,
}

thread_local! {
    static MIRROR: std::cell::RefCell<Option<Mirror>> = const { std::cell::RefCell::new(None) };
}

/// Brings OLD, the structs of SESSION's list, up to date after a write
/// that changed it, when that takes no more than updating them in place;
/// false when the list must be read afresh (`structs'), as when its length
/// or id counter changed.  The Lisp side saves a call on every write.
pub(super) fn refresh_after_write(env: &Env, session: &str, old: Value) -> Result<bool> {
    let registry = registry();
    let Some(list) = registry.get(session) else {
        return Ok(false);
    };
    Ok(update_mirror(env, session, &list.items, list.ids.issued(), old)?.is_some())
}

/// Brings the structs of OLD up to ITEMS by touching only the items that
/// changed, when OLD is the list `structs' last returned for SESSION, has
/// as many items, and COUNTER is still the id counter shown.  After a
/// write of 1000 items that moved one along, that is two structs, not six
/// slots of a thousand compared through the module API.  A struct Efrit
/// changed in place with `setf' keeps its change until the module's item
/// changes; the module's list is the truth and the next full rebuild
/// shows it.
fn update_mirror<'e>(
    env: &'e Env,
    session: &str,
    items: &[Item],
    counter: u64,
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
            || mirror.counter != counter
            || mirror.list != old
        {
            return Ok(None);
        }
        let structs: Vector = mirror.structs.bind(env).into_rust()?;
        for (index, (item, shown)) in items.iter().zip(mirror.shown.iter_mut()).enumerate() {
            if shown.shows(item) {
                continue;
            }
            // Each field is noted as shown once its slot is set, and in
            // its old string's memory: a write that moves one item along
            // changes its status and time, never its texts.
            let vector: Vector = structs.get(index)?;
            if shown.id != item.id {
                vector.set(SLOT_ID, lisp_text(env, &item.id)?)?;
                shown.id.clone_from(&item.id);
            }
            if shown.content != item.content {
                vector.set(SLOT_CONTENT, lisp_text(env, &item.content)?)?;
                shown.content.clone_from(&item.content);
            }
            if shown.status != item.status {
                vector.set(SLOT_STATUS, struct_status(env, item.status))?;
                shown.status = item.status;
            }
            if shown.priority != item.priority {
                vector.set(SLOT_PRIORITY, struct_priority(env, item)?)?;
                shown.priority.clone_from(&item.priority);
            }
            if shown.created != item.created.to_bits() {
                vector.set(SLOT_CREATED, item.created)?;
                shown.created = item.created.to_bits();
            }
            let completed = item.completed.map(f64::to_bits);
            if shown.completed != completed {
                vector.set(SLOT_COMPLETED, time_value(env, item.completed)?)?;
                shown.completed = completed;
            }
        }
        Ok(Some(old))
    })
}

/// Remembers LIST, made of STRUCTS showing ITEMS with id COUNTER, as
/// SESSION's mirror.
fn remember_mirror(
    env: &Env,
    session: &str,
    items: &[Item],
    counter: u64,
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
            counter,
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
        if vector.len() != SLOTS {
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
        if !same_text(vector.get(SLOT_ID)?, &item.id)? {
            vector.set(SLOT_ID, lisp_text(env, &item.id)?)?;
        }
        if !same_text(vector.get(SLOT_CONTENT)?, &item.content)? {
            vector.set(SLOT_CONTENT, lisp_text(env, &item.content)?)?;
        }
        let status = struct_status(env, item.status);
        if vector.get::<Value>(SLOT_STATUS)? != status {
            vector.set(SLOT_STATUS, status)?;
        }
        let priority = struct_priority(env, item)?;
        if vector.get::<Value>(SLOT_PRIORITY)? != priority {
            vector.set(SLOT_PRIORITY, priority)?;
        }
        if !same_time(vector.get(SLOT_CREATED)?, Some(item.created))? {
            vector.set(SLOT_CREATED, item.created)?;
        }
        if !same_time(vector.get(SLOT_COMPLETED)?, item.completed)? {
            vector.set(SLOT_COMPLETED, time_value(env, item.completed)?)?;
        }
    }
    Ok(Some((old, values)))
}
