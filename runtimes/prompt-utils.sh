# toolexec's prompt helpers for Bash tools written for Loki: `source "$LLM_PROMPT_UTILS_FILE"`.
#
# toolexec points LLM_PROMPT_UTILS_FILE at <functions_dir>/utils/prompt-utils.sh when there is one
# (Loki's own), else at this file, which provides the helpers Loki documents with the same names
# and behaviour: logging (error warn info debug trace success), colours (red green gold blue
# magenta cyan white), prompts (input confirm list checkbox password editor range with_validate
# validate_present), guards (guard_operation guard_path), patch_file, detect_os, get_opener, open_link.
#
# Prompts are asked on the controlling terminal (/dev/tty). Where there is none (an agent, a CI
# job, toolexec's own calls, which run in a session of their own), or when AUTO_CONFIRM (or
# LLM_AGENT_VAR_AUTO_CONFIRM) is set, confirmations proceed without asking; prompts for a value
# print nothing and fail. When the caller can answer questions (an MCP client with elicitation,
# `toolexec run --ask`, Executor(on_input=...)), LLM_PROMPT_UTILS_FILE names prompt-ask.sh instead,
# which asks them through toolexec.
# shellcheck shell=bash

_toolexec_pu_colour() { # CODE TEXT: TEXT in colour CODE when stdout is a terminal
  if [[ -t 1 ]]; then printf '\033[%sm%s\033[0m\n' "$1" "$2"; else printf '%s\n' "$2"; fi
}

_toolexec_pu_log() { # CODE LABEL TEXT
  if [[ -t 1 ]]; then printf '\033[1;%sm%s:\033[0;%sm %s\033[0m\n' "$1" "$2" "$1" "$3"; else printf '%s: %s\n' "$2" "$3"; fi
}

error() { _toolexec_pu_log 31 ERROR "$1"; }
warn() { _toolexec_pu_log 33 WARN "$1"; }
info() { _toolexec_pu_log 36 INFO "$1"; }
debug() { _toolexec_pu_log 34 DEBUG "$1"; }
trace() { _toolexec_pu_log 90 TRACE "$1"; }
success() { _toolexec_pu_log 32 SUCCESS "$1"; }
red() { _toolexec_pu_colour 31 "$1"; }
green() { _toolexec_pu_colour 32 "$1"; }
gold() { _toolexec_pu_colour 33 "$1"; }
blue() { _toolexec_pu_colour 34 "$1"; }
magenta() { _toolexec_pu_colour 35 "$1"; }
cyan() { _toolexec_pu_colour 36 "$1"; }
white() { _toolexec_pu_colour 37 "$1"; }
show_error() { printf '\033[91;1m✘ %s\033[0m\n' "$1" >&2; }
show_success() { printf '\033[92;1m✔ %s\033[0m\n' "$1" >&2; }

_toolexec_pu_has_tty() { { : </dev/tty; } 2>/dev/null; }

_toolexec_pu_auto() { [[ -n ${AUTO_CONFIRM:-} || -n ${LLM_AGENT_VAR_AUTO_CONFIRM:-} ]]; }

_toolexec_pu_ask() { # PROMPT [read options...]: one answer read from the terminal into $REPLY
  local prompt=$1
  shift
  _toolexec_pu_has_tty || return 1
  printf '\033[32m?\033[0m \033[1m%s\033[0m ' "$prompt" >/dev/tty
  IFS= read -r "$@" </dev/tty || return 1
}

input() {
  _toolexec_pu_ask "$1" || return 1
  printf '%s' "$REPLY"
}

password() {
  _toolexec_pu_ask "$1" -s || return 1
  printf '\n' >/dev/tty
  printf '%s' "$REPLY"
}

# Prints 1 for yes, 0 for no. Without a terminal to ask on it prints 1: the call proceeds.
confirm() {
  if _toolexec_pu_auto || ! _toolexec_pu_has_tty; then
    printf 1
    return 0
  fi
  _toolexec_pu_ask "$1 (y/N)" -n 1 || {
    printf 0
    return 0
  }
  printf '\n' >/dev/tty
  case $REPLY in
  y | Y) printf 1 ;;
  *) printf 0 ;;
  esac
}

