#!/bin/sh
# Terminal test of the list and the mode line as a user sees them: tmux
# runs `emacs -nw -Q' with the demo (lisp/efrit-todo-demo.el and
# test/efrit-todo-demo-scenes.el), and `tmux
# capture-pane' must show every item's text whole (wrapped, perhaps,
# never cut) and the indicator in the mode line of the window the user
# works in, at 80x24, 120x40 and 30x20, and after the terminal shrinks
# from 160 to 80 columns; a task graph at 80x24 and 30x20.  The keys of
# the list are pressed as a user would, the dependency keys too; a list
# shared with another Emacs redraws when that Emacs changes it.  No
# terminal is needed: each tmux server runs detached on its
# own socket.  Usage (from `make tmux-test'):
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
socket=""
sockets=""
tmux_() { tmux -u -L "$socket" -f /dev/null "$@"; }
# The Emacs under test runs with a HOME of its own, so that nothing
# (native compilation's eln-cache, for one) is written under the user's.
home=$(mktemp -d "${TMPDIR:-/tmp}/efrit-todo-tmux-home.XXXXXX")
export HOME="$home"
cleanup() {
    for s in $sockets; do tmux -L "$s" -f /dev/null kill-server >/dev/null 2>&1 || true; done
    rm -rf "$home"
}
trap cleanup EXIT INT TERM

# start NAME COLUMNS LINES FUNCTION: a fresh Emacs in a fresh terminal of
# that size, running FUNCTION of the demo.
start() {
    socket="efrit-todo-test-$$-$1"
    sockets="$sockets $socket"
    tmux_ new-session -d -x "$2" -y "$3" \
        "env EFRIT_TODO_DEMO_SPEED=1.5 $EMACS -nw -Q -L lisp -L test --eval '(setq efrit-todo-state-directory nil inhibit-startup-screen t)' -l test/efrit-todo-demo-scenes.el -f $4"
}

stop() { tmux_ kill-server >/dev/null 2>&1 || true; }

keys() { tmux_ send-keys "$@"; sleep 0.4; }

# list_text PANE SESSION: the text of the *efrit-todos* window in PANE,
# from the heading of SESSION to the window's mode line, its lines
# joined with single spaces, so that an item wrapped over several
# lines reads as one.  Beside another window, the list is what follows
# the window divider.
list_text() {
    printf '%s\n' "$1" | awk -v session="$2" '
        { line = $0; i = index(line, "|"); if (i > 0) line = substr(line, i + 1) }
        started && index(line, "*efrit-todos*") { exit }
        started || line ~ ("^(▾|-) " session "  [0-9]") { started = 1; printf "%s ", line }' |
        tr -s ' '
}

# wait_for NAME SECONDS PATTERN...: poll the pane until one capture
# matches every extended regexp PATTERN; fail showing the pane otherwise.
# A PATTERN that starts with "list:" is matched against the list's text
# (list_text), "no:" must not match the pane.
wait_for() {
    name=$1 seconds=$2
    shift 2
    tries=$((seconds * 10))
    while [ "$tries" -gt 0 ]; do
        pane=$(tmux_ capture-pane -p 2>/dev/null || true)
        list=$(list_text "$pane" demo)
        ok=yes
        for pattern in "$@"; do
            case $pattern in
                list:*) printf '%s\n' "$list" | grep -Eq -- "${pattern#list:}" || { ok=no; break; } ;;
                no:*) ! printf '%s\n' "$pane" | grep -Eq -- "${pattern#no:}" || { ok=no; break; } ;;
                *) printf '%s\n' "$pane" | grep -Eq -- "$pattern" || { ok=no; break; } ;;
            esac
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
    echo "tmux-test: the list's text: $list" >&2
    exit 1
}

# divider_column: where the window divider stands on the pane's third
# line (the second window line), or 0 when the windows are not side by
# side.
divider_column() {
    tmux_ capture-pane -p | awk 'NR == 3 { print index($0, "|"); exit }'
}

# The selected window is the one showing *demo*: its mode line shows the
# indicator before the buffer name.
indicator() { printf 'Todo %s.*\\*demo\\*' "$1"; }

still_items='list:(✓|\[x\]) t1 Find every call of parse-config took'
still_running='list:(◐|\[>\]) t2 Renaming it: 100% of calls running'
still_waiting='list:(○|\[ \]) t3 Update the callers in main\.el and cli\.el'

