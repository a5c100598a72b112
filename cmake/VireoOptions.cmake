# vireo_options: the language standard, warnings and strictness macros every target links.
add_library(vireo_options INTERFACE)
target_compile_features(vireo_options INTERFACE cxx_std_20)
set(CMAKE_CXX_EXTENSIONS OFF)
target_compile_options(vireo_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>)
target_compile_definitions(vireo_options INTERFACE
  QT_NO_CAST_FROM_ASCII QT_NO_CONTEXTLESS_CONNECT QT_NO_URL_CAST_FROM_STRING
  QT_USE_QSTRINGBUILDER QT_DISABLE_DEPRECATED_UP_TO=0x060400)
# The build machine's folders stay out of the binaries (__FILE__ in checks and asserts, debug
# info): the installed programs name source files relative to the tree they came from.
target_compile_options(vireo_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX,C>:-ffile-prefix-map=${PROJECT_SOURCE_DIR}/= -ffile-prefix-map=${PROJECT_BINARY_DIR}/=>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-ffile-prefix-map=${PROJECT_SOURCE_DIR}/= -Xcompiler=-ffile-prefix-map=${PROJECT_BINARY_DIR}/=>)

if(VIREO_WERROR)
  target_compile_options(vireo_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()

if(VIREO_SANITIZE)
  target_compile_options(vireo_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined>)
  target_link_options(vireo_options INTERFACE -fsanitize=address,undefined)
endif()
