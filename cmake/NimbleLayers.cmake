# The include layers (docs/architecture.md): the target include_layers, part
# of `all`, runs scripts/check_include_layers.py over every library source
# whenever one of them, the table or the script changes, so an #include the
# table does not allow fails the build, naming the file, the line and the
# rule. tests/layers runs the same check (and checks the checker) in ctest.
find_program(NIMBLE_PYTHON3 NAMES python3)
if(NOT NIMBLE_PYTHON3)
  message(WARNING "python3 not found: the include layers of docs/architecture.md are not checked")
  return()
endif()
set(nimble_layers_script ${PROJECT_SOURCE_DIR}/scripts/check_include_layers.py)
set(nimble_layers_doc ${PROJECT_SOURCE_DIR}/docs/architecture.md)
# The folders the table owns come from the table itself; editing it
# reconfigures, and the glob sees new files on every build.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${nimble_layers_doc} ${nimble_layers_script})
execute_process(COMMAND ${NIMBLE_PYTHON3} ${nimble_layers_script} --root ${PROJECT_SOURCE_DIR} --list-dirs
                OUTPUT_VARIABLE nimble_layer_dirs RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "scripts/check_include_layers.py cannot read the table of docs/architecture.md")
endif()
string(REPLACE "\n" ";" nimble_layer_dirs "${nimble_layer_dirs}")
set(nimble_layer_sources)
foreach(dir IN LISTS nimble_layer_dirs)
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${dir}/*.c ${PROJECT_SOURCE_DIR}/${dir}/*.h)
  list(APPEND nimble_layer_sources ${sources})
endforeach()
set(nimble_layers_stamp ${CMAKE_BINARY_DIR}/include_layers.stamp)
add_custom_command(OUTPUT ${nimble_layers_stamp}
  COMMAND ${NIMBLE_PYTHON3} ${nimble_layers_script} --root ${PROJECT_SOURCE_DIR}
  COMMAND ${CMAKE_COMMAND} -E touch ${nimble_layers_stamp}
  DEPENDS ${nimble_layers_script} ${nimble_layers_doc} ${nimble_layer_sources}
  COMMENT "Checking every #include against the layers of docs/architecture.md"
  VERBATIM)
add_custom_target(include_layers ALL DEPENDS ${nimble_layers_stamp})
