# @describe Unknown tags are warnings.
# @frobnicate yes
main() { :; }
