# CMake toolchain file: cross-compile for 64-bit ARM Linux with Debian's
# gcc-aarch64-linux-gnu, and run the test binaries under qemu-aarch64.
#
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
#         -DNIMBLE_RUNTIME_ONLY=ON
#
# Libraries for the target come from Debian multiarch (e.g. check:arm64,
# installed under /usr/lib/aarch64-linux-gnu); the C library from
# libc6-dev-arm64-cross under /usr/aarch64-linux-gnu.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(NIMBLE_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${NIMBLE_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${NIMBLE_CROSS_TRIPLE}-g++)

# Headers and libraries of the target only; programs (python3, cmake's own
# tools) from the build machine.
set(CMAKE_FIND_ROOT_PATH /usr/${NIMBLE_CROSS_TRIPLE} /usr/lib/${NIMBLE_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config must describe arm64 packages, never the host's: look only in
# the multiarch directory, and do not prefix paths with a sysroot (Debian's
# multiarch .pc files already name /usr/lib/aarch64-linux-gnu).
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${NIMBLE_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")

# ctest runs target binaries through qemu-user; -L points the emulator at
# the target's dynamic loader and libraries (libc6-arm64-cross).
#
# LD_LIBRARY_PATH keeps that loader and its libc together. Once Debian's
# multiarch libc6:arm64 is installed (check:arm64 pulls it in), the loader's
# default search finds /lib/aarch64-linux-gnu/libc.so.6 on the host first,
# a different build of glibc than the cross loader; that pairing hangs in
# fork() (seen with qemu 7.2: every Check test in fork mode timed out).
set(CMAKE_CROSSCOMPILING_EMULATOR
    qemu-aarch64;-L;/usr/${NIMBLE_CROSS_TRIPLE};-E;LD_LIBRARY_PATH=/usr/${NIMBLE_CROSS_TRIPLE}/lib)
