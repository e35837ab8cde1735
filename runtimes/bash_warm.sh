# toolexec: a warm Bash tool's server. Invoked as: bash bash_warm.sh TOOL_PATH [FUNCTION], with
# TOOLEXEC_ZYGOTE_FD naming a pipe on which it says R once the tool is sourced (argc's trailer included: `argc` is a
# no-op here, as in bash_bootstrap.sh, so main does not run).
#
# A server (sandbox off): each line on stdin names a slot of the server's private directory (TOOLEXEC_WARM_SLOTS;
# see runtimes/warm_bash.py), after one character: `p` when the call listens for progress, else `-`: the slot's first
# call. A slot holds the call's request (`in`, the bootstrap's binding records), its script (`call`:
# runtimes/_bash_call.py) and the FIFOs `out`, `err`, `st` and `progress`, whose read ends toolexec holds, and `go`,
# whose write end it holds, and `wake`. The slot's waiter (a job of its own, forked for its first call and kept) forks
# each call's waiter and process ahead of the call (the process a job of its own: its own process group), which takes
# those as its descriptors, writes P<pid> on `st`, restores the tool's shell options and traps and runs
# bash_bootstrap.sh's binding and main; the call's waiter reads the call's mode (one line) on `go`, and writes
# X<status> once the call's process has ended (see below).
# The ready word is R, then each file the sourcing read, NUL-separated (see below).
#
# A spare (TOOLEXEC_WARM_SPARE=1, under the sandbox's baseline: see runtimes/_bash_zygote.py): process 2 of a PID
# namespace of its own, it runs one call in place once the namespace's init says `g` on stdin; the init holds the
# call's channels, as /proc/1/fd/10 (the request), 11 (stdout), 12 (stderr), 13 (the call's script) and 14 (progress,
# when the call listens for it: the call's LLM_PROGRESS names descriptor 3). Once it has opened them it says so on
# TOOLEXEC_WARM_HELD (a byte) and waits for the init's `s`: the init is out of the tool's reach by then (undumpable).
# TOOLEXEC_WARM_HELD empty: the bash holds CAP_SYS_PTRACE (root's), which no undumpable init keeps out: no round trip.
__toolexec_ready=$TOOLEXEC_ZYGOTE_FD
__toolexec_spare=${TOOLEXEC_WARM_SPARE-}
__toolexec_slots=${TOOLEXEC_WARM_SLOTS-}
__toolexec_held=${TOOLEXEC_WARM_HELD-}
__toolexec_quiet=${TOOLEXEC_WARM_QUIET-}
unset TOOLEXEC_ZYGOTE_FD TOOLEXEC_WARM_SPARE TOOLEXEC_WARM_SERVER TOOLEXEC_WARM_SLOTS TOOLEXEC_WARM_HELD TOOLEXEC_WARM_QUIET
BASH_ARGV0=$1
__toolexec_function=${2-}
# (mapfile, not $(<…): no fork; nor read -d '', which takes the text a character at a time: five times longer)
mapfile -d '' -t __toolexec_boot <"${BASH_SOURCE[0]%/*}/bash_bootstrap.sh"
__toolexec_boot=${__toolexec_boot[0]-}
[[ -n $__toolexec_boot ]] || exit 70
shift $#
argc() { :; }
__toolexec_warm=1
# The files the sourcing reads (what the tool sources, and where the functions it defines come from), for
# toolexec to look at before each call (runtimes/loaded.py): each file that runs a command (a DEBUG trap of
# toolexec's) and each file that defines a function (declare -F under extdebug, once the sourcing is over). A spare
# that says nothing but R (TOOLEXEC_WARM_QUIET: every spare but a server's first, whose word is the server's) sources
# the tool as a cold call's bash does, and forks no subshell to list them (five fewer per call under the baseline).
#
# The listing bash sources the tool with its shell as a cold call's: no extdebug (under which a DEBUG trap of the
# tool's that fails skips the next command, toolexec's after the sourcing too, and which turns -T and -E on, and off
# again with it), no -E. The trap is inherited by a sourced file or a function only under -T (functrace), so it turns
# -T on before a command that sources a file or calls a function, and off before any other; the tool's own -T (a
# `set -T`, `shopt -s extdebug`, in any file) is told apart by the trap as a change it did not make, and followed
# from then on (the tool's -T traces everything itself). A tool whose top level sets a DEBUG or RETURN trap (which
# toolexec's -T would have carried into files and functions a cold call's does not) is not served: its calls run cold.
declare -A __toolexec_loaded=()
if [[ -n $__toolexec_quiet ]]; then
  . "$0" </dev/null >/dev/null 2>&1
