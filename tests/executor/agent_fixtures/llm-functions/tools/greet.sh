#!/usr/bin/env bash
set -e

# @describe Greet someone by name.
# @option --who! Whom to greet

main() {
    printf 'hello %s (owner %s)\n' "$argc_who" "${LLM_AGENT_VAR_OWNER:-${LLM_AGENT_VAR_TEAM:-none}}" >> "$LLM_OUTPUT"
    printf 'root %s\ncache %s\nagent %s\n' "$LLM_ROOT_DIR" "$LLM_TOOL_CACHE_DIR" "${LLM_AGENT_NAME:-none}" >> "$LLM_OUTPUT"
}

eval "$(argc --argc-eval "$0" "$@")"
