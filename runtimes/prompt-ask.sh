# toolexec's prompt helpers for a call that can ask the user (LLM_INPUT_REQUEST is set): what
# LLM_PROMPT_UTILS_FILE names then. It sources the usual helpers (toolexec's prompt-utils.sh, then
# <functions_dir>/utils/prompt-utils.sh when there is one, whose functions win), then makes their questions
# real ones: confirm, input, list, checkbox, range, guard_operation and guard_path ask through toolexec
# (docs/mcp.md, "Asking the user"). A question not answered yet is written to $LLM_INPUT_REQUEST and
# the script ends; toolexec runs it again with the answer, which the same question then returns.
#
# What stays as it was: AUTO_CONFIRM (or LLM_AGENT_VAR_AUTO_CONFIRM) still confirms without asking, and
# password and editor are never asked this way (MCP forbids asking for secrets in a form).
# shellcheck shell=bash

# shellcheck source=prompt-utils.sh
source "${BASH_SOURCE[0]%/*}/prompt-utils.sh"
if [[ -n ${LLM_ROOT_DIR:-} && -f $LLM_ROOT_DIR/utils/prompt-utils.sh ]]; then
  # shellcheck disable=SC1091
  source "$LLM_ROOT_DIR/utils/prompt-utils.sh"
fi

_toolexec_ask_json() { # TEXT: TEXT as a JSON string
  local s=$1 out="" c i
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\r'/\\r}
  s=${s//$'\t'/\\t}
  if [[ $s == *[$'\x01'-$'\x1f']* ]]; then
    for ((i = 0; i < ${#s}; i++)); do
      c=${s:i:1}
      if [[ $c == [$'\x01'-$'\x1f'] ]]; then
        printf -v c '\\u%04x' "'$c"
      fi
      out+=$c
    done
    s=$out
  fi
  printf '"%s"' "$s"
}

_toolexec_ask_list() { # ITEMS...: a JSON array of strings
  local out="" item
  for item in "$@"; do out+="${out:+,}$(_toolexec_ask_json "$item")"; done
  printf '[%s]' "$out"
}

_toolexec_ask_key() { # KIND TEXT...: the question's key, the same in every run that asks the same question
  local kind=$1 sum
  shift
  sum=$(printf '%s\037' "$kind" "$@" | cksum)
  printf '%s_%s' "$kind" "${sum%% *}"
}

# _toolexec_ask KEY MESSAGE PROPERTY-SCHEMA: the answer's action (accept, decline, cancel) once it is known.
# Before, the question goes to toolexec and the script ends: this runs in a command substitution, which ends
# its script with SIGTERM; should the script survive that (a trap), the question reads as unanswered (no).
_toolexec_ask() {
  local action_var="LLM_ANSWER_$1"
  if [[ -n ${!action_var:-} ]]; then
    printf '%s' "${!action_var}"
    return 0
  fi
  printf '{"key":"%s","message":%s,"schema":{"type":"object","properties":{"value":%s},"required":["value"]}}' \
    "$1" "$(_toolexec_ask_json "$2")" "$3" >"$LLM_INPUT_REQUEST"
  if [[ $BASHPID != "$$" ]]; then
    kill -TERM "$$" 2>/dev/null
  fi
  exit 0
}

_toolexec_ask_value() { # KEY: the accepted answer's value
  local value_var="LLM_ANSWER_$1__value"
  printf '%s' "${!value_var:-}"
}

_toolexec_ask_on() { [[ -n ${LLM_INPUT_REQUEST:-} ]]; }

eval "_toolexec_base_$(declare -f confirm)"
eval "_toolexec_base_$(declare -f input)"
eval "_toolexec_base_$(declare -f list)"
eval "_toolexec_base_$(declare -f checkbox)"
eval "_toolexec_base_$(declare -f range)"

# Prints 1 for yes, 0 for no (a declined or cancelled question is a no).
confirm() {
  if _toolexec_pu_auto || ! _toolexec_ask_on; then
    _toolexec_base_confirm "$@"
    return
  fi
  local key action
  key=$(_toolexec_ask_key confirm "$1")
  action=$(_toolexec_ask "$key" "$1" "{\"type\":\"boolean\",\"title\":$(_toolexec_ask_json "$1")}")
  if [[ $action == accept && $(_toolexec_ask_value "$key") == true ]]; then printf 1; else printf 0; fi
}

input() {
  _toolexec_ask_on || {
    _toolexec_base_input "$@"
    return
  }
  local key action
  key=$(_toolexec_ask_key input "$1")
  action=$(_toolexec_ask "$key" "$1" "{\"type\":\"string\",\"title\":$(_toolexec_ask_json "$1")}")
  [[ $action == accept ]] || return 1
  _toolexec_ask_value "$key"
}

# list PROMPT OPTIONS...: prints the index of the chosen option.
list() {
  _toolexec_ask_on || {
    _toolexec_base_list "$@"
    return
  }
  local prompt=$1 key action value i
  shift
  key=$(_toolexec_ask_key list "$prompt" "$@")
  action=$(_toolexec_ask "$key" "$prompt" "{\"type\":\"string\",\"title\":$(_toolexec_ask_json "$prompt"),\"enum\":$(_toolexec_ask_list "$@")}")
  [[ $action == accept ]] || return 1
  value=$(_toolexec_ask_value "$key")
  for ((i = 1; i <= $#; i++)); do
    if [[ ${!i} == "$value" ]]; then
      printf '%s' "$((i - 1))"
      return 0
    fi
  done
  return 1
}

# checkbox PROMPT OPTIONS...: prints the indexes of the chosen options, separated by spaces.
checkbox() {
  _toolexec_ask_on || {
    _toolexec_base_checkbox "$@"
    return
  }
  local prompt=$1 key action chosen=() line i
  shift
  key=$(_toolexec_ask_key checkbox "$prompt" "$@")
  action=$(_toolexec_ask "$key" "$prompt" "{\"type\":\"array\",\"title\":$(_toolexec_ask_json "$prompt"),\"items\":{\"type\":\"string\",\"enum\":$(_toolexec_ask_list "$@")}}")
  [[ $action == accept ]] || return 1
  while IFS= read -r line; do
    for ((i = 1; i <= $#; i++)); do
      [[ ${!i} == "$line" ]] && chosen+=("$((i - 1))")
    done
  done <<<"$(_toolexec_ask_value "$key")"
  printf '%s' "${chosen[*]}"
}

# range PROMPT MIN CURRENT MAX: prints the number chosen.
range() {
  _toolexec_ask_on || {
    _toolexec_base_range "$@"
    return
  }
  local key action
  key=$(_toolexec_ask_key range "$@")
  action=$(_toolexec_ask "$key" "$1" "{\"type\":\"integer\",\"title\":$(_toolexec_ask_json "$1"),\"minimum\":$(($2)),\"maximum\":$(($4)),\"default\":$(($3))}")
  [[ $action == accept ]] || return 1
  printf '%s\n' "$(_toolexec_ask_value "$key")"
}

# The guards as toolexec's prompt-utils.sh has them (a user's own may only ask on a terminal), asking through
# the confirm above: a "no" (declined, cancelled) ends the tool with status 1.
guard_operation() { _toolexec_pu_guard_operation "$@"; }
guard_path() { _toolexec_pu_guard_path "$@"; }
