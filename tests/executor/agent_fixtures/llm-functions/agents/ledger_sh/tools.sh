#!/usr/bin/env bash
set -e

# @env LLM_OUTPUT=/dev/stdout The output path
# @env LEDGER_MODE=strict How strict the ledger is

# @cmd Add an expense to the ledger.
# The amount is in the ledger's currency.
# @option --item! What was bought
# @option --amount! <INT> The price, in cents
# @option --category[food|rent|other] Where it goes
# @option --tag* Labels for the entry
# @flag --refund Whether it is money back
add_entry() {
    {
        printf 'item=%s\n' "$argc_item"
        printf 'amount=%s\n' "$argc_amount"
        printf 'category=%s\n' "${argc_category:-}"
        printf 'tags=%s\n' "${argc_tag[*]:-}"
        printf 'refund=%s\n' "${argc_refund:-0}"
        printf 'mode=%s\n' "$LEDGER_MODE"
    } >> "$LLM_OUTPUT"
}

# @cmd Report what the ledger's functions see of their environment.
show_env() {
    for name in LLM_AGENT_NAME LLM_AGENT_FUNC LLM_AGENT_ROOT_DIR LLM_AGENT_CACHE_DIR LLM_ROOT_DIR \
        LLM_AGENT_RAW_JSON LLM_AGENT_VAR_OWNER LLM_AGENT_VAR_CURRENCY ROOT_ENV AGENT_ENV SHARED_ENV; do
        printf '%s=%s\n' "$name" "${!name}" >> "$LLM_OUTPUT"
    done
    printf 'PATH=%s\n' "$PATH" >> "$LLM_OUTPUT"
}

# @cmd Total of the ledger
# @option --since <DATE> Only entries from this day on
total() {
    _format "0 ${LLM_AGENT_VAR_CURRENCY}" >> "$LLM_OUTPUT"
}

_format() {
    printf 'total: %s\n' "$1"
}

# @cmd The ledger's instructions, made when the agent starts
_instructions() {
    printf 'You keep the ledger of %s, in %s.\n' "$LLM_AGENT_VAR_OWNER" "$LLM_AGENT_VAR_CURRENCY" >> "$LLM_OUTPUT"
}

eval "$(argc --argc-eval "$0" "$@")"
