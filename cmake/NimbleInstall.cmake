# Install rules: `cmake --install BUILD --prefix P` puts an application's
# view of Nimble under P (docs/install.md):
#
#   bin/      nimble, nimble-run, nimble-store, nimble-scheduler, nimble-worker
#   lib/      libnimble_runtime.so.<version> (SONAME libnimble_runtime.so.<major>),
#             libnimble_runtime.a, libnimble_fetch.so / .a (where libcurl and libsodium exist),
#             pkgconfig/nimble-runtime.pc, nimble-fetch.pc,
#             cmake/NimbleRuntime/ (find_package(NimbleRuntime) -> Nimble::runtime)
#   include/  nimble/*.h: the runtime's and the executable format's public
#             headers and the base headers they include;
#             nimble/third_party/dlpack/dlpack.h
#
# Three components, which are also the Debian packages `cpack -G DEB` makes:
# runtime (libraries, headers, nimble-run), client (the nimble CLI) and farm
# (the daemons). Included at the end of the top-level CMakeLists.txt, once
# every target exists.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(NIMBLE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/NimbleRuntime)
set(NIMBLE_DLPACK_INSTALL_DIR ${CMAKE_INSTALL_INCLUDEDIR}/nimble/third_party)

# ---- programs --------------------------------------------------------------
foreach(pair "nimble-run:runtime" "nimble:client" "nimble-compile:client" "nimble-store:farm"
             "nimble-scheduler:farm" "nimble-worker:farm")
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 program)
  list(GET pair 1 component)
  if(TARGET ${program})
    install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ${component})
  endif()
endforeach()

if(NOT TARGET nimble_runtime_shared)
  return()
endif()

# ---- libraries -------------------------------------------------------------
install(TARGETS nimble_runtime_shared
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT runtime)
install(TARGETS nimble_runtime_dist ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime)
set(NIMBLE_INSTALL_HAS_FETCH 0)
if(TARGET nimble_fetch_shared)
  set(NIMBLE_INSTALL_HAS_FETCH 1)
  # Finds libnimble_runtime.so.<major> beside itself wherever the prefix is.
  set_target_properties(nimble_fetch_shared PROPERTIES INSTALL_RPATH "$ORIGIN")
  install(TARGETS nimble_fetch_shared
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT runtime)
  install(TARGETS nimble_fetch ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime)
endif()

