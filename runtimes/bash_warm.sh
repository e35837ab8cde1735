# toolexec: a warm Bash tool's server. Invoked as: bash bash_warm.sh TOOL_PATH [FUNCTION], with
# TOOLEXEC_ZYGOTE_FD naming a pipe on which it says R once the tool is sourced (argc's trailer included: `argc` is a
# no-op here, as in bash_bootstrap.sh, so main does not run).
#
# The ready word is R, then each file the sourcing read, NUL-separated (see below).
#
# A server (sandbox off): each line on stdin names a call's private directory (see runtimes/warm_bash.py): its
# request (`in`, the bootstrap's binding records), `env` (NUL-separated: the working directory, the cgroup file to
# join (empty: none), then NAME=VALUE of the call's environment) and the FIFOs `out`, `err`, `st` (and `progress`)
# whose read ends toolexec holds. Per call a waiter (a job of its own) forks the call's process (a job of its own
# too: its own process group), which takes those as its descriptors, writes P<pid> on `st`, restores the tool's
# shell options and traps and runs bash_bootstrap.sh's binding and main; the waiter writes X<status> once it ends.
#
# A spare (TOOLEXEC_WARM_SPARE=1, under the sandbox's baseline: see runtimes/_bash_zygote.py): process 2 of a PID
# namespace of its own, it runs one call in place once the namespace's init says `g` on stdin; the init holds the
# call's channels, as /proc/1/fd/10 (the request), 11 (stdout), 12 (stderr), 13 (the `env` file) and 14 (progress,
# when the call listens for it: the call's LLM_PROGRESS names descriptor 3).
__toolexec_ready=$TOOLEXEC_ZYGOTE_FD
__toolexec_spare=${TOOLEXEC_WARM_SPARE-}
unset TOOLEXEC_ZYGOTE_FD TOOLEXEC_WARM_SPARE TOOLEXEC_WARM_SERVER
BASH_ARGV0=$1
__toolexec_function=${2-}
__toolexec_boot=$(<"${BASH_SOURCE[0]%/*}/bash_bootstrap.sh") || exit 70
shift $#
argc() { :; }
__toolexec_warm=1
# The files the sourcing reads (what the tool sources, and where the functions it defines come from), for
# toolexec to look at before each call (runtimes/loaded.py): each file that runs a command (the DEBUG trap, in
# functions too under extdebug) and each file that defines a function (declare -F under extdebug).
declare -A __toolexec_loaded=()
__toolexec_self=${BASH_SOURCE[0]}
shopt -s extdebug
trap '__toolexec_at=${BASH_SOURCE[0]-}; [[ $__toolexec_at == /* ]] || __toolexec_at=$PWD/$__toolexec_at; __toolexec_loaded[$__toolexec_at]=1' DEBUG
__toolexec_trap=$(trap -p DEBUG)
. "$0" </dev/null >/dev/null 2>&1
# A DEBUG trap of the tool's own replaced this one: the list may miss files ("+": toolexec trusts no later call)
[[ $(trap -p DEBUG) == "$__toolexec_trap" ]] || __toolexec_loaded[+]=1
trap - DEBUG
while read -r _ _ __toolexec_at; do
  read -r _ _ __toolexec_at < <(declare -F "$__toolexec_at")
  [[ -z $__toolexec_at || $__toolexec_at == /* ]] || __toolexec_at=$PWD/$__toolexec_at
  [[ -z $__toolexec_at ]] || __toolexec_loaded[$__toolexec_at]=1
done < <(declare -F)
shopt -u extdebug
# (the tool's own file is not one: its text is what its server is keyed by)
[[ $0 == /* ]] && __toolexec_at=$0 || __toolexec_at=$PWD/$0
unset "__toolexec_loaded[$__toolexec_self]" "__toolexec_loaded[$__toolexec_at]" __toolexec_self __toolexec_at __toolexec_trap
__toolexec_traps=$(trap -p)
# Read from variables, not in a command substitution (which would show `set -e` off).
__toolexec_options=$SHELLOPTS:$BASHOPTS
trap - EXIT ERR DEBUG RETURN INT TERM HUP
set +euo pipefail +E +T
shopt -u failglob nullglob 2>/dev/null
exec 2>/dev/null
{
  printf R
  for __toolexec_at in "${!__toolexec_loaded[@]}"; do [[ $__toolexec_at == + ]] || printf '\0%s' "$__toolexec_at"; done
  [[ -z ${__toolexec_loaded[+]+x} ]] || printf '\0+'
} >&"$__toolexec_ready"
unset __toolexec_loaded __toolexec_at
exec {__toolexec_ready}>&-

# In the call's process, its channels taken: its environment (from the file $1), cgroup and directory, the tool's
# options and traps, then the bootstrap's binding and main.
__toolexec_run() {
  {
    IFS= read -r -d '' __toolexec_cwd
    IFS= read -r -d '' __toolexec_join
    while IFS= read -r -d '' __toolexec_pair; do
      export -- "$__toolexec_pair" 2>/dev/null
    done
  } <"$1"
  # Everything the call starts is born in its pids cgroup (root's process cap): it moves itself, as a cold call's
  # shell does (best effort, as the baseline's is).
  [[ -z $__toolexec_join ]] || { echo 0 >"$__toolexec_join"; } 2>/dev/null
  cd -- "$__toolexec_cwd" || exit 70
  unset __toolexec_cwd __toolexec_pair __toolexec_join __toolexec_spare
  for __toolexec_pair in ${__toolexec_options//:/ }; do
    set -o "$__toolexec_pair" 2>/dev/null || shopt -s "$__toolexec_pair" 2>/dev/null
  done
  unset __toolexec_pair
  eval "$__toolexec_traps"
  unset __toolexec_options __toolexec_traps __toolexec_ready
  unset -f __toolexec_serve __toolexec_run
  set -- "$0" ${__toolexec_function:+"$__toolexec_function"}
  eval "$__toolexec_boot"
}

if [[ -n $__toolexec_spare ]]; then
  IFS= read -r __toolexec_go && [[ $__toolexec_go == g ]] || exit 70
  unset __toolexec_go
  exec </proc/1/fd/10 >/proc/1/fd/11 2>/proc/1/fd/12 || exit 70
  if [[ -e /proc/1/fd/14 ]]; then exec 3>/proc/1/fd/14 || exit 70; fi
  __toolexec_run /proc/1/fd/13
  exit
fi

__toolexec_serve() {
  exec 3>"$1/st" || exit 70
  set -m
  (
    exec <"$1/in" >"$1/out" 2>"$1/err" || exit 70
    if [[ -p $1/progress ]]; then exec {__toolexec_progress}>"$1/progress" || exit 70; fi
    echo "P$BASHPID" >&3
    exec 3>&-
    set +m
    __toolexec_run "$1/env"
  ) &
  wait "$!"
  echo "X$?" >&3
}

while IFS= read -r __toolexec_dir; do
  __toolexec_serve "$__toolexec_dir" &
done
wait