# Prints the index of the chosen option.
list() {
  local prompt=$1 i
  shift
  _toolexec_pu_has_tty || return 1
  for ((i = 0; i < $#; i++)); do printf '  %d) %s\n' "$((i + 1))" "${@:i+1:1}" >/dev/tty; done
  while _toolexec_pu_ask "$prompt [1-$#]"; do
    if [[ $REPLY =~ ^[0-9]+$ ]] && ((REPLY >= 1 && REPLY <= $#)); then
      printf '%s' "$((REPLY - 1))"
      return 0
    fi
  done
  return 1
}

# Prints the indexes of the chosen options, separated by spaces.
checkbox() {
  local prompt=$1 i chosen=()
  shift
  _toolexec_pu_has_tty || return 1
  for ((i = 0; i < $#; i++)); do printf '  %d) %s\n' "$((i + 1))" "${@:i+1:1}" >/dev/tty; done
  _toolexec_pu_ask "$prompt (numbers separated by spaces)" || return 1
  for i in $REPLY; do
    [[ $i =~ ^[0-9]+$ ]] && ((i >= 1 && i <= $#)) && chosen+=("$((i - 1))")
  done
  printf '%s' "${chosen[*]}"
}

# range PROMPT MIN CURRENT MAX: prints the number chosen (CURRENT on an empty answer).
range() {
  while _toolexec_pu_ask "$1 [$2-$4, default $3]"; do
    [[ -z $REPLY ]] && REPLY=$3
    if [[ $REPLY =~ ^-?[0-9]+$ ]] && ((REPLY >= $2 && REPLY <= $4)); then
      printf '%s\n' "$REPLY"
      return 0
    fi
  done
  return 1
}

editor() {
  local file status
  _toolexec_pu_has_tty || return 1
  file=$(mktemp) || return 1
  printf '%s\n' "$1" >/dev/tty
  "${EDITOR:-vi}" "$file" </dev/tty >/dev/tty
  status=$?
  ((status == 0)) && cat "$file"
  rm -f "$file"
  return "$status"
}

# with_validate 'PROMPT COMMAND' VALIDATOR: ask until VALIDATOR accepts the answer.
with_validate() {
  local value
  while true; do
    value=$(eval "$1") || return 1
    if ("$2" "$value" >/dev/null); then
      printf '%s\n' "$value"
      return 0
    fi
    show_error "$("$2" "$value")"
  done
}

validate_present() {
  [[ -n $1 ]] && return 0
  error "Please specify the value"
  return 1
}

detect_os() {
  case $OSTYPE in
  solaris*) echo solaris ;;
  darwin*) echo macos ;;
  linux*) echo linux ;;
  bsd* | freebsd* | openbsd* | netbsd*) echo bsd ;;
  msys* | cygwin*) echo windows ;;
  *) echo unknown ;;
  esac
}

get_opener() {
  case $(detect_os) in
  macos) echo open ;;
  linux) echo xdg-open ;;
  windows) echo start ;;
  *) echo "" ;;
  esac
}

open_link() {
  local opener
  opener=$(get_opener)
  if [[ -z $opener ]] || ! "$opener" "$1"; then
    error "Could not open a browser."
    red "Please open this URL in your browser: $1"
    return 1
  fi
}

# Ask before an operation; a "no" ends the tool with status 1.
guard_operation() { _toolexec_pu_guard_operation "$@"; }
_toolexec_pu_guard_operation() {
  if [[ $(confirm "${1:-Are you sure you want to continue?}") == 0 ]]; then
    error "Operation aborted!"
    exit 1
  fi
}

# _toolexec_pu_outside PATH: whether PATH (made absolute, . and .. resolved) lies outside the working directory.
_toolexec_pu_outside() {
  local path=$1 part parts=() kept=() normal=""
  [[ $path == /* ]] || path=$PWD/$path
  IFS=/ read -ra parts <<<"$path"
  for part in "${parts[@]}"; do
    case $part in
    "" | .) ;;
    ..) ((${#kept[@]})) && unset 'kept[${#kept[@]}-1]' ;;
    *) kept+=("$part") ;;
    esac
  done
  for part in "${kept[@]}"; do normal+="/$part"; done
  normal=${normal:-/}
  [[ $normal != "$PWD" && $normal != "$PWD"/* ]]
}

# guard_path PATH PROMPT: ask before touching PATH when it lies outside the working directory.
guard_path() { _toolexec_pu_guard_path "$@"; }
_toolexec_pu_guard_path() {
  if (($# != 2)); then
    echo "Usage: guard_path <path> <confirmation_prompt>" >&2
    exit 1
  fi
  _toolexec_pu_outside "$1" || return 0
  if [[ $(confirm "$2") == 0 ]]; then
    error "Operation aborted!"
    exit 1
  fi
}

# patch_file FILE PATCH: print FILE with the unified diff in the file PATCH applied (FILE is not
# changed). Hunks are found by their context and removed lines, in order; line numbers in the
# @@ headers are not needed. Fails with "error: no patch" or "error: unable to apply patch".
patch_file() {
  awk '
    FNR == NR { original[++lines] = $0; next }
    /^(---|\+\+\+) / && !inside { next }
    /^@@/ { hunks++; inside = 1; next }
    /^\\/ { next }
    inside && /^[-+ ]/ {
      mark = substr($0, 1, 1); text = substr($0, 2)
      if (mark != "+") old[hunks, ++olds[hunks]] = text
      if (mark != "-") new[hunks, ++news[hunks]] = text
      next
    }
    inside && /^$/ { old[hunks, ++olds[hunks]] = ""; new[hunks, ++news[hunks]] = ""; next }
    { inside = 0 }
    END {
      if (!hunks) { print "error: no patch" > "/dev/stderr"; exit 1 }
      at = 1
      for (h = 1; h <= hunks; h++) {
        found = 0
        for (start = at; start + olds[h] - 1 <= lines; start++) {
          match_all = 1
          for (i = 1; i <= olds[h]; i++) if (original[start + i - 1] != old[h, i]) { match_all = 0; break }
          if (match_all) { found = start; break }
        }
        if (!found) { print "error: unable to apply patch" > "/dev/stderr"; exit 1 }
        for (i = at; i < found; i++) out[++outs] = original[i]
        for (i = 1; i <= news[h]; i++) out[++outs] = new[h, i]
        at = found + olds[h]
      }
      for (i = at; i <= lines; i++) out[++outs] = original[i]
      for (i = 1; i <= outs; i++) print out[i]
    }' "$1" "$2"
}
