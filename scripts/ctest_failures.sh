#!/usr/bin/env bash
# After a failed ctest run: what each failed test printed where it failed
# (gtest's failure lines and a few lines after each), read from ctest's
# LastTest.log, so the end of a long log says why and not only which.
# Usage: scripts/ctest_failures.sh <build dir>
set -uo pipefail
log="${1:-build}/Testing/Temporary/LastTest.log"
[[ -r "$log" ]] || exit 0
awk '
  / Testing: / { name = $3; n = 0; delete buf; next }
  /^Test Failed\./ {
    print "---- " name " ----"
    for (i = 1; i <= n && i <= 60; i++) print buf[i]
    if (n > 60) print "  (" n - 60 " more lines in the log)"
    next
  }
  /Failure|FAILED|Expected|Which is|Value of|Actual|error:|Error:|Timeout|Exception/ { keep = 5 }
  keep > 0 { buf[++n] = "  " $0; keep-- }
' "$log"
