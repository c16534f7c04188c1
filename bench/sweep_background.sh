#!/usr/bin/env bash
# A sweep that outlives one device command (600 s): start it in its own session, then wait for it
# from as many later commands as it needs, each copying what it has so far to $OUT.
#
#   bash bench/sweep_background.sh start /tmp/res <ocrserve bench sweep options...>   # returns at once
#   bash bench/sweep_background.sh wait /tmp/res 540                            # <= 540 s, then copies to $OUT
#
#   bash bench/sweep_background.sh profile /tmp/res 'bench mode pipeline' 40       # returns at once
#
# /tmp/res/rc holds the sweep's exit code once it has ended; `wait` returns as soon as it has.
# `profile`: once the sweep's log shows the pattern, py-spy samples the sweep and its children
# (render workers) for that many seconds, without pausing them, into /tmp/res/pyspy.txt (raw stacks).
set -u
verb=$1 res=$2
shift 2
case $verb in
  start)
    # The sweep runs from its own copy of the code (ocrserve/, bench/: the spec's relative paths), not from
    # here: the device tool replaces this working tree on its next call, and a process whose working
    # directory was removed fails at its first os.getcwd() (`FileNotFoundError: [Errno 2]`, no file
    # named), as the `ocrserve bench` modes did on the 2026-12-04 run.
    mkdir -p "$res"
    res=$(cd "$res" && pwd)
    rm -rf "$res/src" && mkdir -p "$res/src" && cp -r ocrserve bench "$res/src/"
    # the subshell's own output goes to /dev/null too: it waits for the sweep, and a caller reading this
    # script's output through a pipe (subprocess.run, the device tool) waited with it while it held the pipe
    (cd "$res/src" && setsid nohup bash -c 'python3 -m ocrserve bench sweep "$@" > "$0/sweep.log" 2>&1; echo $? > "$0/rc"' "$res" "$@") \
      > /dev/null 2>&1 < /dev/null &
    echo "started in the background: $res/sweep.log"
    ;;
  wait)
    limit=${1:-540}
    end=$((SECONDS + limit))
    while [ ! -f "$res/rc" ] && [ $SECONDS -lt $end ]; do sleep 5; done
    tail -5 "$res/sweep.log" 2>/dev/null
    if [ -f "$res/rc" ]; then echo "sweep ended: rc=$(cat "$res/rc")"; else echo "sweep still running"; fi
    if [ -n "${OUT:-}" ]; then
      find "$res" -maxdepth 1 -type f \( -name '*.json' -o -name '*.md' -o -name '*.log' -o -name '*.txt' -o -name rc \) -exec cp {} "$OUT/" \;
    fi
    ;;
  profile)
    pattern=$1 seconds=${2:-40}
    setsid nohup bash -c '
      for i in $(seq 1 1200); do grep -q "$1" "$0/sweep.log" 2>/dev/null && break; sleep 1; done
      pid=$(pgrep -f "ocrserve bench sweep" | head -1)
      py-spy record --pid "$pid" --subprocesses --nonblocking --rate 50 --duration "$2" --format raw \
        --output "$0/pyspy.txt" > "$0/pyspy.log" 2>&1' "$res" "$pattern" "$seconds" > /dev/null 2>&1 < /dev/null &
    echo "py-spy waits for '$pattern' in $res/sweep.log"
    ;;
  *) echo "usage: $0 start|wait|profile RESULTS_DIR ..." >&2; exit 2 ;;
esac
