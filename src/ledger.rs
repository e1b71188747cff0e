//! The ledger: every tool call of a session and the final report built from it.
