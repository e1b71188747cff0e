#!/usr/bin/env bash
# Run every ERT file of Efrit's test suite twice: with Efrit alone, then
# with efrit-todo's lisp/ first in load-path (so its efrit-todo.el stands
# in for Efrit's).  Fail if efrit-todo adds a failure.  Some of these
# files fail on their own at the Efrit commit we test against; those
# failures are reported, not counted.  Each run is bounded to 120 s.
set -uo pipefail
efrit=${1:?usage: efrit-suites.sh EFRIT_DIR}
emacs=${EMACS:-emacs}
here=$(cd "$(dirname "$0")/.." && pwd)
suites=$(cd "$efrit/test" && ls test-*.el *-test.el 2>/dev/null)
efrit_path="-L $efrit/lisp -L $efrit/lisp/core -L $efrit/lisp/interfaces -L $efrit/lisp/tools -L $efrit/lisp/support"

failures() {  # $@: extra arguments before the suite; prints the failed test names
  (cd "$efrit/test" && timeout 120 "$emacs" -Q --batch "$@" $efrit_path -l "$suite" \
     -f ert-run-tests-batch-and-exit 2>&1) | sed -n 's/^   FAILED  \([^ ]*\)$/\1/p' | sort
}

status=0
for suite in $suites; do
  [ -f "$efrit/test/$suite" ] || { echo "$suite: not in this checkout, skipped"; continue; }
  alone=$(failures)
  ours=$(failures -L "$here/lisp" -l efrit-todo)
  added=$(comm -13 <(echo "$alone") <(echo "$ours") | sed '/^$/d')
  printf '%-28s Efrit alone: %2d failed   with efrit-todo: %2d failed\n' "$suite" \
    "$(echo "$alone" | sed '/^$/d' | wc -l)" "$(echo "$ours" | sed '/^$/d' | wc -l)"
  if [ -n "$added" ]; then
    echo "  failing only with efrit-todo:"; echo "$added" | sed 's/^/    /'
    status=1
  fi
done
exit $status
