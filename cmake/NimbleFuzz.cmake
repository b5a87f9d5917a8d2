# libFuzzer targets of the network-facing parsers (docs/reliability.md,
# "Fuzzing"), built with clang-16 whatever compiler builds the rest, as
# custom targets outside `all`: `cmake --build B --target fuzz_NAME` writes
# B/<dir>/fuzz_NAME. bench/fuzz/run.sh builds and runs them; tests/fuzz
# replays their corpora through the same fuzz_*.c in every build.
#
#   nimble_add_fuzz_target(NAME
#     SOURCES  files (relative to the calling directory, or absolute)
#     INCLUDES directories
#     PKGS     imported pkg-config targets (PkgConfig::JANSSON ...) whose
#              include directories and libraries it needs
#     BASE)    also compile nimble_base's sources in
#
# Everything listed is compiled with -fsanitize=fuzzer,address,undefined
# (-fno-sanitize-recover=all: UB stops the run), so the fuzzer sees the
# branches of our code; system libraries (jansson, libmicrohttpd) are linked
# as installed, uninstrumented.
function(nimble_add_fuzz_target name)
  cmake_parse_arguments(F "BASE" "" "SOURCES;INCLUDES;PKGS" ${ARGN})
  find_program(NIMBLE_CLANG16 NAMES clang-16)
  if(NOT NIMBLE_CLANG16 OR CMAKE_CROSSCOMPILING)
    return()
  endif()
  set(sources)
  foreach(src IN LISTS F_SOURCES)
    get_filename_component(abs ${src} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    list(APPEND sources ${abs})
  endforeach()
  if(F_BASE)
    get_target_property(base_sources nimble_base_objects SOURCES)
    list(TRANSFORM base_sources PREPEND ${PROJECT_SOURCE_DIR}/base/)
    list(APPEND sources ${base_sources})
  endif()
  set(flags -I${PROJECT_SOURCE_DIR}/base/include -I${CMAKE_BINARY_DIR}/include)
  foreach(dir IN LISTS F_INCLUDES)
    list(APPEND flags -I${dir})
  endforeach()
  set(libs)
  foreach(pkg IN LISTS F_PKGS)
    get_target_property(dirs ${pkg} INTERFACE_INCLUDE_DIRECTORIES)
    if(dirs)
      foreach(dir IN LISTS dirs)
        list(APPEND flags -I${dir})
      endforeach()
    endif()
    get_target_property(pkg_libs ${pkg} INTERFACE_LINK_LIBRARIES)
    if(pkg_libs)
      list(APPEND libs ${pkg_libs})
    endif()
  endforeach()
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${name})
  # Headers too (Makefile generators; Ninja rebuilds on the sources only).
  set(implicit)
  foreach(src IN LISTS sources)
    list(APPEND implicit C ${src})
  endforeach()
  add_custom_command(OUTPUT ${out}
    COMMAND ${NIMBLE_CLANG16} -std=c11 -g -O1 -D_GNU_SOURCE -fno-omit-frame-pointer -Wall -Wextra
            -Wno-unused-parameter -Wno-missing-field-initializers
            -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
            ${flags} ${sources} -o ${out} ${libs} -lm -lpthread
    DEPENDS ${sources}
    IMPLICIT_DEPENDS ${implicit}
    COMMENT "Building the libFuzzer target ${name} with clang-16"
    VERBATIM)
  add_custom_target(${name} DEPENDS ${out})
endfunction()
