#!/usr/bin/env bash
# Installs, builds and runs every test of gpunode, and ends with one line "N passed, N failed"
# (", N skipped" after it when tests were skipped) that sums every check: each build, each unit
# test and each system test (pytest) of the plain build and again of the ASan+UBSan build, the
# format check, and each fuzz smoke run. Exits non-zero if anything failed.
#
# The plain build's unit and system tests run as on a machine that has just booted and never had
# gpunode installed (scripts/just-booted.sh: the monotonic clock near zero, installed copies
# hidden); the sanitized build's run on the machine's own clock.
#
# A skipped test is listed with its reason and counted apart from the passes. In CI (CI set, as
# .ci/run is run) GPUNODE_TEST_NO_SKIP=1 makes every skip a failure: that machine has every tool,
# privilege and kernel feature a test may ask for, so a reason to skip that holds there is a bug.
#
# Environment:
#   GPUNODE_BUILD_PREFIX  build dir name prefix (default "build": build/, build-asan/, build-fuzz/)
#   FUZZ_SECONDS          seconds per fuzz target (default 20)
#   SKIP_INSTALL=1        do not run scripts/install-deps.sh
#   PYTEST_ARGS           extra arguments for pytest (e.g. "-k coolctl")
#   STAGES                what to run (default: "install build unit system format asan fuzz
#                         release"; release only builds an optimised tree, whose -O3 warnings
#                         an -O0 build never shows);
#                         "build" and "asan" select the build dirs that "unit" and "system" test,
#                         e.g. STAGES="asan system" runs only the sanitized system tests
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
PREFIX=${GPUNODE_BUILD_PREFIX:-build}
FUZZ_SECONDS=${FUZZ_SECONDS:-20}
PYTHON=/usr/bin/python3
RESULTS="$PYTHON $ROOT/scripts/test-results.py"
START=$(date +%s)
STAGES=" ${STAGES:-install build unit system format asan fuzz release} "

want() { [[ $STAGES == *" $1 "* ]]; }

passed=0
failed=0
failures=()
skips=()

if [ -n "${CI:-}" ]; then
    export GPUNODE_TEST_NO_SKIP=${GPUNODE_TEST_NO_SKIP:-1}
fi

note() { printf '\n=== %s (%ss)\n' "$*" "$(($(date +%s) - START))"; }
pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); failures+=("$1"); printf 'FAIL: %s\n' "$1"; }

# check NAME CMD... : one counted check; the command's output goes to a log shown on failure.
check() {
    local name=$1 log
    shift
    log=$(mktemp)
    if "$@" >"$log" 2>&1 </dev/null; then
        pass
    else
        tail -n 60 "$log"
        fail "$name"
    fi
    rm -f "$log"
}

# count KIND FILE LABEL: adds a runner's results (see scripts/test-results.py) to the totals.
count() {
    local kind=$1 file=$2 label=$3 out last p f s
    out=$($RESULTS "$kind" "$file")
    last=$(tail -n 1 <<<"$out")
    if ! [[ $last =~ ^[0-9]+\ [0-9]+\ [0-9]+$ ]]; then
        fail "$label: cannot read $file"
        return
    fi
    read -r p f s <<<"$last"
    passed=$((passed + p))
    failed=$((failed + f))
    while IFS= read -r line; do
        [ -n "$line" ] && failures+=("$label ${line#FAIL }")
    done < <(grep '^FAIL ' <<<"$out")
    while IFS= read -r line; do
        [ -n "$line" ] || continue
        skips+=("$label ${line#SKIP }")
        # In CI a skip is a failure (GPUNODE_TEST_NO_SKIP): the runners' own hooks already turn
        # test_skip() and pytest.skip() into failures; this catches any other way to skip.
        if [ -n "${GPUNODE_TEST_NO_SKIP:-}" ] && [ "$GPUNODE_TEST_NO_SKIP" != 0 ]; then
            failed=$((failed + 1))
            failures+=("$label skipped in CI: ${line#SKIP }")
        fi
    done < <(grep '^SKIP ' <<<"$out")
    printf '%s: %s passed, %s failed, %s skipped\n' "$label" "$p" "$f" "$s"
}

