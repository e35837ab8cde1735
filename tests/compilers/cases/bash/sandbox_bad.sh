#!/usr/bin/env bash
# @describe Bad policy values.
# @meta network none
# @meta network all
# @meta writes etc
# @meta file-size huge
main() { :; }
