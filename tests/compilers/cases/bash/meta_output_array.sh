#!/usr/bin/env bash
# @describe The numbers from 1 to n, as a JSON array.
# @meta output-schema {"type": "array", "items": {"type": "integer"}}
# @option --n! <INT> how many
main() {
    seq -s, 1 "$argc_n" | sed 's/^/[/; s/$/]/' >> "$LLM_OUTPUT"
}
