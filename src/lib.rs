//! efrit-todo: todo state, validation, the circuit breaker and result
//! aggregation for the Efrit agent, as an Emacs dynamic module.
//!
//! The pure modules know nothing of Emacs and are tested with `cargo test`;
//! `ffi` is the only code that touches the emacs crate.  Each module uses
//! only those above it in this order (tests/architecture.rs checks it):
//!
//! 1. model: items, statuses, ids and the small text helpers they share;
//! 2. graph: which items wait for which, what is ready, cycles;
//! 3. validate: input as Lisp hands it over, checked into proposed items;
//! 4. tree: parents and subtasks, checked before anything commits;
//! 5. history: changes, undo data, who made them;
//! 6. reconcile: a proposed list against the current one, as a diff;
//! 7. breaker: tool calls counted against the limits;
//! 8. guide: what the model is told to do next, and the prompt guidance;
//! 9. render: the text of todo_write results and lists;
//! 10. ledger: tool outputs kept per item, and the final report;
//! 11. session: one agent session, holding all of the above, and the registry;
//! 12. store: sessions saved to and restored from disk;
//! 13. ffi: the Emacs module.

pub mod breaker;
mod ffi;
pub mod graph;
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
