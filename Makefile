# efrit-todo: `make help' lists the targets.

EMACS ?= emacs
CARGO ?= cargo
MODULE := lisp/efrit-todo-module.so
BUILT := target/release/libefrit_todo.so
LISP := $(wildcard lisp/*.el)
SUITES := $(wildcard test/*-test.el)
BATCH := $(EMACS) -Q --batch -L lisp -L test -L bench

.PHONY: build test cargo-test ert fuzz lint bench demo clean help

build: $(MODULE) ## Build the module into lisp/efrit-todo-module.so (the default)

$(MODULE): Cargo.toml $(wildcard src/*.rs)
	$(CARGO) build --release
	cp $(BUILT) $@

test: cargo-test ert fuzz lint ## Everything CI runs: cargo tests, clippy, ERT suites, fuzzer, lint

cargo-test: ## Unit and property tests of the pure Rust modules, then clippy
	$(CARGO) test --release
	$(CARGO) clippy --release --all-targets -- -D warnings

ert: build ## The ERT suites in batch Emacs against the built module
	$(BATCH) $(addprefix -l ,$(SUITES)) -f ert-run-tests-batch-and-exit

# --module-assertions makes Emacs check every use of the module API.  The
# seed is fixed; EFRIT_TODO_FUZZ_SECONDS bounds the time (default 25).
fuzz: build ## Random values into every public function, module API checked
	$(EMACS) -Q --batch --module-assertions -L lisp -L test -l efrit-todo-fuzz -f ert-run-tests-batch-and-exit

lint: build ## Byte-compile (warnings are errors), checkdoc, package-lint
	$(EMACS) --batch -L lisp -l test/lint.el $(LISP)
	$(BATCH) --eval '(setq byte-compile-error-on-warn t)' -f batch-byte-compile test/*.el bench/*.el
	rm -f test/*.elc bench/*.elc

# With EFRIT_DIR set to an Efrit checkout, Efrit's own handler and breaker
# are timed in a child Emacs and the ratios printed.
bench: build ## Table of us per call: todo_write, breaker pair, report, growth
	$(BATCH) -l efrit-todo-bench -f efrit-todo-bench-run

demo: build ## Replay a realistic agent plan in batch, printing each result
	$(BATCH) -l test/efrit-todo-demo.el -f efrit-todo-demo-run

clean: ## Remove build products
	$(CARGO) clean
	rm -f $(MODULE) lisp/*.elc test/*.elc bench/*.elc

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/'
