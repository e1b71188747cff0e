#!/usr/bin/env bash
# Run every ERT file of Efrit's test suite three times: with Efrit alone,
# with efrit-todo's lisp/ first in load-path (so its efrit-todo.el stands
# in for Efrit's), and with `efrit-todo-efrit-mode' on as well.  Fail if
# efrit-todo adds a failure, except, with the mode on, the tests of
# Efrit's own result wording listed in WORDING (README.org says why).
# Failures of Efrit alone at the commit we test against are reported,
# not counted.  Each run is bounded to 120 s.
set -uo pipefail
efrit=${1:?usage: efrit-suites.sh EFRIT_DIR}
emacs=${EMACS:-emacs}
here=$(cd "$(dirname "$0")/.." && pwd)
# Efrit's tests write under ~/.emacs.d/.efrit: give them a HOME of their own.
home=$(mktemp -d "${TMPDIR:-/tmp}/efrit-suites-home.XXXXXX")
trap 'rm -rf "$home"' EXIT INT TERM
export HOME="$home"
suites=$(cd "$efrit/test" && ls test-*.el *-test.el 2>/dev/null)
efrit_path="-L $efrit/lisp -L $efrit/lisp/core -L $efrit/lisp/interfaces -L $efrit/lisp/tools -L $efrit/lisp/support"
WORDING="test-handle-todo-write-basic test-handle-todo-write-current-task-reported
test-handle-todo-write-empty test-circuit-breaker-integration-with-execute-tool"

failures() {  # $@: extra arguments before the suite; prints the failed test names
  (cd "$efrit/test" && timeout 120 "$emacs" -Q --batch "$@" $efrit_path -l "$suite" \
     -f ert-run-tests-batch-and-exit 2>&1) | sed -n 's/^   FAILED  \([^ ]*\)$/\1/p' | sort
}

count() { sed '/^$/d' | wc -l; }

# The failure lines are read from ERT's plain summary: a verbose one
# (EMACS_TEST_VERBOSE, which the Makefile sets) adds each condition to
# them, and they would no longer be counted.
unset EMACS_TEST_VERBOSE

status=0
for suite in $suites; do
  alone=$(failures)
  ours=$(failures -L "$here/lisp" -l efrit-todo)
  mode=$(failures -L "$here/lisp" -l efrit-todo --eval "(require 'efrit-todo-efrit)" \
                  --eval "(efrit-todo-efrit-mode 1)")
  added=$(comm -13 <(echo "$alone") <(echo "$ours") | sed '/^$/d')
  added_by_mode=$(comm -13 <(echo "$alone") <(echo "$mode") | sed '/^$/d' \
                    | grep -vxF -f <(echo "$WORDING" | tr ' ' '\n' | sed '/^$/d') || true)
  printf '%-32s Efrit alone: %2d failed   with efrit-todo: %2d   and the mode: %2d\n' "$suite" \
    "$(echo "$alone" | count)" "$(echo "$ours" | count)" "$(echo "$mode" | count)"
  if [ -n "$added$added_by_mode" ]; then
    echo "  failing only with efrit-todo:"; echo "$added $added_by_mode" | tr ' ' '\n' | sed '/^$/d;s/^/    /'
    status=1
  fi
done
exit $status
