# Where `cmake --install` and the packages put things. The layout is the same under /usr (deb,
# rpm) and in the relocatable archive, and every library path the programs follow is relative
# to the program ($ORIGIN), so nothing points back at the build machine:
#   bin/                               vireo, vireo-cli
#   lib/vireo-studio/app/              libvireo_kernels.so                  (application package)
#   lib/vireo-studio/<runtime id>/     libtorch and the NVIDIA libraries    (runtime package)
#   share/                             desktop file, metainfo, icons, MIME types, licences
# The runtime id names the torch build (torch2.11.0-cu130): runtimes of different torch
# builds install side by side, and the programs name the one they were built against.
execute_process(COMMAND "${VIREO_PYTHON}" "${PROJECT_SOURCE_DIR}/packaging/collect_runtime.py" id
  OUTPUT_VARIABLE VIREO_RUNTIME_ID OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${VIREO_TORCH_PREFIX}/../../version.py")

set(VIREO_INSTALL_BINDIR bin)
# Not lib/vireo-studio itself: CPack's .deb runs ldconfig from maintainer scripts for any
# library directly below lib/<folder>, and private libraries need no ldconfig cache.
set(VIREO_INSTALL_LIBDIR lib/vireo-studio/app)
set(VIREO_INSTALL_RUNTIMEDIR lib/vireo-studio/${VIREO_RUNTIME_ID})
set(VIREO_INSTALL_RPATH_BIN "$ORIGIN/../${VIREO_INSTALL_LIBDIR}" "$ORIGIN/../${VIREO_INSTALL_RUNTIMEDIR}")
set(VIREO_INSTALL_RPATH_LIB "$ORIGIN/../${VIREO_RUNTIME_ID}")
