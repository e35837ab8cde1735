# @option --path The directory.
main() { :; }
