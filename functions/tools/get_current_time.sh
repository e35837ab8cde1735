#!/usr/bin/env bash
set -e

# @describe Get the current date and time, with the time zone.
# @meta title Current time
# @meta tags time
# @meta read-only
# @meta idempotent
# @meta open-world false
# @meta example {}

main() {
    date '+%Y-%m-%d %H:%M:%S %Z (%A)' >>"$LLM_OUTPUT"
}

eval "$(argc --argc-eval "$0" "$@")"
