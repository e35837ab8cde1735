# @describe	Tags separated by a TAB.
# @option	--need! Required.
# @flag	--quiet Say less.
# @arg	file A file.
main() { :; }
