# Turns the interface description into a C string, so that the daemon serves
# exactly the IDL kept in the tree.
file(READ ${IN} text HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${text}")
file(WRITE ${OUT} "/* Generated from io.cudackpt.Process.varlink; do not edit. */\n"
  "#include \"varlink/proto.h\"\nconst char proto_idl_text[] = {${bytes} 0x00};\n")
