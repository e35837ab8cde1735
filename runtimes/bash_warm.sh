# toolexec: a warm Bash tool's server. Invoked as: bash bash_warm.sh TOOL_PATH [FUNCTION], with
# TOOLEXEC_ZYGOTE_FD naming a pipe on which it says R once the tool is sourced (argc's trailer included: `argc` is a
# no-op here, as in bash_bootstrap.sh, so main does not run). Then each line on stdin names a call's private
# directory (see runtimes/warm_bash.py): its request (`in`, the bootstrap's binding records), `env` (NUL-separated:
# the working directory, then NAME=VALUE of the call's environment) and the FIFOs `out`, `err`, `st` (and `progress`)
# whose read ends toolexec holds. Per call a waiter (a job of its own) forks the call's process (a job of its own
# too: its own process group), which takes those as its descriptors, writes P<pid> on `st`, restores the tool's
# shell options and traps and runs bash_bootstrap.sh's binding and main; the waiter writes X<status> once it ends.
__toolexec_ready=$TOOLEXEC_ZYGOTE_FD
unset TOOLEXEC_ZYGOTE_FD
BASH_ARGV0=$1
__toolexec_function=${2-}
__toolexec_boot=$(<"${BASH_SOURCE[0]%/*}/bash_bootstrap.sh") || exit 70
shift $#
argc() { :; }
__toolexec_warm=1
. "$0" </dev/null >/dev/null 2>&1
__toolexec_traps=$(trap -p)
# Read from variables, not in a command substitution (which would show `set -e` off).
__toolexec_options=$SHELLOPTS:$BASHOPTS
trap - EXIT ERR DEBUG RETURN INT TERM HUP
set +euo pipefail +E +T
shopt -u failglob nullglob 2>/dev/null
exec 2>/dev/null
echo R >&"$__toolexec_ready"
exec {__toolexec_ready}>&-

__toolexec_serve() {
  exec 3>"$1/st" || exit 70
  set -m
  (
    exec <"$1/in" >"$1/out" 2>"$1/err" || exit 70
    if [[ -p $1/progress ]]; then exec {__toolexec_progress}>"$1/progress" || exit 70; fi
    echo "P$BASHPID" >&3
    exec 3>&-
    set +m
    {
      IFS= read -r -d '' __toolexec_cwd
      while IFS= read -r -d '' __toolexec_pair; do
        export -- "$__toolexec_pair" 2>/dev/null
      done
    } <"$1/env"
    cd -- "$__toolexec_cwd" || exit 70
    unset __toolexec_cwd __toolexec_pair
    for __toolexec_pair in ${__toolexec_options//:/ }; do
      set -o "$__toolexec_pair" 2>/dev/null || shopt -s "$__toolexec_pair" 2>/dev/null
    done
    unset __toolexec_pair
    eval "$__toolexec_traps"
    unset __toolexec_options __toolexec_traps __toolexec_ready
    unset -f __toolexec_serve
    set -- "$0" ${__toolexec_function:+"$__toolexec_function"}
    eval "$__toolexec_boot"
  ) &
  wait "$!"
  echo "X$?" >&3
}

while IFS= read -r __toolexec_dir; do
  __toolexec_serve "$__toolexec_dir" &
done
wait
