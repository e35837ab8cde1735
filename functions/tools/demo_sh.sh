#!/usr/bin/env bash
set -euo pipefail

# @describe A demonstration Bash tool: every argc tag toolexec understands.
# It writes back each value it received, so you can see how arguments arrive.
# @option --text! Any text; it arrives exactly as sent.
# @option -c --count=1 <INT> How many times to repeat the text.
# @option --ratio <NUM> A number, echoed as is.
# @option --tags* Labels, one array element each.
# @option --csv*, Values that may also be given as "a,b,c".
# @option --mood[=calm|busy|sleepy] One of a fixed set of moods.
# @option --day=`_today` Defaults to today's date, computed when the tool runs.
# @option --color[`_colors`] One of the colours printed by a helper function.
# @flag -l --loud Shout the text in capitals.
# @arg words* Extra words, passed to main as positional arguments.
# @env DEMO_GREETING=hello A greeting taken from the environment.
# @meta require-tools date
# @meta title Bash demonstration
# @meta tags demo
# @meta read-only
# @meta open-world false
# @meta example {"text": "hello", "count": 2, "tags": ["a", "b"]}

_today() { date +%F; }
_colors() { printf '%s\n' red green blue; }

main() {
    local text=$argc_text
    if [[ -n ${argc_loud:-} ]]; then
        text=${text^^}
    fi
    {
        printf '%s:' "$DEMO_GREETING"
        for ((i = 0; i < argc_count; i++)); do printf ' %s' "$text"; done
        printf '\nratio=%s mood=%s day=%s color=%s\n' "${argc_ratio:-}" "$argc_mood" "$argc_day" "${argc_color:-}"
        printf 'tags=%s csv=%s words=%s\n' "${argc_tags[*]:-}" "${argc_csv[*]:-}" "$*"
        printf 'tool=%s call=%s\n' "$LLM_TOOL_NAME" "$LLM_TOOL_CALL_ID"
    } >>"$LLM_OUTPUT"
}

eval "$(argc --argc-eval "$0" "$@")"
