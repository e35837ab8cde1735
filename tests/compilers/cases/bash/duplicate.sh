# @describe A name declared twice.
# @option --path One.
# @flag --path Two.
main() { :; }
