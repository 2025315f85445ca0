# shellcheck shell=bash
# hack/lib/procs.sh: background processes that end with the script that started them.
#
#   . hack/lib/procs.sh
#   procs_start PROGRAM ARGS... > LOG 2>&1   # in the background, in a process group of its own
#   procs_at_cleanup COMMAND ARGS...         # run after the groups are stopped
#
# procs_start runs the program under setsid: a new session, so its children are in its process
# group too, and a Ctrl-C at the terminal reaches only the script, which then stops them all.
# Sourcing this file traps EXIT, INT, TERM and HUP. procs_cleanup sends TERM to every recorded
# group, waits up to PROCS_GRACE seconds (default 5) and sends KILL to what is left, then runs the
# cleanup commands in order. It runs once, however often it is called. On INT, TERM or HUP the
# script exits with 128+signal after it; a second signal during the cleanup skips the grace.

PROCS_GROUPS=()  # process group ids (the pid of each program procs_start started)
PROCS_HOOKS=()   # commands for after the groups are stopped, each quoted for eval
PROCS_CLEANING=  # set once procs_cleanup has begun
: "${PROCS_GRACE:=5}"

# procs_start PROGRAM ARGS...: start PROGRAM (a program, not a shell function) in the background
# as the leader of a new session and process group, and record the group.
procs_start() {
  local jobcontrol=
  # With job control the job would lead a group already, and setsid would fork: $! would not be the group.
  case $- in *m*) jobcontrol=1; set +m ;; esac
  setsid "$@" &
  PROCS_GROUPS+=("$!")
  if [ -n "$jobcontrol" ]; then set -m; fi
}

# procs_at_cleanup COMMAND ARGS...: run COMMAND once the groups are stopped (errors ignored).
procs_at_cleanup() {
  PROCS_HOOKS+=("$(printf '%q ' "$@")")
}

# procs__running: whether a recorded group (or its leader, before its setsid) has a process left
# that is not a zombie. Zombies count as gone: the kill reached them, only their reaping is
# pending, and a container's init may reap late.
procs__running() {
  local g
  if command -v ps >/dev/null 2>&1; then
    # An explicit status: a bare return in a trap handler returns the status from before the trap.
    if ps -e -o pid= -o pgid= -o stat= | awk -v ids=" ${PROCS_GROUPS[*]} " '
      $3 !~ /^Z/ && (index(ids, " " $1 " ") || index(ids, " " $2 " ")) { found = 1 }
      END { exit !found }'; then
      return 0
    fi
    return 1
  fi
  for g in "${PROCS_GROUPS[@]}"; do
    if kill -0 -- "-$g" 2>/dev/null || kill -0 "$g" 2>/dev/null; then return 0; fi
  done
  return 1
}

# procs__signal SIGNAL: send SIGNAL to every recorded group, and to its leader by pid in case the
# cleanup came between the fork and the setsid. The pid only while it is this shell's child: a
# leader reaped long ago may have left its pid to another process.
procs__signal() {
  local g ppid
  for g in "${PROCS_GROUPS[@]}"; do
    kill "-$1" -- "-$g" 2>/dev/null || true
    ppid=$(ps -o ppid= -p "$g" 2>/dev/null)
    if [ "${ppid// /}" = "$$" ]; then kill "-$1" "$g" 2>/dev/null || true; fi
  done
}

# procs_cleanup: stop every recorded group (TERM, up to PROCS_GRACE seconds, KILL), then run the
# cleanup commands. Only the first call does anything.
procs_cleanup() {
  local - h i
  set +e
  if [ -n "$PROCS_CLEANING" ]; then return 0; fi
  PROCS_CLEANING=1
  procs__signal TERM
  for ((i = 0; i < PROCS_GRACE * 10; i++)); do
    procs__running || break
    sleep 0.1
  done
  if procs__running; then procs__signal KILL; fi
  for h in "${PROCS_HOOKS[@]}"; do
    eval "$h" || true
  done
  return 0
}

# procs__on_signal N: the trap of signal N: clean up, then exit 128+N. During a cleanup already
# under way it only kills the groups without grace and lets that cleanup go on.
procs__on_signal() {
  if [ -n "$PROCS_CLEANING" ]; then
    procs__signal KILL
    return 0
  fi
  procs_cleanup
  exit $((128 + $1))
}

trap procs_cleanup EXIT
trap 'procs__on_signal 1' HUP
trap 'procs__on_signal 2' INT
trap 'procs__on_signal 15' TERM
