#!/usr/bin/env bash
set -e

# @describe Get the current date and time, with the time zone.

main() {
    date '+%Y-%m-%d %H:%M:%S %Z (%A)' >>"$LLM_OUTPUT"
}

eval "$(argc --argc-eval "$0" "$@")"
