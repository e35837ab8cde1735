# toolexec: run an argc-style Bash tool. Invoked as: bash bash_bootstrap.sh TOOL_PATH [FUNCTION]
# (FUNCTION: one `# @cmd` function of an agent's tools.sh, called instead of main).
# $0 becomes the tool's own path (BASH_ARGV0, bash 5+); the tool is sourced, not
# run through `bash -c`, so its exit statuses (set -e, set -u) are the ones a
# direct run gives. Stdin holds NUL-separated binding records:
#   s NAME VALUE        a scalar argc_NAME
#   a NAME COUNT V...   an array argc_NAME
#   f NAME FUNCTION     default argc_NAME to FUNCTION's output when unset
#   c NAME FUNCTION     check argc_NAME's values against FUNCTION's output lines
#   p COUNT V...        the positional @arg values passed to main
# Values are only ever assigned (printf -v, array slices): never parsed or eval'd.
# Started early by a one-shot run (toolexec.early: TOOLEXEC_EARLY=GO:READY, its stdin a file toolexec writes): say it
# waits, wait for the go, then take the call's own variables (a count, then NAME=value records, NUL-ended) from the
# start of stdin, where the call's request follows; join the call's pids cgroup if named. The end of GO: discarded.
if [[ -n ${TOOLEXEC_EARLY-} ]]; then
  __toolexec_go=${TOOLEXEC_EARLY%%:*}
  __toolexec_ready=${TOOLEXEC_EARLY##*:}
  unset TOOLEXEC_EARLY
  printf R >&"$__toolexec_ready" || exit 0
  exec {__toolexec_ready}>&-
  read -r -n 1 __toolexec_word <&"$__toolexec_go" || exit 0
  exec {__toolexec_go}<&-
  mapfile -d '' -n 1 -t __toolexec_count
  mapfile -d '' -n "${__toolexec_count[0]}" -t __toolexec_env
  for __toolexec_word in "${__toolexec_env[@]}"; do
    export -- "$__toolexec_word"
  done
  if [[ -n ${TOOLEXEC_EARLY_CGROUP-} ]]; then
    { echo 0 >"$TOOLEXEC_EARLY_CGROUP"; } 2>/dev/null
  fi
  if [[ -n ${TOOLEXEC_EARLY_PID_MAX-} ]]; then  # (in the spare's own PID namespace: a root call's process cap)
    { echo "$TOOLEXEC_EARLY_PID_MAX" >/proc/sys/kernel/pid_max; } 2>/dev/null
  fi
  unset TOOLEXEC_EARLY_CGROUP TOOLEXEC_EARLY_PID_MAX __toolexec_go __toolexec_ready __toolexec_word __toolexec_count __toolexec_env
fi
# The call's file size bound (RLIMIT_FSIZE, bytes; a multiple of 1024), soft and hard so that the tool cannot raise
# it, before any line of the tool runs: `ulimit -f` counts 1024-byte blocks, 512-byte ones in POSIX mode.
if [[ -n ${TOOLEXEC_FILE_LIMIT-} ]]; then
  if [[ -o posix ]]; then __toolexec_block=512; else __toolexec_block=1024; fi
  ulimit -f $((TOOLEXEC_FILE_LIMIT / __toolexec_block)) || {
    echo "toolexec: cannot bound the size of the files the tool writes" >&2
    exit 70
  }
  unset __toolexec_block
fi
unset TOOLEXEC_FILE_LIMIT
BASH_ARGV0=$1
__toolexec_call=${2:-main}
shift $#
mapfile -d '' -t __toolexec_in
exec 0</dev/null
argc() { :; } # the trailer  eval "$(argc --argc-eval "$0" "$@")"  becomes a no-op
__toolexec_late=()
argc__positionals=()
__toolexec_i=0
while ((__toolexec_i < ${#__toolexec_in[@]})); do
  __toolexec_name=${__toolexec_in[__toolexec_i + 1]}
  case ${__toolexec_in[__toolexec_i]} in
  s)
    printf -v "$__toolexec_name" %s "${__toolexec_in[__toolexec_i + 2]}"
    ((__toolexec_i += 3))
    ;;
  a)
    __toolexec_n=${__toolexec_in[__toolexec_i + 2]}
    declare -n __toolexec_ref=$__toolexec_name
    __toolexec_ref=("${__toolexec_in[@]:__toolexec_i+3:__toolexec_n}")
    unset -n __toolexec_ref
    ((__toolexec_i += 3 + __toolexec_n))
    ;;
  f | c)
    __toolexec_late+=("${__toolexec_in[@]:__toolexec_i:3}")
    ((__toolexec_i += 3))
    ;;
  p)
    argc__positionals=("${__toolexec_in[@]:__toolexec_i+2:__toolexec_name}")
    ((__toolexec_i += 2 + __toolexec_name))
    ;;
  *)
    echo "toolexec: corrupt argument record ${__toolexec_in[__toolexec_i]}" >&2
    exit 70
    ;;
  esac
done
unset __toolexec_in __toolexec_i __toolexec_n __toolexec_name
argc__fn=$__toolexec_call

# A warm server (bash_warm.sh) sourced the tool already: this runs in a subshell forked from it.
[[ -n ${__toolexec_warm-} ]] || . "$0"
unset __toolexec_warm __toolexec_boot __toolexec_function __toolexec_dir

for ((__toolexec_i = 0; __toolexec_i < ${#__toolexec_late[@]}; __toolexec_i += 3)); do
  __toolexec_name=${__toolexec_late[__toolexec_i + 1]}
  __toolexec_fn=${__toolexec_late[__toolexec_i + 2]}
  if [[ ${__toolexec_late[__toolexec_i]} == f ]]; then
    [[ -n ${!__toolexec_name+set} ]] || printf -v "$__toolexec_name" %s "$("$__toolexec_fn")"
    continue
  fi
  [[ -n ${!__toolexec_name+set} ]] || continue
  mapfile -t __toolexec_allowed < <("$__toolexec_fn")
  declare -n __toolexec_ref=$__toolexec_name
  for __toolexec_value in "${__toolexec_ref[@]}"; do
    __toolexec_ok=
    for __toolexec_choice in "${__toolexec_allowed[@]}"; do
      [[ $__toolexec_value == "$__toolexec_choice" ]] && __toolexec_ok=1 && break
    done
    if [[ -z $__toolexec_ok ]]; then
      __toolexec_list=$(printf '%s, ' "${__toolexec_allowed[@]}")
      printf "toolexec: parameter '%s': expected one of %s, got '%s'\n" "${__toolexec_name#argc_}" "${__toolexec_list%, }" "$__toolexec_value" >&2
      exit 2
    fi
  done
  unset -n __toolexec_ref
done
unset __toolexec_late __toolexec_i __toolexec_name __toolexec_fn __toolexec_allowed __toolexec_value __toolexec_ok __toolexec_choice __toolexec_list

if [[ $__toolexec_call != main ]]; then
  __toolexec_fn=$__toolexec_call
  unset __toolexec_call
  "$__toolexec_fn" "${argc__positionals[@]}"
elif declare -F main >/dev/null; then
  unset __toolexec_call
  main "${argc__positionals[@]}"
fi