# A list part-way, at each size: every item whole, the indicator in
# view; beside the window in use on a wide terminal, below it otherwise.
for size in 120x40 80x24 30x20; do
    start "still-$size" "${size%x*}" "${size#*x}" efrit-todo-demo-scenes-still
    wait_for "$size: the list and the indicator" 20 \
        "$still_items" "$still_running" "$still_waiting" "$(indicator 1/3)" \
        'no:\$$'
    column=$(divider_column)
    case $size in
        120x40) [ "$column" -gt 60 ] || { echo "tmux-test: $size: the list is not beside (divider at $column)" >&2; exit 1; } ;;
        *) [ "$column" -eq 0 ] || { echo "tmux-test: $size: the list is not below (divider at $column)" >&2; exit 1; } ;;
    esac
    echo "tmux-test: $size: the list is $( [ "$column" -gt 0 ] && echo beside || echo below )"
    stop
done

# The keys, at 80x24.  Entering the list puts point on the running item,
# so n moves on to t3; i starts t3 (t2 waits again), c completes it, c
# again says what would change it, r reopens it.
start keys 80 24 efrit-todo-demo-scenes-still
wait_for "keys: shown" 20 "$still_running"
keys C-x o
keys n
keys i
wait_for "keys: i starts t3" 5 'list:(◐|\[>\]) t3 Update the callers' 'list:(○|\[ \]) t2 Rename it in config\.el'
keys c
wait_for "keys: c completes t3" 5 'list:(✓|\[x\]) t3 Update the callers'
keys c
wait_for "keys: c again says what would change it" 5 't3 is already completed: r reopens it'
keys r
wait_for "keys: r reopens t3" 5 'list:(○|\[ \]) t3 Update the callers'
# Off an item, a key says so; *Messages* has no stray "if: " before it.
keys M-\<
keys c
wait_for "keys: c on the heading" 5 'Efrit-todo: no item on this line'
# C-x 1 in the list keeps only the list; q then leaves one window.
keys C-x 1
wait_for "keys: C-x 1 keeps only the list" 5 "$still_waiting" \
    'no:Cannot make side window' 'no:\*demo\*'
keys q
wait_for "keys: q closes it" 5 "$(indicator 1/3)" 'no:efrit-todos'
keys C-h e
wait_for "keys: *Messages*" 5 '^Efrit-todo: no item on this line' 'no:^if: '
stop

# A task graph, at 80x24 and 30x20: blocked items name their open
# blockers, owners stand in parentheses, the description is folded.
graph_t1='list:(◐|\[>\]) t1 Writing the parser \(alice\) running [0-9]+s (▸|\+) description'
graph_t2='list:(⊘|\[b\]) t2 Write the tests blocked by t1'
graph_t3='list:(⊘|\[b\]) t3 Document every form of the new syntax \(bob\) blocked by t1, t2'
graph_t4='list:(○|\[ \]) t4 Announce the release'
start graph-80x24 80 24 efrit-todo-demo-scenes-graph
wait_for "graph 80x24: blockers, owners, folded description" 20 \
    "$graph_t1" "$graph_t2" "$graph_t3" "$graph_t4" 'no:Recursive descent'
stop
# At 30 columns every note wraps under the item's text; the list below
# the narration has room for the first items, C-x 1 in it for all.
start graph-30x20 30 20 efrit-todo-demo-scenes-graph
wait_for "graph 30x20: the first items, wrapped" 20 "$graph_t1" "$graph_t2" \
    '^        blocked by t1$'
keys C-x o
keys C-x 1
wait_for "graph 30x20: C-x 1 shows every item" 5 \
    "$graph_t1" "$graph_t2" "$graph_t3" "$graph_t4" 'no:Recursive descent'
stop

# The dependency keys, at 80x24: TAB shows t1's description; B on t2
# takes its one blocker away (RET takes the first); B on t3 removes t2
# only; b on t4 adds t3; b on t1 naming t4 would close a cycle: refused.
start graph-keys 80 24 efrit-todo-demo-scenes-graph
wait_for "graph keys: shown" 20 "$graph_t1"
keys C-x o
keys TAB
wait_for "graph keys: TAB shows the description" 5 \
    'list:(▾|-) description Recursive descent\. Errors keep their line and column\. (⊘|\[b\]) t2'
keys TAB
wait_for "graph keys: TAB hides it" 5 "$graph_t1" 'no:Recursive descent'
keys n
keys B
wait_for "graph keys: B offers t2's blocker" 5 't2 no longer blocked by \(default t1\):'
keys Enter
wait_for "graph keys: B frees t2" 5 'list:(○|\[ \]) t2 Write the tests (⊘|\[b\]) t3' \
    'Efrit-todo: the user [^(]*t2[^(]*t1 \(the agent reads this'
