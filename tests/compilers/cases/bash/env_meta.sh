#!/bin/bash
# @describe Environment and meta tags stay out of the schema.
# @env API_KEY! The key.
# @env REGION=eu-west-1 Where.
# @env MODE[=dry|live] How.
# @env LLM_OUTPUT=/dev/stdout
# @meta require-tools jq,curl
# @meta dotenv
# @meta timeout 45
# @meta version 1.0
# @option --query! What to search.
main() { :; }
eval "$(argc --argc-eval "$0" "$@")"
