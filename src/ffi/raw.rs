//! Emacs's module interface called directly, for the one loop where the
//! emacs crate's care costs more than the work: reading a todo_write's
//! items.
//!
//! A write of a thousand items makes some nine thousand module calls.  The
//! crate follows each with a look for a pending non-local exit and takes a
//! failed one apart: a quarter of what the calls cost Emacs itself.  Here a
//! lookup is followed by one check, and the one call that fails without
//! Lisp running (copying something that is not a short string) has its
//! exit cleared on the spot.  A lookup that exits (a `quit') leaves its
//! exit pending, and `Raw::exit' hands it to the crate, which reports it
//! as it reports any other.
//!
//! All of the module's direct calls are here.  A `Handle' comes from the
//! arguments of the module call running now, from what its calls return,
//! or from the global references made when the module loaded; its
//! lifetime keeps it inside that call.

use super::symbols::{efrit_todo_internal_error, fn_gethash};
use emacs::raw::{emacs_env, emacs_value};
use emacs::{CallEnv, Env, Result, Value};
use std::ffi::CStr;
use std::marker::PhantomData;

/// A Lisp value of the module call running now.
#[derive(Clone, Copy)]
pub(super) struct Handle<'e> {
    raw: emacs_value,
    call: PhantomData<&'e Env>,
}

/// The keys the reading looks up.
#[derive(Clone, Copy)]
pub(super) enum Key {
    Content = 0,
    Status,
    ActiveForm,
    Todos,
    Merge,
}

/// The texts of `Key', in its order.
const KEY_NAMES: [&CStr; 5] = [c"content", c"status", c"activeForm", c"todos", c"merge"];

/// The Lisp objects the reading compares with or calls, kept by global
/// references made when the module loaded.
struct Constants {
    gethash: emacs_value,
    hash_table_count: emacs_value,
    hash_table: emacs_value,
    vector: emacs_value,
    /// What `gethash' returns for an absent key: an uninterned symbol.
    absent: emacs_value,
    /// The number 3, the entries of a todo item's table.
    three: emacs_value,
    keys: [emacs_value; KEY_NAMES.len()],
}

// SAFETY: global references live until freed, which the module never
// does; the pointers are only handed back to Emacs.
unsafe impl Send for Constants {}
unsafe impl Sync for Constants {}

static CONSTANTS: once_cell::sync::OnceCell<Constants> = once_cell::sync::OnceCell::new();

type Funcall =
    unsafe extern "C" fn(*mut emacs_env, emacs_value, isize, *mut emacs_value) -> emacs_value;
type CopyString = unsafe extern "C" fn(
    *mut emacs_env,
    emacs_value,
    *mut std::os::raw::c_char,
    *mut isize,
) -> bool;

/// The functions of Emacs's interface the reading uses.
struct Functions {
    funcall: Funcall,
    type_of: unsafe extern "C" fn(*mut emacs_env, emacs_value) -> emacs_value,
    eq: unsafe extern "C" fn(*mut emacs_env, emacs_value, emacs_value) -> bool,
    extract_integer: unsafe extern "C" fn(*mut emacs_env, emacs_value) -> i64,
    vec_size: unsafe extern "C" fn(*mut emacs_env, emacs_value) -> isize,
    vec_get: unsafe extern "C" fn(*mut emacs_env, emacs_value, isize) -> emacs_value,
    copy_string_contents: CopyString,
    non_local_exit_check: unsafe extern "C" fn(*mut emacs_env) -> u32,
    non_local_exit_clear: unsafe extern "C" fn(*mut emacs_env),
}

impl Functions {
    /// The functions of RAW, None if Emacs lacks one (it never does).
    ///
    /// SAFETY: RAW must be the environment of the module call running now.
    unsafe fn of(raw: *mut emacs_env) -> Option<Functions> {
        let raw = &*raw;
        Some(Functions {
            funcall: raw.funcall?,
            type_of: raw.type_of?,
            eq: raw.eq?,
            extract_integer: raw.extract_integer?,
            vec_size: raw.vec_size?,
            vec_get: raw.vec_get?,
            copy_string_contents: raw.copy_string_contents?,
            non_local_exit_check: raw.non_local_exit_check?,
            non_local_exit_clear: raw.non_local_exit_clear?,
        })
    }
}

/// `non_local_exit_check' when no exit is pending.
const NO_EXIT: u32 = 0;

