#!/bin/sh
# A stand-in for cargo in the module build tests: it prints what cargo
# prints while building (a "Compiling" line, the progress bar ended by a
# carriage return, JSON messages), then "builds" by copying a module that
# exists already.  Environment:
#   FAKE_CARGO_PIDFILE  write this process's id there
#   FAKE_CARGO_GATE     wait (at most 60 s) until this file exists before finishing
#   FAKE_CARGO_EXIT     fail with this exit code instead
#   FAKE_CARGO_MODULE   the file to deliver as the built library
#   FAKE_CARGO_ARTIFACT deliver it here and name it in a JSON message, as
#                       cargo does, instead of in $CARGO_TARGET_DIR/release
set -eu
[ -n "${FAKE_CARGO_PIDFILE:-}" ] && echo $$ > "$FAKE_CARGO_PIDFILE"
echo "args: $* progress: ${CARGO_TERM_PROGRESS_WHEN:-unset}" >&2
echo "   Compiling dependency v1.0.0"
printf '    Building [=======>            ] 1/3: dependency                \r'
printf '{"reason":"compiler-artifact","target":{"kind":["lib"],"name":"dependency"},"filenames":["/nowhere/libdependency.rlib"],"fresh":false}\n'
echo "   Compiling efrit-todo v0.1.0 ($PWD)"
printf '    Building [===============>    ] 2/3: efrit-todo                \r'
if [ -n "${FAKE_CARGO_GATE:-}" ]; then
    tries=600
    while [ ! -e "$FAKE_CARGO_GATE" ] && [ "$tries" -gt 0 ]; do
        sleep 0.1
        tries=$((tries - 1))
    done
fi
if [ -n "${FAKE_CARGO_EXIT:-}" ]; then
    echo "error[E0425]: cannot find value \`deliberate\` in this scope"
    echo "  --> src/lib.rs:3:5"
    echo "error: could not compile \`efrit-todo\` (lib) due to 1 previous error"
    exit "$FAKE_CARGO_EXIT"
fi
if [ -n "${FAKE_CARGO_ARTIFACT:-}" ]; then
    built=$FAKE_CARGO_ARTIFACT
else
    built=${CARGO_TARGET_DIR:-target}/release/libefrit_todo.so
fi
mkdir -p "$(dirname "$built")"
cp "$FAKE_CARGO_MODULE" "$built"
if [ -n "${FAKE_CARGO_ARTIFACT:-}" ]; then
    printf '{"reason":"compiler-artifact","target":{"kind":["cdylib","rlib"],"crate_types":["cdylib","rlib"],"name":"efrit_todo"},"filenames":["%s","%s.rlib"],"fresh":false}\n' "$built" "$built"
fi
echo "    Finished \`release\` profile [optimized] target(s) in 0.42s"
printf '{"reason":"build-finished","success":true}\n'
