#!/usr/bin/env bash
# One lane of `make test`, which runs two at once (make -j2 test-agents
# test-embedded): runs COMMAND with every line of its output (stdout and
# stderr) prefixed "[NAME] ", so that the lanes' lines stay apart when they
# interleave, and exits with COMMAND's status. `grep '^\[NAME\] '` gives one
# lane's output back; .ci/run's summary reads each lane that way.
#
#   tools/lane.sh NAME COMMAND [ARG...]
set -uo pipefail
name=${1:?usage: tools/lane.sh NAME COMMAND [ARG...]}
shift
cmd="$*"
echo "[$name] + $cmd"
start=$SECONDS
"$@" 2>&1 | awk -v p="[$name] " '{ print p $0; fflush() }'
rc=${PIPESTATUS[0]}
echo "[$name] exit $rc after $((SECONDS - start)) s: ${cmd:0:100}"
exit "$rc"
