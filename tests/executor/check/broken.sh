#!/usr/bin/env bash
# @describe A tool whose tags are malformed.
# @option --count[=a|b <INT> How many.
# @meta require-tools

main() {
    rm -f -- "$argc_count"
}

eval "$(argc --argc-eval "$0" "$@")"
