# @describe
# @option --path The directory.
main() { :; }
