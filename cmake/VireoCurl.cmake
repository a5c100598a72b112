# vireo_curl: libcurl, linked so that the programs ask for no libcurl symbol version.
# Debian and Ubuntu build libcurl with versioned symbols (CURL_OPENSSL_4); Fedora builds it
# without. A program linked against Debian's names CURL_OPENSSL_4, and rpm will not install
# it on Fedora ("nothing provides libcurl.so.4(CURL_OPENSSL_4)(64bit)"). The link goes through
# an unversioned stand-in with the same soname and the same function names, made here at
# configure time and used only by the linker: at run time the references bind to the
# distribution's real libcurl.so.4 (the stand-in's folder is on no search path).
find_package(CURL REQUIRED)
get_target_property(_curl_lib CURL::libcurl IMPORTED_LOCATION)
if(NOT _curl_lib)
  get_target_property(_curl_lib CURL::libcurl IMPORTED_LOCATION_RELEASE)
endif()
get_filename_component(_curl_real "${_curl_lib}" REALPATH)
execute_process(COMMAND readelf -dW "${_curl_real}" OUTPUT_VARIABLE _dyn COMMAND_ERROR_IS_FATAL ANY)
if(NOT _dyn MATCHES "\\(SONAME\\)[^[]*\\[(libcurl\\.so\\.[0-9]+)\\]")
  message(FATAL_ERROR "${_curl_real}: no libcurl soname in its dynamic section")
endif()
set(_curl_soname "${CMAKE_MATCH_1}")
execute_process(COMMAND nm -D --defined-only "${_curl_real}" OUTPUT_VARIABLE _syms COMMAND_ERROR_IS_FATAL ANY)
string(REGEX MATCHALL "[0-9a-f]+ T [A-Za-z_][A-Za-z0-9_]*" _syms "${_syms}")
set(_stub_dir "${CMAKE_BINARY_DIR}/curl-link")
set(_stub_c "/* Generated from ${_curl_real}: the linker's stand-in for ${_curl_soname}; never loaded. */\n")
foreach(_s IN LISTS _syms)
  string(REGEX REPLACE ".* T " "" _s "${_s}")
  string(APPEND _stub_c "void ${_s}(void) {}\n")
endforeach()
file(MAKE_DIRECTORY "${_stub_dir}")
file(WRITE "${_stub_dir}/curl-stub.c" "${_stub_c}")
execute_process(COMMAND "${CMAKE_C_COMPILER}" -shared -fPIC -w -Wl,-soname,${_curl_soname}
    -o "${_stub_dir}/libcurl.so" "${_stub_dir}/curl-stub.c" COMMAND_ERROR_IS_FATAL ANY)
add_library(vireo_curl INTERFACE)
target_include_directories(vireo_curl SYSTEM INTERFACE ${CURL_INCLUDE_DIRS})
target_link_libraries(vireo_curl INTERFACE "-L${_stub_dir}" -lcurl)
set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_curl_real}")
