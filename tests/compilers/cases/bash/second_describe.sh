# @describe One.
# @describe Two.
main() { :; }
