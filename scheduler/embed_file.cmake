# Writes a C file defining NAME[] (the bytes of IN, NUL-terminated) and
# NAME_len (their count without the NUL): cmake -DIN=... -DOUT=... -DNAME=... -P embed_file.cmake
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}.tmp" "/* Generated from ${IN} by embed_file.cmake. */\n"
     "const unsigned char ${NAME}[] = {\n${bytes}0x00};\n"
     "const unsigned long ${NAME}_len = ${len};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
