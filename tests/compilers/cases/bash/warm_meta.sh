#!/usr/bin/env bash
# @describe Answer fast.
# @meta warm
# @option --name Who.
main() { echo "hi $argc_name" >> "$LLM_OUTPUT"; }
