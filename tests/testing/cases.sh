# Shared by the shell tests made of named cases: counting and reporting them.
#
# Usage, from a test run at its runfiles root:
#   source tests/testing/cases.sh
#   case_name=first; output="$TMP/first.out"
#   some_command >"$output" 2>&1 || fail "exit status $?"   # prints the output indented
#   ok                                                      # (only if nothing failed)
#   json_check "$out/summary.json" 's["iterations"] == 12' || fail "summary.json"
#   finish_cases                                            # "N passed, N failed"; exit 1 if any failed

passed=0
failed=0

# fail MESSAGE...: case $case_name failed; shows $output (if set and a file) indented.
fail() {
  echo "FAIL [$case_name]: $*"
  [[ -f "${output:-/dev/null}" ]] && sed 's/^/    | /' "$output"
  failed=$((failed + 1))
}

# ok: case $case_name passed.
ok() {
  echo "ok   [$case_name]"
  passed=$((passed + 1))
}

# json_check FILE PYTHON_EXPRESSION_ON_s [ARG]: true when the expression holds for the JSON
# value s read from FILE (ARG is sys.argv[3] for the expression).
json_check() {
  /usr/bin/python3 -c "import json, sys; s = json.load(open(sys.argv[1])); assert $2, sys.argv[2]" \
    "$1" "$2" "${3:-}"
}

# finish_cases: prints the counts and exits 0 when no case failed, else 1.
finish_cases() {
  echo "$passed passed, $failed failed"
  [[ $failed -eq 0 ]]
  exit
}
