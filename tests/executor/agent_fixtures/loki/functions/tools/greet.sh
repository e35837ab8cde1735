#!/usr/bin/env bash
set -e

# @describe Greet someone by name.
# @option --who! Whom to greet

main() {
    printf 'hello %s (owner %s)\n' "$argc_who" "${LLM_AGENT_VAR_OWNER:-none}" >> "$LLM_OUTPUT"
}

eval "$(argc --argc-eval "$0" "$@")"
