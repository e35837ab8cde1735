#!/usr/bin/env bash
set -e

# @env LLM_OUTPUT=/dev/stdout The output path

# @cmd Count a batch of things.
# Counts are whole numbers.
# @option --label! The batch's label
# @option --size! <INT> How many are in it
# @option --weight <NUM> The weight of one, in grams
# @option --kind[new|used] The condition
# @option --note* Remarks on the batch
# @flag --rush Whether it is urgent
count_batch() {
    {
        printf 'label=%s\n' "$argc_label"
        printf 'size=%s\n' "$argc_size"
        printf 'weight=%s\n' "${argc_weight:-}"
        printf 'kind=%s\n' "${argc_kind:-}"
        printf 'notes=%s\n' "${argc_note[*]:-}"
        printf 'rush=%s\n' "${argc_rush:-0}"
    } >> "$LLM_OUTPUT"
}

# @cmd Report what the tally's functions see of their environment.
show_env() {
    for name in LLM_AGENT_NAME LLM_AGENT_FUNC LLM_AGENT_ROOT_DIR LLM_AGENT_CACHE_DIR LLM_ROOT_DIR \
        LLM_AGENT_RAW_JSON LLM_AGENT_VAR_TEAM LLM_AGENT_VAR_UNIT ROOT_ENV AGENT_ENV SHARED_ENV; do
        printf '%s=%s\n' "$name" "${!name}" >> "$LLM_OUTPUT"
    done
    printf 'PATH=%s\n' "$PATH" >> "$LLM_OUTPUT"
}

# @cmd The tally's instructions, made when the agent starts
_instructions() {
    printf 'You count %s for team %s.\n' "$LLM_AGENT_VAR_UNIT" "$LLM_AGENT_VAR_TEAM" >> "$LLM_OUTPUT"
}

eval "$(argc --argc-eval "$0" "$@")"
