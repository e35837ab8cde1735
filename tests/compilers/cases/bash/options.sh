# @describe Every @option form.
# @option --plain A plain optional string.
# @option --needed! A required string.
# @option -s --short-alias With a short alias.
# @option --many* Zero or more.
# @option --some+ One or more.
# @option --listed*, Comma separated values.
# @option --count <INT> An integer.
# @option --ratio <NUM> A number.
# @option --file <FILE> Other notations stay strings.
# @option --nums* <INT> Many integers.
# @option --undocumented
main() { :; }