# The plain build's tests run through scripts/just-booted.sh when it works here (it needs root
# and time namespaces); in CI it must.
JUST_BOOTED=()
just_booted_setup() {
    # The probe also checks that the clock did move: an uptime under a minute inside.
    if "$ROOT/scripts/just-booted.sh" "$PREFIX" sh -c '[ "$(cut -d. -f1 /proc/uptime)" -lt 60 ]'
    then
        JUST_BOOTED=("$ROOT/scripts/just-booted.sh" "$ROOT/$PREFIX")
        echo "the plain build's tests run as on a machine that has just booted (just-booted.sh)"
    elif [ -n "${CI:-}" ]; then
        fail "just-booted.sh: cannot run tests as on a just-booted machine here"
    else
        echo "note: just-booted.sh does not work here (needs root); plain tests on this clock"
    fi
}

# build_dir DIR [meson options...]: sets up a build dir (or re-applies the options to an existing
# one) and builds it. The compiler comes from $CC as usual.
build_dir() {
    local dir=$1
    shift
    if [ -f "$dir/build.ninja" ]; then
        meson configure "$dir" "$@" || return
    else
        meson setup "$dir" "$@" || return
    fi
    ninja -C "$dir"
}

# unit_tests DIR LABEL [WRAPPER...]: meson's tests of DIR (the unit suite, and the system suite:
# C tests of a whole program, such as coolsim on a real pty), run through WRAPPER if given.
# Through a wrapper the build dir is seen at another path, where ninja would not know its own
# targets: the build stage has built them already.
unit_tests() {
    local dir=$1 label=$2 rc no_rebuild=()
    shift 2
    [ $# -eq 0 ] || no_rebuild=(--no-rebuild)
    rm -f "$dir/meson-logs/testlog.json"
    "$@" meson test -C "$dir" --suite unit --suite system --print-errorlogs --num-processes 2 \
        "${no_rebuild[@]}" >"$dir/unit-tests.log" 2>&1
    rc=$?
    if [ ! -f "$dir/meson-logs/testlog.json" ] &&
        grep -Eq 'No (suitable )?tests defined|No suitable tests' "$dir/unit-tests.log"; then
        # meson leaves the unit tests out when cmocka is missing: that is a broken setup.
        fail "$label: no unit tests defined (is libcmocka-dev installed?)"
        return
    fi
    [ $rc -eq 0 ] || tail -n 80 "$dir/unit-tests.log"
    count meson "$dir/meson-logs/testlog.json" "$label"
}

# system_tests_start DIR: runs pytest against DIR's binaries in the background, output to
# DIR/system-tests.log; system_tests_collect DIR LABEL waits for it and counts the results. The
# tests are independent (own temp dirs, ports, dockerd, users), and mostly wait on real time, so
# the plain and sanitized runs go side by side.
declare -A system_pid=()
# Every component's pytest folder, run in one session (module names must differ between them).
SYSTEM_TEST_DIRS=$(ls -d coolant/tests/system gpumon/tests/system capsule/tests/system gpuq/tests/system 2>/dev/null | tr '\n' ' ')
# An interrupted run takes its background test runs with it (timeout(1) passes the signal on).
trap 'for p in "${system_pid[@]}"; do kill -TERM "$p" 2>/dev/null; done; exit 130' INT TERM
# system_tests_start DIR [WRAPPER...]
system_tests_start() {
    local dir=$1
    shift
    rm -f "$dir/system-tests.xml"
    # shellcheck disable=SC2086 # PYTEST_ARGS is a list of words on purpose
    GPUNODE_BUILD="$ROOT/$dir" "$@" timeout 1200 "$PYTHON" -m pytest $SYSTEM_TEST_DIRS \
        -q --junitxml="$dir/system-tests.xml" -o junit_family=xunit1 ${PYTEST_ARGS:-} \
        >"$dir/system-tests.log" 2>&1 </dev/null &
    system_pid[$dir]=$!
}

system_tests_collect() {
    local dir=$1 label=$2 rc before=$failed
    wait "${system_pid[$dir]}"
    rc=$?
    note "system tests ($dir/)"
    tail -n 80 "$dir/system-tests.log"
    count junit "$dir/system-tests.xml" "$label"
    # pytest failing without a failed test (nothing collected, an internal error, the timeout)
    # must still fail the run.
    if [ $rc -ne 0 ] && [ "$failed" -eq "$before" ]; then
        fail "$label: pytest exit status $rc"
    fi
}

# cmocka's skip() would pass unnoticed in CI: unit tests skip through test_skip()
# (tests/unit/test-skip.h), which CI turns into a failure naming the reason.
bare_skip_check() {
    local hits
    hits=$(git grep -nE '(^|[^_[:alnum:]])skip\(\)' -- '*.c' || true)
    if [ -n "$hits" ]; then
        printf '%s\n' "$hits"
        fail "bare cmocka skip() (use test_skip(\"why\") of tests/unit/test-skip.h)"
    else
        pass
    fi
}

format_check() {
    local out bad
    # One clang-format for all files (it starts slowly); the files it would change are the ones
    # named in its diagnostics.
    if out=$(git ls-files -z --cached --others --exclude-standard -- '*.c' '*.h' |
        xargs -0 -r clang-format --dry-run --Werror 2>&1); then
        pass
        return
    fi
    bad=$(grep -oE '^[^ :]+\.[ch]:[0-9]+:[0-9]+: (error|warning)' <<<"$out" | cut -d: -f1 | sort -u)
    if [ -n "$bad" ]; then
        printf 'not formatted (run clang-format -i):\n%s\n' "$bad"
        fail "clang-format: $(tr '\n' ' ' <<<"$bad")"
    else
        printf '%s\n' "$out" | tail -n 20
        fail "clang-format did not run"
    fi
}

# The fuzz targets are the executables named fuzz-* (or defined in a fuzz/ folder); prints each
# one's path and its source folder.
fuzz_targets() {
    meson introspect "$1" --targets | "$PYTHON" -c '
import json, os, sys
for t in json.load(sys.stdin):
    if t["type"] == "executable" and (t["name"].startswith("fuzz-") or "/fuzz/" in t["defined_in"]):
        print(t["filename"][0], os.path.dirname(t["defined_in"]))'
}

fuzz_smoke() {
    local dir=$1 targets exe src name corpus seeds dict s d
    targets=$(fuzz_targets "$dir") || { fail "fuzz: cannot list targets"; return; }
    [ -n "$targets" ] || { echo "no fuzz targets defined"; return; }
    mkdir -p "$dir/fuzz-artifacts"
    while read -r exe src; do
        name=$(basename "$exe")
        # New inputs go to a temp dir so the source tree stays clean; seeds, when a target has
        # them, are read from <its folder>/corpus/<name>/
        corpus=$(mktemp -d)
        # Targets that drop root (fuzz-unpack runs as nobody, so that a bug cannot write to the
        # real /etc) must still be able to add inputs and write crash artifacts.
        chmod 1777 "$corpus" "$dir/fuzz-artifacts"
        # ... or from the fuzz/ folder beside it, where a component keeps its targets' seeds;
        # a dictionary <name>.dict there is handed over too.
        seeds=
        for s in "$src/corpus/$name" "$src/fuzz/corpus/$name"; do
            [ -d "$s" ] && seeds=$s && break
        done
        dict=
        for d in "$src/$name.dict" "$src/fuzz/$name.dict"; do
            [ -f "$d" ] && dict=$d && break
        done
        # The seeds are copied in: a target that drops root cannot read a checkout that only
        # root may enter (CI's clone).
        if [ -n "$seeds" ]; then
            cp -r "$seeds"/. "$corpus"/ && chmod -R a+rwX "$corpus"
        fi
        if [ -n "$dict" ]; then
            cp "$dict" "$corpus.dict" && chmod a+r "$corpus.dict" && dict=$corpus.dict
        fi
        check "fuzz $name" timeout $((FUZZ_SECONDS + 120)) nice -n 10 "$exe" \
            -max_total_time="$FUZZ_SECONDS" \
            -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$dir/fuzz-artifacts/$name-" \
            ${dict:+-dict="$dict"} "$corpus"
        echo "fuzz $name: ${FUZZ_SECONDS}s"
        rm -rf "$corpus" "$corpus.dict"
    done <<<"$targets"
}

# ---- 1. dependencies ----
if want install && [ -z "${SKIP_INSTALL:-}" ]; then
    note "install dependencies"
    check "install-deps" scripts/install-deps.sh
fi

# Sanitizer reports must fail the run, not scroll by.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

# ---- 2. builds: plain, ASan+UBSan, fuzz (clang, libFuzzer, ASan+UBSan) ----
ASAN_DIR=$PREFIX-asan
FUZZ_DIR=$PREFIX-fuzz
if want build; then
    note "build $PREFIX/"
    check "build $PREFIX/" build_dir "$PREFIX" -Dtests=enabled
fi
if want asan; then
    note "build $ASAN_DIR/ (ASan+UBSan)"
    check "build $ASAN_DIR/" build_dir "$ASAN_DIR" -Db_sanitize=address,undefined -Db_lundef=false \
        -Dtests=enabled
fi
if want fuzz; then
    note "build $FUZZ_DIR/ (clang, libFuzzer, ASan+UBSan)"
    # The compiler of a build dir cannot change: start over if it was not set up with clang.
    if [ -f "$FUZZ_DIR/build.ninja" ] &&
        ! grep -A1 '^rule c_COMPILER' "$FUZZ_DIR/build.ninja" |
        grep -q 'command = \(ccache \)\?clang '; then
        rm -rf "$FUZZ_DIR"
    fi
    CC=clang check "build $FUZZ_DIR/" build_dir "$FUZZ_DIR" -Dfuzz=true \
        -Db_sanitize=address,undefined -Db_lundef=false
fi
if want release; then
    note "build $PREFIX-release/ (optimised)"
    check "build $PREFIX-release/" build_dir "$PREFIX-release" -Dbuildtype=release -Dtests=enabled
fi
have_plain=no have_asan=no have_release=no
want build && [ -f "$PREFIX/build.ninja" ] && have_plain=yes
want asan && [ -f "$ASAN_DIR/build.ninja" ] && have_asan=yes
want release && [ -f "$PREFIX-release/build.ninja" ] && have_release=yes

if [ $have_plain = yes ] && { want unit || want system; }; then
    just_booted_setup
fi

# ---- 3. unit tests ----
if want unit; then
    if [ $have_plain = yes ]; then
        note "unit tests ($PREFIX/)"
        unit_tests "$PREFIX" "unit" "${JUST_BOOTED[@]}"
    fi
    if [ $have_asan = yes ]; then
        note "unit tests ($ASAN_DIR/)"
        unit_tests "$ASAN_DIR" "unit-asan"
    fi
    # The optimised build is what quickstart installs and the benchmarks measure: its code
    # (-O3, asserts off) must pass the same tests.
    if [ $have_release = yes ]; then
        note "unit tests ($PREFIX-release/)"
        unit_tests "$PREFIX-release" "unit-release"
    fi
fi

# ---- 4. format ----
if want format; then
    note "clang-format check"
    format_check
    bare_skip_check
fi

# ---- 5. system tests (background) and fuzz smoke runs, side by side ----
if want system; then
    [ $have_plain = yes ] && system_tests_start "$PREFIX" "${JUST_BOOTED[@]}"
    # slurmd cannot load a plugin built with sanitizers: that run loads the plain build's
    # (tests/pylib/slurmtest.py), with the sanitized capsule behind it.
    [ $have_asan = yes ] && system_tests_start "$ASAN_DIR" \
        env GPUNODE_SPANK_PLUGIN="$ROOT/$PREFIX/capsule/spank_capsule.so"
    note "system tests started in the background (logs: */system-tests.log)"
fi
if want fuzz && [ -f "$FUZZ_DIR/build.ninja" ]; then
    note "fuzz smoke runs (${FUZZ_SECONDS}s each)"
    fuzz_smoke "$FUZZ_DIR"
fi
if want system; then
    [ $have_plain = yes ] && system_tests_collect "$PREFIX" "system"
    [ $have_asan = yes ] && system_tests_collect "$ASAN_DIR" "system-asan"
fi

note "done"
if [ ${#skips[@]} -gt 0 ]; then
    printf 'skipped:\n'
    printf '  %s\n' "${skips[@]}"
fi
if [ ${#failures[@]} -gt 0 ]; then
    printf 'failed:\n'
    printf '  %s\n' "${failures[@]}"
fi
if [ ${#skips[@]} -gt 0 ]; then
    printf '%d passed, %d failed, %d skipped\n' "$passed" "$failed" "${#skips[@]}"
else
    printf '%d passed, %d failed\n' "$passed" "$failed"
fi
[ "$failed" -eq 0 ]
