//! Where validation errors, storage failures and panics become the Lisp
//! errors the module signals.

use std::panic::{catch_unwind, AssertUnwindSafe};

use emacs::{Env, IntoLisp, Result, Value};

use super::symbols::{
    efrit_todo_internal_error, efrit_todo_invalid_input, efrit_todo_storage_error,
};
use crate::validate::InvalidInput;

// The hierarchy (`efrit-todo-error' and its children) is defined once, in
// lisp/efrit-todo-build.el, which Lisp loads before the module: Lisp must
// signal and catch these errors while the module is still being built.
// The module only signals those symbols and defines none of its own.

/// Signals `efrit-todo-invalid-input' with a message that names the field.
pub(super) fn invalid<T>(env: &Env, error: InvalidInput) -> Result<T> {
    env.signal(efrit_todo_invalid_input, (error.to_string(),))
}

/// Signals `efrit-todo-storage-error' with MESSAGE.
pub(super) fn storage_failure<T>(env: &Env, message: String) -> Result<T> {
    env.signal(efrit_todo_storage_error, (message,))
}

/// The value of RESULT, or its validation error as the Lisp signal.
pub(super) fn valid<T>(env: &Env, result: std::result::Result<T, InvalidInput>) -> Result<T> {
    match result {
        Ok(value) => Ok(value),
        Err(error) => invalid(env, error),
    }
}

/// RESULT as a Lisp value, or its validation error as the Lisp signal.
pub(super) fn checked<'e, T: IntoLisp<'e>>(
    env: &'e Env,
    result: std::result::Result<T, InvalidInput>,
) -> Result<Value<'e>> {
    valid(env, result)?.into_lisp(env)
}

/// Runs the body of a defun, turning a panic into `efrit-todo-internal-error'
/// with the panic's message.  The emacs crate would catch it too, but as its
/// own `rust-panic', outside our hierarchy.  The registry's lock survives a
/// panic (it is taken poisoned or not), so Emacs goes on working.
pub(super) fn guarded<T>(env: &Env, body: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|text| text.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_string());
            env.signal(efrit_todo_internal_error, (message,))
        }
    }
}
