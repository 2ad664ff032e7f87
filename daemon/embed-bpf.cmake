# Turns the compiled BPF object into a C array, so that the daemon carries
# the very program built from procindex.bpf.c and needs no file of its own.
file(READ ${IN} text HEX)
string(LENGTH "${text}" hexlen)
math(EXPR len "${hexlen} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${text}")
file(WRITE ${OUT} "/* Generated from procindex.bpf.c; do not edit. */\n"
  "#include <stddef.h>\n"
  "extern const unsigned char procindex_bpf_object[];\n"
  "extern const size_t procindex_bpf_object_len;\n"
  "const unsigned char procindex_bpf_object[] __attribute__((aligned(8))) = {${bytes}};\n"
  "const size_t procindex_bpf_object_len = ${len};\n")
