# ctest script: the stripped runtime library stays under a size limit.
#   cmake -DLIB=path -DSTRIP=strip -DMAX=bytes -DOUT=tmpfile -P check_library_size.cmake
execute_process(COMMAND ${STRIP} -o ${OUT} ${LIB} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${STRIP} failed on ${LIB}")
endif()
file(SIZE ${OUT} size)
file(REMOVE ${OUT})
if(size GREATER MAX)
  message(FATAL_ERROR "stripped ${LIB} is ${size} bytes, over the limit of ${MAX}")
endif()
message(STATUS "stripped ${LIB}: ${size} bytes (limit ${MAX})")
