#!/usr/bin/env bash
# @describe Answer fast.
# @meta warm always
main() { :; }