# ---- headers ---------------------------------------------------------------
# Every runtime header and every header of the executable format (format/:
# the builder, the instruction set, the kernel ABI, which libnimble_runtime
# holds), and the base headers they include (followed transitively), so the
# installed set compiles on its own; no other component's headers.
file(GLOB nimble_public_headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/runtime/include/nimble/*.h
     ${PROJECT_SOURCE_DIR}/format/include/nimble/*.h)
if(NOT NIMBLE_INSTALL_HAS_FETCH)
  list(FILTER nimble_public_headers EXCLUDE REGEX "/fetch\\.h$")
endif()
set(nimble_header_search base/include)
set(nimble_header_queue ${nimble_public_headers})
while(nimble_header_queue)
  list(POP_FRONT nimble_header_queue header)
  file(STRINGS ${header} includes REGEX "^#include \"nimble/[a-z_0-9]+\\.h\"")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^#include \"nimble/([a-z_0-9]+\\.h)\".*" "\\1" name "${line}")
    foreach(dir IN LISTS nimble_header_search)
      set(candidate ${PROJECT_SOURCE_DIR}/${dir}/nimble/${name})
      if(EXISTS ${candidate} AND NOT candidate IN_LIST nimble_public_headers)
        list(APPEND nimble_public_headers ${candidate})
        list(APPEND nimble_header_queue ${candidate})
      endif()
    endforeach()
  endforeach()
endwhile()
install(FILES ${nimble_public_headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/nimble
        COMPONENT runtime)
# dlpack.h (Debian's libdlpack-dev, copied into the build tree) goes into a
# directory of its own so it cannot clash with another copy on the system;
# the .pc file and the CMake package add it to the include path.
install(FILES ${CMAKE_BINARY_DIR}/include/dlpack/dlpack.h
        DESTINATION ${NIMBLE_DLPACK_INSTALL_DIR}/dlpack COMPONENT runtime)

# ---- pkg-config ------------------------------------------------------------
# Written at install time, so that `cmake --install --prefix P` (and cpack's
# staging) get their own prefix rather than the one configured.
set(NIMBLE_PC_LIBDIR ${CMAKE_INSTALL_LIBDIR})
set(NIMBLE_PC_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR})
set(nimble_pc_files nimble-runtime)
if(NIMBLE_INSTALL_HAS_FETCH)
  list(APPEND nimble_pc_files nimble-fetch)
endif()
foreach(pc IN LISTS nimble_pc_files)
  # Fill everything known now; @NIMBLE_PC_PREFIX@ stays for install time.
  set(NIMBLE_PC_PREFIX "@NIMBLE_PC_PREFIX@")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in ${CMAKE_BINARY_DIR}/pkgconfig/${pc}.pc.in @ONLY)
  install(CODE "
    set(NIMBLE_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
    configure_file(\"${CMAKE_BINARY_DIR}/pkgconfig/${pc}.pc.in\"
                   \"${CMAKE_BINARY_DIR}/pkgconfig/install/${pc}.pc\" @ONLY)
    file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig\"
         TYPE FILE FILES \"${CMAKE_BINARY_DIR}/pkgconfig/install/${pc}.pc\")
  " COMPONENT runtime)
endforeach()

# ---- CMake package ---------------------------------------------------------
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/NimbleRuntimeConfig.cmake.in
  ${CMAKE_BINARY_DIR}/cmake/NimbleRuntimeConfig.cmake
  INSTALL_DESTINATION ${NIMBLE_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_INCLUDEDIR NIMBLE_DLPACK_INSTALL_DIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/NimbleRuntimeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake/NimbleRuntimeConfig.cmake
              ${CMAKE_BINARY_DIR}/cmake/NimbleRuntimeConfigVersion.cmake
        DESTINATION ${NIMBLE_INSTALL_CMAKEDIR} COMPONENT runtime)

# ---- Debian packages (cpack -G DEB) ----------------------------------------
set(CPACK_PACKAGE_NAME nimble)
set(CPACK_PACKAGE_VENDOR "Nimble")
set(CPACK_PACKAGE_CONTACT "Nimble maintainers <nimble@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Nimble: a compiler service for dynamic neural networks")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime client farm)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Stripped, as Debian ships programs: a RelWithDebInfo build's debug info
# is a fifth of nimble-compile and most of the libraries.
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME nimble-runtime)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
    "Nimble runtime: libnimble_runtime (shared and static), headers, pkg-config and CMake files, nimble-run")
set(CPACK_DEBIAN_CLIENT_PACKAGE_NAME nimble-client)
set(CPACK_COMPONENT_CLIENT_DESCRIPTION "Nimble client: the nimble command (compile, run, inspect, submit, fetch)")
# nimble compile links kernels with the target's GNU ld, run as a child
# process (ld.lld-16 where that is missing).
set(CPACK_DEBIAN_CLIENT_PACKAGE_DEPENDS "binutils-x86-64-linux-gnu, binutils-aarch64-linux-gnu")
set(CPACK_DEBIAN_FARM_PACKAGE_NAME nimble-farm)
set(CPACK_COMPONENT_FARM_DESCRIPTION "Nimble compile farm: nimble-store, nimble-scheduler, nimble-worker")
# A worker runs `nimble compile` (the nimble next to it); the scheduler keeps
# its state in Redis.
set(CPACK_DEBIAN_FARM_PACKAGE_DEPENDS "nimble-client (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_FARM_PACKAGE_RECOMMENDS "redis-server")
include(CPack)
