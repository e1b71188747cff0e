# efrit-todo: `make help' lists the targets.

EMACS ?= emacs
# Emacs 30 beside the system's: EMACS30 when set, else an emacs-30.x
# already on PATH (emacs-30.1, as distributions name it), else the
# wrapper that .ci/install-emacs30 writes after unpacking Debian's
# bookworm-backports build into .ci/emacs30/ (on first use).
EMACS30_ON_PATH := $(firstword $(filter-out %.pdmp,$(foreach dir,$(subst :, ,$(PATH)),$(wildcard $(dir)/emacs-30.*))))
EMACS30 ?= $(or $(EMACS30_ON_PATH),.ci/emacs30/emacs)
CARGO ?= cargo
MODULE := lisp/efrit-todo-module.so
# Where cargo puts the library: CARGO_TARGET_DIR, a build.target-dir in
# a .cargo/config.toml, or target/, as cargo itself resolves them.
TARGET_DIR = $(shell $(CARGO) metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
BUILT = $(TARGET_DIR)/release/libefrit_todo.so
LISP := $(wildcard lisp/*.el)
SUITES := $(wildcard test/*-test.el)
# The tests and benches get checkdoc too.  The two bench files named here
# are being rewritten on another branch; checkdoc them again once that
# lands, and drop this list.
CHECKDOC_ONLY := $(wildcard test/*.el bench/*.el)
# A test that replaces a primitive (cl-letf) makes a natively compiled
# Emacs compile a trampoline into ~/.emacs.d/eln-cache: none, so that
# the tests write nothing under HOME.  (28 and 30 name the option apart.)
NO_TRAMPOLINES := --eval '(setq comp-enable-subr-trampolines nil native-comp-enable-subr-trampolines nil)'
BATCH := $(EMACS) -Q --batch $(NO_TRAMPOLINES) -L lisp -L test -L bench
# ERT's batch summary then gives each skipped test's reason.
export EMACS_TEST_VERBOSE := 1

.PHONY: build test emacs-test test-emacs30 cargo-test ert setup-test loop test-efrit test-gptel fuzz lint lint-rust lint-lisp tmux-test build-tmux-test bench demo clean help

build: $(MODULE) ## Build the module into lisp/efrit-todo-module.so (the default)

# The module is replaced by a new file, not written over: an Emacs that
# has it loaded keeps the old file mapped, and would crash.
$(MODULE): Cargo.toml $(wildcard src/*.rs src/*/*.rs)
	$(CARGO) build --release
	cp "$(BUILT)" $@.new
	mv -f $@.new $@

test: cargo-test lint-rust emacs-test build-tmux-test ## Everything CI runs on one Emacs: cargo tests, clippy, rustfmt, layering, emacs-test, the build in tmux

emacs-test: ert loop fuzz lint-lisp tmux-test ## What CI runs on each Emacs: ERT suites, loop scenarios, fuzzer, Lisp lint, tmux

test-emacs30: $(EMACS30) ## emacs-test on Emacs 30 (EMACS30, else emacs-30.x on PATH, else 30.1 installed on first use)
	$(MAKE) emacs-test EMACS=$(abspath $(EMACS30))

.ci/emacs30/emacs:
	sh .ci/install-emacs30

cargo-test: ## Unit and property tests of the pure Rust modules, then clippy
	$(CARGO) test --release
	$(CARGO) clippy --release --all-targets -- -D warnings

# The gptel and agent-team scenarios run a second time against the fake
# gptel standing for gptel 0.9.9.4 (its older system-message variable, no
# post-tool hook, the TOOL state not split).
# Suites are required, not loaded: one suite may require another, and
# Emacs 29 and later refuse a test defined twice in batch.
REQUIRE = --eval '(mapc (quote require) (quote ($(1))))'
ert: build ## The ERT suites in batch Emacs against the built module
	$(BATCH) $(call REQUIRE,$(notdir $(basename $(SUITES)))) -f ert-run-tests-batch-and-exit
	EFRIT_TODO_FAKE_GPTEL=0.9.9.4 $(BATCH) $(call REQUIRE,efrit-todo-gptel-test efrit-todo-gptel-team-test) \
	  -f ert-run-tests-batch-and-exit

# The ert target runs this suite too; EFRIT_DIR set, with that Efrit.
setup-test: build ## The README's set-ups in fresh emacs -Q -nw, in every order with Efrit's; package installs
	EMACS="$(EMACS)" $(BATCH) -l test/efrit-todo-setup-test.el -f ert-run-tests-batch-and-exit

loop: build ## The agent-loop scenarios through a stand-in efrit-do loop
	$(BATCH) -l test/efrit-todo-fake-efrit.el -l test/efrit-todo-scenarios.el -f ert-run-tests-batch-and-exit

REAL_EFRIT = $(BATCH) -l test/efrit-todo-real-efrit.el -l test/efrit-todo-scenarios.el
test-efrit: build ## The scenarios and Efrit's own todo tests on the Efrit checkout at EFRIT_DIR
	@if [ -z "$(EFRIT_DIR)" ]; then echo "test-efrit: skipped, EFRIT_DIR is unset; to run it: make test-efrit EFRIT_DIR=/path/to/efrit"; else \
	  set -e; \
	  $(REAL_EFRIT) -l test/efrit-todo-efrit-test.el -f ert-run-tests-batch-and-exit; \
	  $(REAL_EFRIT) -f efrit-todo-scenarios-compare; \
	  $(MAKE) --no-print-directory setup-test; \
	  EMACS="$(EMACS)" test/efrit-suites.sh "$(EFRIT_DIR)"; fi

# GPTEL_LOAD_PATH adds directories (colon-separated) for gptel's own
# dependencies, e.g. a compat checkout on Emacs 28.  The scenarios run
# five times: gptel's OpenAI backend over curl, over curl with streamed
# responses and over url.el, and its Anthropic backend over curl and
# over url.el.
test-gptel: build ## The gptel scenarios through the gptel checkout at GPTEL_DIR (5 ways); the agent teams with GPTEL_AGENT_DIR
	@if [ -z "$(GPTEL_DIR)" ]; then echo "test-gptel: skipped, GPTEL_DIR is unset (make ert runs it against the fake gptel); to run it: make test-gptel GPTEL_DIR=/path/to/gptel"; else \
	  set -e; for transport in "" "EFRIT_TODO_GPTEL_STREAM=1" "EFRIT_TODO_GPTEL_CURL=0" "EFRIT_TODO_GPTEL_BACKEND=anthropic" \
	      "EFRIT_TODO_GPTEL_BACKEND=anthropic EFRIT_TODO_GPTEL_CURL=0"; do \
	    env $$transport GPTEL_DIR="$(GPTEL_DIR)" GPTEL_LOAD_PATH="$(GPTEL_LOAD_PATH)" \
	      $(BATCH) -l test/efrit-todo-gptel-test.el -f ert-run-tests-batch-and-exit; done; \
	  GPTEL_DIR="$(GPTEL_DIR)" GPTEL_AGENT_DIR="$(GPTEL_AGENT_DIR)" GPTEL_LOAD_PATH="$(GPTEL_LOAD_PATH)" \
	    $(BATCH) -l test/efrit-todo-gptel-team-test.el --eval '(ert-run-tests-batch-and-exit "efrit-todo-gptel-team-test")'; fi

# --module-assertions makes Emacs check every use of the module API.  The
# seed is fixed; EFRIT_TODO_FUZZ_SECONDS bounds the time (default 25).
fuzz: build ## Random values into every public function, module API checked
	$(EMACS) -Q --batch $(NO_TRAMPOLINES) --module-assertions -L lisp -L test -l efrit-todo-fuzz -f ert-run-tests-batch-and-exit

lint: lint-rust lint-lisp ## lint-rust and lint-lisp

lint-rust: ## rustfmt check; module layering (tests/architecture.rs)
	$(CARGO) fmt --check
	$(CARGO) test --release --test architecture

# The .elc of test/ and bench/ are removed even when a file fails.
lint-lisp: build ## byte-compile (warnings are errors); checkdoc, also of test/ and bench/; package-lint of lisp/
	$(EMACS) --batch $(NO_TRAMPOLINES) -L lisp -l test/lint.el $(LISP) --checkdoc-only $(CHECKDOC_ONLY)
	$(BATCH) --eval '(setq byte-compile-error-on-warn t)' -f batch-byte-compile test/*.el bench/*.el; \
	  status=$$?; rm -f test/*.elc bench/*.elc; exit $$status

tmux-test: build ## The live demo in emacs -nw under tmux: list and mode line as drawn
	EMACS=$(EMACS) sh test/efrit-todo-tmux-test.sh

# A full cargo build (a minute or more) of the last commit, in a clone.
build-tmux-test: ## A fresh clone builds its module in emacs -nw under tmux; keys typed meanwhile show at once
	EMACS=$(EMACS) sh test/efrit-todo-build-tmux-test.sh

# One Emacs times both sides in turn (median of EFRIT_TODO_BENCH_RUNS >= 10
# runs, GC share, Lisp allocation per call); with EFRIT_DIR set to an Efrit
# checkout, Efrit's own handler and breaker, byte-compiled into a temporary
# directory, are the other side.  Then the token-cost table.  An .elc
# beside a bench file is loaded only when newer than its source.
NEWER := --eval '(setq load-prefer-newer t)'
bench: build ## us per call and GC share beside Efrit's (EFRIT_DIR); allocation; token cost
	$(BATCH) $(NEWER) -l efrit-todo-bench -f efrit-todo-bench-run
	$(BATCH) $(NEWER) -l efrit-todo-bench-cost -f efrit-todo-bench-cost-run

# Live in Emacs (GUI with a display, else this terminal); without a
# terminal (CI, a pipe) the batch replay prints what the model reads.
demo: build ## Watch an agent session replayed live: the todo list and mode line
	@if [ -t 0 ] && [ -t 1 ] || [ -n "$$DISPLAY$$WAYLAND_DISPLAY" ]; then \
	  $(EMACS) -Q -L lisp --eval '(setq efrit-todo-state-directory nil inhibit-startup-screen t)' \
	    -l efrit-todo-demo -f efrit-todo-demo; \
	else \
	  $(BATCH) -l efrit-todo-demo -f efrit-todo-demo; \
	fi

clean: ## Remove build products
	$(CARGO) clean
	rm -f $(MODULE) lisp/*.elc test/*.elc bench/*.elc

help: ## List the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{ printf "  %-16s %s\n", $$1, $$2 }'