/// Makes the global references of `Constants'; called when the module
/// loads.  Nothing is made when Emacs refuses a call: the reading then
/// leaves every input to the crate.
pub(super) fn init(env: &Env) {
    let raw = env.raw();
    // SAFETY: RAW is the environment of the call loading the module.  Each
    // call's exit is looked at before its value is used.
    let constants = unsafe {
        let functions = &*raw;
        let (
            Some(intern),
            Some(make_string),
            Some(make_integer),
            Some(funcall),
            Some(global),
            Some(check),
        ) = (
            functions.intern,
            functions.make_string,
            functions.make_integer,
            functions.funcall,
            functions.make_global_ref,
            functions.non_local_exit_check,
        )
        else {
            return;
        };
        let text = |text: &CStr| make_string(raw, text.as_ptr(), text.to_bytes().len() as isize);
        let mut name = text(c"efrit-todo-absent");
        let absent = funcall(raw, intern(raw, c"make-symbol".as_ptr()), 1, &mut name);
        let constants = Constants {
            gethash: intern(raw, c"gethash".as_ptr()),
            hash_table_count: intern(raw, c"hash-table-count".as_ptr()),
            hash_table: intern(raw, c"hash-table".as_ptr()),
            vector: intern(raw, c"vector".as_ptr()),
            absent,
            three: make_integer(raw, 3),
            keys: KEY_NAMES.map(text),
        };
        if check(raw) != NO_EXIT {
            return;
        }
        Constants {
            gethash: global(raw, constants.gethash),
            hash_table_count: global(raw, constants.hash_table_count),
            hash_table: global(raw, constants.hash_table),
            vector: global(raw, constants.vector),
            absent: global(raw, constants.absent),
            three: global(raw, constants.three),
            keys: constants.keys.map(|key| global(raw, key)),
        }
    };
    let _ = CONSTANTS.set(constants);
}

/// Direct calls into the module call running now.
pub(super) struct Raw<'e> {
    env: &'e Env,
    raw: *mut emacs_env,
    functions: Functions,
    constants: &'static Constants,
}

impl<'e> Raw<'e> {
    /// Direct calls into ENV, the call running now, with its argument N;
    /// None when they cannot be made.
    pub(super) fn of(env: &'e CallEnv, n: usize) -> Option<(Raw<'e>, Handle<'e>)> {
        let argument = *env.raw_args().get(n)?;
        let raw = env.raw();
        let constants = CONSTANTS.get()?;
        // SAFETY: RAW is the environment of the call running now.
        let functions = unsafe { Functions::of(raw)? };
        let raw = Raw {
            env,
            raw,
            functions,
            constants,
        };
        let argument = raw.handle(argument);
        Some((raw, argument))
    }

