# Bandpass's verifier wrapper (engine/run/observer.py), sourced by the verifier's own shell:
#
#     . /run/bandpass-<nonce>/verify /bin/bash /tests/test.sh
#
# It runs the task's test script as a child and, the moment it exits, stops every other process in the
# container with one kill(-1, SIGSTOP) (the kernel delivers it to each process at once, a fork loop
# included; only init and this shell are spared), lets the container's lifeline watchdog go on at once
# (it must still end the container if Bandpass dies), and reports on the terminal what the host needs
# before it reads the reward: test.sh's exit status, the processes still alive, and whether any of them
# wrote a reward file after test.sh exited. After test.sh only builtins run: nothing the code under test
# left can be replaced, shadowed, or fail to fork.
#
# Processes still alive when test.sh exited get a short window (all processes resumed, then stopped
# again): a reward file written or removed in it was written by one of them, after the verifier's own
# script was done, so the reward read at its exit may be theirs too.

__bp_cmd=("$@")
__bp_dir=${BASH_SOURCE[0]%/*}
__bp_nonce=${__bp_dir##*-}
__bp_window=0.3

# every live process but this shell: "pid ppid starttime" (fields 4 and 22 of /proc/<pid>/stat)
__bp_scan() {
  __bp_procs=()
  local d p st f
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = "$$" ] && continue
    read -r st < "$d/stat" 2>/dev/null || continue
    f=(${st##*) })
    [ "${f[0]}" = Z ] && continue
    __bp_procs+=("$p ${f[1]} ${f[19]}")
  done
}

# before the tests: the container's main process (the lifeline watchdog: the oldest child of init) and its
# descendants (its timers) are the harness's; every other process alive now is "old"
__bp_scan
__bp_main=
for __bp_e in "${__bp_procs[@]}"; do
  set -- $__bp_e
  if [ "$2" = 1 ] && { [ -z "$__bp_main" ] || [ "$1" -lt "$__bp_main" ]; }; then __bp_main=$1; fi
done
__bp_life=" $__bp_main "
__bp_grew=1
while [ -n "$__bp_main" ] && [ $__bp_grew = 1 ]; do
  __bp_grew=0
  for __bp_e in "${__bp_procs[@]}"; do
    set -- $__bp_e
    case "$__bp_life" in *" $1 "*) continue ;; esac
    case "$__bp_life" in *" $2 "*) __bp_life="$__bp_life$1 "; __bp_grew=1 ;; esac
  done
done
__bp_old=" "
for __bp_e in "${__bp_procs[@]}"; do
  set -- $__bp_e
  __bp_old="$__bp_old$1:$3 "
done
set --

# what is alive now besides init, this shell and the lifeline: __bp_alive (report entries), __bp_new (pids)
__bp_list() {
  __bp_alive=()
  __bp_new=()
  local e pid start age comm cmd args
  __bp_scan
  for e in "${__bp_procs[@]}"; do
    set -- $e
    pid=$1 start=$3
    [ "$pid" = 1 ] && continue
    case "$__bp_life" in *" $pid "*) continue ;; esac
    age=old
    case "$__bp_old" in *" $pid:$start "*) ;; *) age=new; __bp_new+=("$pid") ;; esac
    cmd=
    if mapfile -d '' -t args < "/proc/$pid/cmdline" 2>/dev/null; then cmd="${args[*]}"; fi
    [ -n "$cmd" ] || { read -r comm < "/proc/$pid/comm" 2>/dev/null; cmd="[$comm]"; }
    cmd=${cmd//[^A-Za-z0-9 ._\/=+@%\[\]-]/?}
    __bp_alive+=("$pid/$age/${cmd:0:160}")
    [ ${#__bp_alive[@]} -ge 40 ] && break
  done
}

__bp_stop() {
  kill -STOP -1 2>/dev/null
  # shellcheck disable=SC2086 - a list of pids
  [ -n "${__bp_life// /}" ] && kill -CONT $__bp_life 2>/dev/null
}

# the processes that started during the tests go, the others (a service kept in place) go on: for a
# verifier run again on the same container
__bp_resume() {
  __bp_list
  [ ${#__bp_new[@]} -gt 0 ] && kill -KILL "${__bp_new[@]}" 2>/dev/null
  kill -CONT -1 2>/dev/null
  return 0
}

"${__bp_cmd[@]}"
__bp_rc=$?
__bp_stop
# test.sh stopped by a signal (SIGSTOP from the code under test) returns here without having exited
jobs -ps > "$__bp_dir/stopped" 2>/dev/null
__bp_stopped=0
read -r __bp_x < "$__bp_dir/stopped" 2>/dev/null && __bp_stopped=1
__bp_list
__bp_late=
__bp_waited=0
if [ ${#__bp_alive[@]} -gt 0 ]; then
  __bp_had=" "
  for __bp_n in reward.txt reward.json; do
    [ -e "/logs/verifier/$__bp_n" ] && __bp_had="$__bp_had$__bp_n "
  done
  : > "$__bp_dir/stamp"
  read -r -s -t 0.02 -N 1 __bp_x  # one clock tick: a write from now on gets a later time than the stamp
  kill -CONT -1 2>/dev/null
  read -r -s -t "$__bp_window" -N 1 __bp_x
  __bp_stop
  __bp_waited=1
  for __bp_n in reward.txt reward.json; do
    __bp_f=/logs/verifier/$__bp_n
    if [ -e "$__bp_f" ]; then
      if [ "$__bp_f" -nt "$__bp_dir/stamp" ]; then
        __bp_late="$__bp_late$__bp_n:written "
      elif [[ "$__bp_had" != *" $__bp_n "* ]]; then
        __bp_late="$__bp_late$__bp_n:created "
      fi
    elif [[ "$__bp_had" == *" $__bp_n "* ]]; then
      __bp_late="$__bp_late$__bp_n:removed "
    fi
  done
fi
__bp_IFS=$IFS
IFS=,
printf '\033]7717;%s;X;%s;rc=%s|stopped=%s|waited=%s|late=%s|alive=%s\007' \
  "$__bp_nonce" "$$" "$__bp_rc" "$__bp_stopped" "$__bp_waited" "$__bp_late" "${__bp_alive[*]}"
IFS=$__bp_IFS
return $__bp_rc