keys n
keys B
keys t2 Enter
wait_for "graph keys: B on t3 removes t2" 5 \
    'list:t3 Document every form of the new syntax \(bob\) blocked by t1 (○|\[ \]) t4'
keys n
keys b
wait_for "graph keys: b asks for the blocker" 5 't4 is blocked by:'
keys t3 Enter
wait_for "graph keys: b makes t4 wait for t3" 5 'list:(⊘|\[b\]) t4 Announce the release blocked by t3'
keys M-\<
keys n
keys b
keys t4 Enter
wait_for "graph keys: a cycle is refused" 5 'Efrit-todo: .*cycle' "$graph_t1"
keys ?
wait_for "graph keys: ? opens the help" 5 '^Keys of \*efrit-todos\*'
# The help window is small here: the dependency keys are further down.
# ? selected it, so C-s searches it and q closes it, not the list.
keys C-s 'add a blocker' Enter
wait_for "graph keys: the help names b and B" 5 '^b +add a blocker' '^B +remove one of the item.s blockers'
keys q
wait_for "graph keys: q closes the help, the list stays" 5 'no:Keys of \*efrit-todos\*' "$graph_t1"
stop

# A terminal shrunk from 160 to 80 columns: the list keeps its share of
# the width, the window beside it too, and the items stay whole.
start resize 160 40 efrit-todo-demo-scenes-still
wait_for "resize: beside at 160" 20 "$still_items" "$still_running" "$still_waiting"
before=$(divider_column)
tmux_ resize-window -x 80 -y 24
wait_for "resize: at 80" 10 "$still_items" "$still_running" "$still_waiting" "$(indicator 1/3)"
after=$(divider_column)
echo "tmux-test: resize: the divider went from column $before to $after"
if [ "$after" -lt 40 ] || [ "$after" -gt 60 ]; then
    echo "tmux-test: resize: the windows did not keep their shares (divider at $after of 80)" >&2
    tmux_ capture-pane -p >&2
    exit 1
fi
stop

# The live demo at 80x24, the size `make demo' is tried at: the list
# below the narration, subtasks under their parent, the running item's
# `%' as is, and at the end all seven items whole.
start live 80 24 efrit-todo-demo
wait_for "live: t4 running" 40 \
    'list:(◐|\[>\]) t4 Running the tests: 100%-pass running' \
    'Todo 5/7  \*efrit-todo-demo\* .*L[0-9]+ .*\(Efrit-Todo-Demo\)' \
    '^  (✓|\[x\]) t3  Update the callers' \
    '^    (✓|\[x\]) t6  Update main\.el  took' \
    '^    (✓|\[x\]) t7  Update cli\.el  took'
wait_for "live: all done" 30 \
    'list:(✓|\[x\]) t1 Find every call of parse-config took' \
    'list:(✓|\[x\]) t2 Rename parse-config to config-parse in config\.el took' \
    'list:(✓|\[x\]) t3 Update the callers in main\.el and cli\.el took' \
    'list:(✓|\[x\]) t6 Update main\.el took' \
    'list:(✓|\[x\]) t7 Update cli\.el took' \
    'list:(✓|\[x\]) t4 Run the test suite: 100%-pass took' \
    'list:(✗|\[-\]) t5 Update the docs' \
    'Todo 6/7 done  \*efrit-todo-demo\*' \
    '(▾|-) demo  6/7 done  breaker ok'
stop

# Another Emacs's change reaches the list a terminal Emacs shows within
# about a second: both share the list "proj" in one state directory;
# the terminal Emacs shows it, a batch Emacs adds a task.
state="$home/state"
mkdir -p "$state"
cat > "$home/shared.el" <<EOF
(require 'efrit-todo)
(setq inhibit-startup-screen t efrit-todo-state-directory "$state")
(efrit-todo-share-list "proj")
(efrit-todo-task-create '(("subject" . "Written here")) "proj")
(efrit-todo-show "proj")
EOF
socket="efrit-todo-test-$$-shared"
sockets="$sockets $socket"
tmux_ new-session -d -x 80 -y 24 "$EMACS -nw -Q -L lisp -l $home/shared.el"
wait_for "shared: own task" 20 't1 +Written here'
"$EMACS" -Q --batch -L lisp -l efrit-todo --eval "(setq efrit-todo-state-directory \"$state\")" \
    --eval '(efrit-todo-share-list "proj")' \
    --eval "(efrit-todo-task-create '((\"subject\" . \"Written by another Emacs\")) \"proj\")"
wait_for "shared: another Emacs's task" 5 't1 +Written here' 't2 +Written by another Emacs'
stop

echo "tmux-test: passed"