    pub(super) fn env(&self) -> &'e Env {
        self.env
    }

    fn handle(&self, raw: emacs_value) -> Handle<'e> {
        Handle {
            raw,
            call: PhantomData,
        }
    }

    /// HANDLE as the crate's value, for the crate to read.
    pub(super) fn value(&self, handle: Handle<'e>) -> Value<'e> {
        // SAFETY: HANDLE is a value of the call running now.
        unsafe { Value::new(handle.raw, self.env) }
    }

    fn is(&self, handle: Handle<'e>, type_symbol: emacs_value) -> bool {
        // SAFETY: both are values of this call or global references;
        // neither `type_of' nor `eq' exits for a live value.
        unsafe {
            let type_of = (self.functions.type_of)(self.raw, handle.raw);
            (self.functions.eq)(self.raw, type_of, type_symbol)
        }
    }

    pub(super) fn is_table(&self, handle: Handle<'e>) -> bool {
        self.is(handle, self.constants.hash_table)
    }

    pub(super) fn is_vector(&self, handle: Handle<'e>) -> bool {
        self.is(handle, self.constants.vector)
    }

    /// The pending exit of the last call, as the crate's error.
    fn exit<T>(&self) -> Result<T> {
        // With an exit pending Emacs returns from `funcall' at once, and the
        // crate takes the exit as that call's: the original signal or throw.
        // The function is a kept symbol, as naming it by its text would
        // mean a module call of another kind.
        self.env.call(fn_gethash, [])?;
        self.env.signal(
            efrit_todo_internal_error,
            ("a module call failed without an exit",),
        )
    }

    /// VALUE, what the call just made returned, unless it left an exit
    /// pending: then that exit, as the crate's error.
    fn checked<T>(&self, value: T) -> Result<T> {
        // SAFETY: as in `is'; `non_local_exit_check' only reads.
        if unsafe { (self.functions.non_local_exit_check)(self.raw) } == NO_EXIT {
            Ok(value)
        } else {
            self.exit()
        }
    }

    fn funcall<const N: usize>(
        &self,
        function: emacs_value,
        mut args: [emacs_value; N],
    ) -> Result<emacs_value> {
        // SAFETY: FUNCTION and ARGS are values of this call or global
        // references; the value is used only once no exit is pending.
        let value =
            unsafe { (self.functions.funcall)(self.raw, function, N as isize, args.as_mut_ptr()) };
        self.checked(value)
    }

    /// The number of entries of TABLE, a hash table.
    pub(super) fn count(&self, table: Handle<'e>) -> Result<i64> {
        let count = self.funcall(self.constants.hash_table_count, [table.raw])?;
        // SAFETY: as in `is'.  `hash-table-count' returns a fixnum, unless
        // advice made it return something else, which `extract_integer'
        // refuses with an exit, reported as any other.
        let count = unsafe { (self.functions.extract_integer)(self.raw, count) };
        self.checked(count)
    }

    /// Whether TABLE, a hash table, has three entries.
    pub(super) fn has_three(&self, table: Handle<'e>) -> Result<bool> {
        let count = self.funcall(self.constants.hash_table_count, [table.raw])?;
        // SAFETY: as in `is'.
        Ok(unsafe { (self.functions.eq)(self.raw, count, self.constants.three) })
    }

    /// The value of KEY in TABLE, a hash table; None when it has none.
    pub(super) fn lookup(&self, table: Handle<'e>, key: Key) -> Result<Option<Handle<'e>>> {
        let absent = self.constants.absent;
        let value = self.funcall(
            self.constants.gethash,
            [self.constants.keys[key as usize], table.raw, absent],
        )?;
        // SAFETY: as in `is'.
        let found = unsafe { !(self.functions.eq)(self.raw, value, absent) };
        Ok(found.then(|| self.handle(value)))
    }

    /// The length of VECTOR, a vector.
    pub(super) fn vector_len(&self, vector: Handle<'e>) -> usize {
        // SAFETY: `vec_size' does not exit for a vector.
        let size = unsafe { (self.functions.vec_size)(self.raw, vector.raw) };
        usize::try_from(size).unwrap_or(0)
    }

    /// Element I of VECTOR, a vector; None, with no exit left pending,
    /// when it has no such element (a vector never shrinks, but this is
    /// not the place to count on it).
    pub(super) fn element(&self, vector: Handle<'e>, i: usize) -> Option<Handle<'e>> {
        let i = isize::try_from(i).ok()?;
        // SAFETY: as in `is'.  A failed `vec_get' (an index out of range)
        // returns no value, only its own exit, which is cleared here.
        unsafe {
            let value = (self.functions.vec_get)(self.raw, vector.raw, i);
            if value.is_null() {
                (self.functions.non_local_exit_clear)(self.raw);
                None
            } else {
                Some(self.handle(value))
            }
        }
    }

    /// The UTF-8 bytes of HANDLE, a string, copied into BUFFER; None, with
    /// no exit left pending, when it is not a string or does not fit with
    /// its terminating NUL.
    pub(super) fn text<'b>(&self, handle: Handle<'e>, buffer: &'b mut [u8]) -> Option<&'b [u8]> {
        let mut size = isize::try_from(buffer.len()).ok()?;
        // SAFETY: BUFFER is writable for SIZE bytes, and Emacs writes no
        // more.  No exit is pending when this is called (every `funcall'
        // above was checked), so a failed copy's exit is the copy's own, a
        // wrong type or a short buffer, and clearing it hides nothing.
        let copied = unsafe {
            let copied = (self.functions.copy_string_contents)(
                self.raw,
                handle.raw,
                buffer.as_mut_ptr().cast(),
                &mut size,
            );
            if !copied {
                (self.functions.non_local_exit_clear)(self.raw);
            }
            copied
        };
        // SIZE counts the terminating NUL.
        let length = usize::try_from(size).ok()?.checked_sub(1)?;
        copied.then(|| &buffer[..length])
    }
}