else
  __toolexec_self=${BASH_SOURCE[0]}
  __toolexec_tool_t=  # the tool's own -T (1: on), as a cold call's sourcing would have left it
  __toolexec_our_t=   # -T is on by toolexec's trap, for the command it runs before
  trap '__toolexec_at=${BASH_SOURCE[0]-}; [[ $__toolexec_at == /* ]] || __toolexec_at=$PWD/$__toolexec_at; __toolexec_loaded[$__toolexec_at]=1
if [[ -n $__toolexec_tool_t ]]; then
  [[ $- == *T* ]] || __toolexec_tool_t=
elif [[ $- == *T* && -z $__toolexec_our_t ]]; then
  __toolexec_tool_t=1
else
  __toolexec_at=${BASH_COMMAND%%[[:space:]]*}
  if [[ $__toolexec_at == . || $__toolexec_at == source ]] || declare -F -- "$__toolexec_at" >/dev/null 2>&1; then
    set -T; __toolexec_our_t=1
  else
    set +T; __toolexec_our_t=
  fi
fi
:' DEBUG
  __toolexec_trap=$(trap -p DEBUG)
  . "$0" </dev/null >/dev/null 2>&1
  __toolexec_debug=$(trap -p DEBUG && echo / && trap -p RETURN)
  trap - DEBUG
  if [[ -n $__toolexec_tool_t ]]; then set -T; else set +T; fi
  # (in POSIX mode `trap -p RETURN` says `trap -- - RETURN` of no trap)
  if [[ $__toolexec_debug != "$__toolexec_trap"$'\n/' && $__toolexec_debug != "$__toolexec_trap"$'\n/\ntrap -- - RETURN' ]]; then
    printf 'F%s\0\0' "the tool's top level sets a DEBUG or RETURN trap (a warm server would run it unlike a cold call): its calls run cold" >&"$__toolexec_ready"
    exit 0
  fi
  # (command substitutions, not process substitutions: those set $!, which a call's process would inherit, where a cold
  # call's holds what the tool's own sourcing left there)
  if shopt -q extdebug; then
    __toolexec_debug=
  else
    [[ $- == *E* ]] && __toolexec_debug=E || __toolexec_debug=-
    shopt -s extdebug
  fi
  while read -r _ _ __toolexec_at; do
    read -r _ _ __toolexec_at <<<"$(declare -F "$__toolexec_at")"
    [[ -z $__toolexec_at || $__toolexec_at == /* ]] || __toolexec_at=$PWD/$__toolexec_at
    [[ -z $__toolexec_at ]] || __toolexec_loaded[$__toolexec_at]=1
  done <<<"$(declare -F)"
  if [[ -n $__toolexec_debug ]]; then
    shopt -u extdebug  # (which turns -T and -E off: the tool's are set again)
    [[ $__toolexec_debug != E ]] || set -E
    [[ -z $__toolexec_tool_t ]] || set -T
  fi
  # (the tool's own file is not one: its text is what its server is keyed by)
  [[ $0 == /* ]] && __toolexec_at=$0 || __toolexec_at=$PWD/$0
  unset "__toolexec_loaded[$__toolexec_self]" "__toolexec_loaded[$__toolexec_at]" __toolexec_self __toolexec_at __toolexec_trap
  unset __toolexec_debug __toolexec_tool_t __toolexec_our_t
fi
if [[ -n $__toolexec_quiet ]]; then
  # A spare that lists nothing runs its one call in this bash: the tool's traps stay as its top level left them, no
  # subshell forked to say them (what runs before the call's code is toolexec's, each command a condition's, bar
  # the DEBUG trap's: a tool that sets one is run by no spare of a server whose first bash saw it, see above)
  __toolexec_traps=
else
  __toolexec_traps=$(trap -p)
  trap - EXIT ERR DEBUG RETURN INT TERM HUP
fi
unset __toolexec_quiet
# Read from variables, not in a command substitution (which would show `set -e` off).
__toolexec_options=$SHELLOPTS
__toolexec_shopts=$BASHOPTS
set +euo pipefail +E +T
shopt -u failglob nullglob 2>/dev/null
exec 2>/dev/null
# The tool's options, as the commands that turn them on again in each call, one a line (made once, each list by one
# substitution: no loop, here or per call).
__toolexec_restore=
[[ -z $__toolexec_options ]] || __toolexec_restore="set -o ${__toolexec_options//:/$' || :\nset -o '} || :"$'\n'
[[ -z $__toolexec_shopts ]] || __toolexec_restore+="shopt -s ${__toolexec_shopts//:/$' || :\nshopt -s '} || :"$'\n'
unset __toolexec_options __toolexec_shopts
{
  printf R
  for __toolexec_at in "${!__toolexec_loaded[@]}"; do printf '\0%s' "$__toolexec_at"; done
  printf '\0\0'  # the word's end: a process the top level left holds this pipe open (toolexec.runtimes.loaded.WORD_END)
} >&"$__toolexec_ready"
unset __toolexec_loaded __toolexec_at
exec {__toolexec_ready}>&-
# The call's code, parsed once (an eval in each call parsed its text again: ~0.1 ms): its script (the file
# $__toolexec_script: environment, cgroup, directory; read and run by eval, not sourced: sourcing runs a RETURN trap
# a spare kept), the tool's options and traps, then the bootstrap's binding and
# main, put in the text of the spare's block and of the server's loop below, each parsed whole by one eval here. So
# the call runs them as top-level code, as a cold call's bash runs its bootstrap: no function of toolexec's is on
# the tool's call stack (FUNCNAME, BASH_SOURCE and BASH_LINENO hold main and the script it is called from alone).
__toolexec_code='mapfile -d "" -t __toolexec_line <"$__toolexec_script" && [[ -n ${__toolexec_line[0]-} ]] || exit 70
eval "${__toolexec_line[0]}" || exit 70
[[ -z ${__toolexec_memfd-} ]] || exec {__toolexec_memfd}<&-
unset __toolexec_spare __toolexec_line __toolexec_slots __toolexec_slot __toolexec_script __toolexec_mode __toolexec_go __toolexec_held __toolexec_memfd __toolexec_wake __toolexec_waiter __toolexec_wait
eval "$__toolexec_restore" 2>/dev/null
eval "$__toolexec_traps"
unset __toolexec_restore __toolexec_traps __toolexec_ready
set -- "$0" ${__toolexec_function:+"$__toolexec_function"}
'$__toolexec_boot$'\n'
unset __toolexec_boot

if [[ -n $__toolexec_spare ]]; then
  # (an eval of one group: parsed whole before the read, so before the call comes)
  eval '{
  unset __toolexec_code
  IFS= read -r __toolexec_line && [[ $__toolexec_line == g ]] || exit 70
  exec {__toolexec_go}<&0 </proc/1/fd/10 >/proc/1/fd/11 2>/proc/1/fd/12 || exit 70
  if [[ -e /proc/1/fd/14 ]]; then exec 3>/proc/1/fd/14 || exit 70; fi
  exec {__toolexec_memfd}</proc/1/fd/13 || exit 70
  if [[ -n $__toolexec_held ]]; then
    printf h >&"$__toolexec_held" && exec {__toolexec_held}>&- || exit 70
    IFS= read -r -u "$__toolexec_go" __toolexec_line && [[ $__toolexec_line == s ]] || exit 70
  fi
  exec {__toolexec_go}<&-
  __toolexec_script=/dev/fd/$__toolexec_memfd
  '"$__toolexec_code"'
  exit
}'
  exit 70
fi

# A slot's waiter, forked once for the slot's first call (named on stdin) and kept for its later ones: each comes as
# one line (its mode) on the slot's `go` FIFO, whose write end toolexec holds (its end of file ends the waiter). The
# next call's processes are forked AHEAD of it, as soon as the last call's status is said: the call's own waiter (a
# foreground job of the slot's waiter, so that the slot's waiter starts no job in the background and $! stays what
# the server's sourcing left) and, below it, the call's process (a job in the background of the call's waiter: a
# process group of its own, `set -m`), which waits on the slot's `wake` FIFO (the slot's waiter holds it open both
# ways, so no open blocks; the call's process reads it through a read end of its own, whose end of file, once both
# waiters are gone, ends it; a line is taken only when it names the call's own waiter, so none left by an earlier
# call's starts one). When the call comes the call's waiter reads its mode on `go`, opens `st` (toolexec's read end
# is open by then), hands the mode on `wake` and waits for the call's process, which takes its descriptors, writes
# P<pid> <its waiter's pid> on `st` (its own, closed before the call's code runs: the waiter's holds `st` until the
# status) and runs the call; the call's waiter writes X<status> once it has ended, and exits. So a call's way holds
# no fork: one write on `go`. No part of it is in a condition (`a || b`): bash would run the call's code with its ERR
# trap and -e ignored. (One eval of the loop: the waiters and the call's code in it are parsed once, here.)
eval 'unset __toolexec_code
while IFS= read -r __toolexec_line; do
  {
    __toolexec_slot=$__toolexec_slots/${__toolexec_line:1}
    __toolexec_mode=${__toolexec_line:0:1}
    exec {__toolexec_go}<"$__toolexec_slot/go" {__toolexec_wake}<>"$__toolexec_slot/wake" || exit 70
    while :; do
      (
        __toolexec_waiter=$BASHPID
        set -m  # (a subshell starts without job control)
        (
          exec {__toolexec_go}<&- {__toolexec_wait}<"/proc/self/fd/$__toolexec_wake" {__toolexec_wake}<&- || exit 70
          while :; do
            IFS= read -r -u "$__toolexec_wait" __toolexec_line || exit 70
            [[ ${__toolexec_line:1} != "$__toolexec_waiter" ]] || break
          done
          __toolexec_mode=${__toolexec_line:0:1}
          exec {__toolexec_wait}<&- <"$__toolexec_slot/in" >"$__toolexec_slot/out" 2>"$__toolexec_slot/err" 3>"$__toolexec_slot/st" || exit 70
          if [[ $__toolexec_mode == p ]]; then exec {__toolexec_progress}>"$__toolexec_slot/progress" || exit 70; fi
          echo "P$BASHPID $__toolexec_waiter" >&3
          exec 3>&-
          set +m
          __toolexec_script=$__toolexec_slot/call
          '"$__toolexec_code"'
        ) &
        __toolexec_call=$!
        __toolexec_ended=70
        if [[ -z $__toolexec_mode ]] && ! IFS= read -r -u "$__toolexec_go" __toolexec_mode; then
          __toolexec_ended=3
        elif exec 3>"$__toolexec_slot/st"; then
          printf "%s%s\n" "$__toolexec_mode" "$__toolexec_waiter" >&"$__toolexec_wake"
          exec {__toolexec_wake}>&-
          wait "$__toolexec_call"
          echo "X$?" >&3
          exec 3>&-
          exit 0
        fi
        kill -KILL "$__toolexec_call"
        wait "$__toolexec_call"
        exit "$__toolexec_ended"
      )
      (($? == 0)) || exit 0
      __toolexec_mode=
    done
  } &
done'
wait
