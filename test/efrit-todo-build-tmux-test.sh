#!/bin/sh
# Terminal test of the first build of the module, as a new user meets it:
# a fresh clone of this checkout (its last commit) without the module,
# cargo's target directory empty, `emacs -nw -Q' under tmux requiring
# efrit-todo.  It answers y to the offer to build; while cargo builds, it
# types into *scratch* and checks that each key shows at once, and that a
# call to efrit-todo says the build is running; when the build has ended,
# a todo_write works in the same Emacs.  Then `make build' in the clone,
# with the module gone, must copy it from CARGO_TARGET_DIR.
# A full release build: a minute or more.  Usage (from `make build-tmux-test'):
#   EMACS=emacs sh test/efrit-todo-build-tmux-test.sh
set -eu
cd "$(dirname "$0")/.."
root=$PWD

for tool in tmux git cargo; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "build-tmux-test: $tool is not installed" >&2
        exit 1
    fi
done

# tmux refuses to start without a usable TERM (CI often has none or dumb).
case "${TERM:-dumb}" in dumb|unknown) TERM=xterm-256color ;; esac
export TERM
export LANG=C.UTF-8
EMACS=${EMACS:-emacs}
socket="efrit-todo-build-test-$$"
work=$(mktemp -d "${TMPDIR:-/tmp}/efrit-todo-build-tmux.XXXXXX")
# The Emacs under test (and cargo) run with a HOME of their own, so that
# nothing is written under the user's (native compilation's eln-cache,
# Efrit's ~/.emacs.d/.efrit).  rustup's toolchain stays reachable.
for tool in rustup cargo; do
    dir="$HOME/.$tool"
    var=$(echo "$tool" | tr a-z A-Z)_HOME
    if [ -d "$dir" ] && [ -z "$(printenv "$var" || true)" ]; then export "$var=$dir"; fi
done
export HOME="$work/home"
mkdir -p "$HOME"
tmux_() { tmux -u -L "$socket" -f /dev/null "$@"; }
now_ms() { date +%s%3N; }
began=$(now_ms)
# say TEXT: report TEXT with the seconds since the start.
say() { echo "build-tmux-test: [$(( ($(now_ms) - began) / 1000 )) s] $*"; }
trap 'tmux_ kill-server >/dev/null 2>&1 || true; rm -rf "$work"' EXIT INT TERM

git clone -q "$root" "$work/repo"
mkdir "$work/target"
repo=$work/repo
if [ -e "$repo/lisp/efrit-todo-module.so" ]; then
    echo "build-tmux-test: the fresh clone has a module already" >&2
    exit 1
fi

# No saved lists read or written: the state directory is nil.  M-: shows
# an error in the echo area rather than in the debugger.  Then the
# README's Efrit lines (-L lisp for its load-path line), and the stand-in
# Efrit set up after them: the mode, and the indicator it turns on, must
# come on while cargo builds, and the rest of the init file must run.
tmux_ new-session -d -x 80 -y 24 \
    "cd '$repo' && env CARGO_TARGET_DIR='$work/target' $EMACS -nw -Q -L lisp --eval '(setq inhibit-startup-screen t eval-expression-debug-on-error nil efrit-todo-state-directory nil)' --eval '(require (quote efrit-todo-efrit))' --eval '(efrit-todo-efrit-mode 1)' -L test/fake-efrit/lisp --eval '(require (quote efrit))'"

# wait_for NAME SECONDS PATTERN...: poll the pane until one capture
# matches every extended regexp PATTERN; fail showing the pane otherwise.
wait_for() {
    name=$1 seconds=$2
    shift 2
    tries=$((seconds * 10))
    while [ "$tries" -gt 0 ]; do
        pane=$(tmux_ capture-pane -p 2>/dev/null || true)
        ok=yes
        for pattern in "$@"; do
            printf '%s\n' "$pane" | grep -Eq -- "$pattern" || { ok=no; break; }
        done
        if [ "$ok" = yes ]; then
            say "$name: seen"
            return 0
        fi
        sleep 0.1
        tries=$((tries - 1))
    done
    echo "build-tmux-test: $name: not seen within ${seconds}s; missing: $pattern; the pane:" >&2
    printf '%s\n' "$pane" >&2
    exit 1
}

