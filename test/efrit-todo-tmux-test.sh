#!/bin/sh
# Terminal test of the live demo: tmux runs `emacs -nw -Q` with
# test/efrit-todo-demo.el, and `tmux capture-pane' must show the
# *efrit-todos* buffer and the mode-line indicator with the expected text
# at two moments of the replay.  No terminal is needed: the tmux server
# runs detached on its own socket.  Usage (from `make tmux-test'):
#   EMACS=emacs sh test/efrit-todo-tmux-test.sh
set -eu
cd "$(dirname "$0")/.."

if ! command -v tmux >/dev/null 2>&1; then
    echo "tmux-test: tmux is not installed (.ci/run installs it)" >&2
    exit 1
fi

# tmux refuses to start without a usable TERM (CI often has none or dumb).
case "${TERM:-dumb}" in dumb|unknown) TERM=xterm-256color ;; esac
export TERM
export LANG=C.UTF-8
EMACS=${EMACS:-emacs}
socket="efrit-todo-test-$$"
tmux_() { tmux -u -L "$socket" -f /dev/null "$@"; }
trap 'tmux_ kill-server >/dev/null 2>&1 || true' EXIT INT TERM

tmux_ new-session -d -x 160 -y 40 \
    "env EFRIT_TODO_DEMO_SPEED=1.5 $EMACS -nw -Q -L lisp -L test --eval '(setq efrit-todo-state-directory nil)' -l test/efrit-todo-demo.el -f efrit-todo-demo-live"

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
            echo "tmux-test: $name: seen"
            return 0
        fi
        sleep 0.1
        tries=$((tries - 1))
    done
    echo "tmux-test: $name: not seen within ${seconds}s; missing: $pattern; the pane:" >&2
    printf '%s\n' "$pane" >&2
    exit 1
}

# The list window starts after the window divider: a top-level item two
# columns in, a subtask four.
edge='(\||│)'

# t4 runs, and its text has a `%' that the mode line must show as is.
# t3's subtasks t6 and t7 stand under it, indented.
wait_for "t4 running" 40 \
    '(◐|\[>\]) t4  Running the tests: 100%-pass  running' \
    'Todo 5/7 Running the tests: 100%-pass' \
    "$edge  (✓|\\[x\\]) t3  Update the callers" \
    "$edge    (✓|\\[x\\]) t6  Update main\\.el  took" \
    "$edge    (✓|\\[x\\]) t7  Update cli\\.el  took"

# The end: six done, t5 cancelled by the user.
wait_for "all done" 30 \
    '(✓|\[x\]) t4  Run the test suite: 100%-pass  took' \
    '(✗|\[-\]) t5  Update the docs' \
    "$edge    (✓|\\[x\\]) t6  Update main\\.el  took" \
    'Todo 6/7 done' \
    '(▾|-) demo  6/7 done  breaker ok'

echo "tmux-test: passed"
