#!/usr/bin/env bash
# @describe Misspelt @meta keys are warnings, never silently ignored.
# @meta readonly
# @meta tag fs
# @meta symbol +
# @option --path! File to read.
main() { cat -- "$argc_path" >>"$LLM_OUTPUT"; }
