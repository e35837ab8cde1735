#!/usr/bin/env bash
# @describe Work.
# @meta task optional
# @meta task required
main() { :; }