# cargo_running: true while the cargo that Emacs started, in the clone, runs.
cargo_running() {
    for pid in $(pgrep -f -- '--message-format=json-render-diagnostics' || true); do
        [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$repo" ] && return 0
    done
    return 1
}


wait_for "the offer" 60 'build it with cargo in the background\? \(y or n\)'
tmux_ send-keys y
wait_for "the crate count" 120 'building the module, [0-9]+/[0-9]+ crates' '\*scratch\*'
cargo_running || { echo "build-tmux-test: cargo is not running" >&2; exit 1; }

# Keys typed into *scratch* while cargo builds: each must show within
# 3 s (a frozen Emacs shows none until the build ends); the time each
# took is reported.
typed=0 slowest=0 times=""
while [ "$typed" -lt 8 ] && cargo_running; do
    typed=$((typed + 1))
    marker="key${typed}q"
    start=$(now_ms)
    tmux_ send-keys -l "$marker"
    shown=no
    while [ $(( $(now_ms) - start )) -lt 3000 ]; do
        if tmux_ capture-pane -p | grep -q "$marker"; then shown=yes; break; fi
        sleep 0.02
    done
    took=$(( $(now_ms) - start ))
    if [ "$shown" = no ]; then
        echo "build-tmux-test: \"$marker\" typed during the build did not show within 3 s; the pane:" >&2
        tmux_ capture-pane -p >&2
        exit 1
    fi
    cargo_running || { typed=$((typed - 1)); break; }
    times="$times ${took}"
    [ "$took" -gt "$slowest" ] && slowest=$took
    sleep 2
done
if [ "$typed" -lt 3 ]; then
    echo "build-tmux-test: the build ended before 3 keys could be typed during it" >&2
    exit 1
fi
say "$typed keys typed during the build showed after (ms):$times"

# The whole init file ran, the modes on.
if cargo_running; then
    tmux_ send-keys M-:
    tmux_ send-keys -l '(list :modes efrit-todo-efrit-mode efrit-todo-mode-line-mode (featurep (quote efrit)))'
    tmux_ send-keys Enter
    wait_for "the modes on during the build" 10 '\(:modes t t t\)'
fi

# A call before the module is there says that it is being built.
if cargo_running; then
    tmux_ send-keys M-:
    tmux_ send-keys -l '(efrit-todo-list)'
    tmux_ send-keys Enter
    wait_for "the call during the build" 10 'still being built.*crate'
fi

wait_for "the end of the build" 900 'module built in [0-9]+ s and loaded'
build_seconds=$(tmux_ capture-pane -p | sed -n 's/.*module built in \([0-9]*\) s and loaded.*/\1/p' | head -1)

tmux_ send-keys M-:
tmux_ send-keys -l '(efrit-todo-write (quote (:todos [(:content "Typed while building" :status "in_progress")])))'
tmux_ send-keys Enter
wait_for "a todo_write after the build" 20 'TODO list updated' 'Typed while building'
# The indicator the mode turned on during the build shows the list (at
# 80 columns, the counts alone, so that the buffer's name stays in view).
wait_for "the indicator after the build" 10 'Todo 0/1 +\*scratch\*'

# make honours CARGO_TARGET_DIR: the library is there, not in target/.
rm "$repo/lisp/efrit-todo-module.so"
make_start=$(now_ms)
if ! (cd "$repo" && CARGO_TARGET_DIR="$work/target" make -s build >"$work/make.log" 2>&1); then
    say "make build with CARGO_TARGET_DIR set failed:" >&2
    cat "$work/make.log" >&2
    exit 1
fi
[ -e "$repo/lisp/efrit-todo-module.so" ] && [ ! -e "$repo/target" ] || {
    echo "build-tmux-test: make build did not use CARGO_TARGET_DIR" >&2
    exit 1
}
say "make build with CARGO_TARGET_DIR: $(( $(now_ms) - make_start )) ms"

say "passed: the build took ${build_seconds} s; keys during it showed within ${slowest} ms"
