//! The circuit breaker: stops an agent loop that no longer makes progress.
