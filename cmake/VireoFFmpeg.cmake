# vireo_ffmpeg: the FFmpeg libraries the media layer links.
#   private  the static build from scripts/ffmpeg.sh (bootstrap.sh makes it): what the packages
#            ship, because no FFmpeg soname is common to Debian, Ubuntu and Fedora. Its symbols
#            stay local to each program, so the distribution's FFmpeg that Qt Multimedia loads
#            for playback never binds to it (or it to that).
#   system   the distribution's shared libraries through pkg-config (a developer's build
#            without the private one; packaging/make-packages.sh refuses it)
#   (none)   neither found: MP4 output is left out (the GPU machine's inference-only build)
# VIREO_FFMPEG_KIND says which was taken.
set(VIREO_FFMPEG_ROOT "${PROJECT_SOURCE_DIR}/.cache/ffmpeg" CACHE PATH
  "Prefix of the private static FFmpeg built by scripts/ffmpeg.sh")
set(VIREO_FFMPEG_KIND "")
if(EXISTS "${VIREO_FFMPEG_ROOT}/.vireo-ffmpeg")
  # A rebuilt FFmpeg (new Debian security release) re-runs this.
  set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${VIREO_FFMPEG_ROOT}/.vireo-ffmpeg")
  find_library(VIREO_X264_STATIC NAMES libx264.a REQUIRED)
  find_package(ZLIB REQUIRED)
  find_package(Threads REQUIRED)
  add_library(vireo_ffmpeg INTERFACE)
  target_include_directories(vireo_ffmpeg SYSTEM INTERFACE "${VIREO_FFMPEG_ROOT}/include")
  set(_libs)
  foreach(_lib avformat avcodec swresample swscale avutil)
    list(APPEND _libs "${VIREO_FFMPEG_ROOT}/lib/lib${_lib}.a")
  endforeach()
  target_link_libraries(vireo_ffmpeg INTERFACE ${_libs} "${VIREO_X264_STATIC}" ZLIB::ZLIB Threads::Threads m atomic ${CMAKE_DL_LIBS})
  target_link_options(vireo_ffmpeg INTERFACE
    "LINKER:--exclude-libs,libavformat.a:libavcodec.a:libswresample.a:libswscale.a:libavutil.a:libx264.a")
  file(READ "${VIREO_FFMPEG_ROOT}/.vireo-ffmpeg" _stamp)
  string(STRIP "${_stamp}" _stamp)
  set(VIREO_FFMPEG_KIND private)
  message(STATUS "Vireo: FFmpeg private, static (${_stamp}) from ${VIREO_FFMPEG_ROOT}")
else()
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(FFMPEG IMPORTED_TARGET libavformat libavcodec libavutil libswscale libswresample)
  endif()
  if(FFMPEG_FOUND)
    add_library(vireo_ffmpeg INTERFACE)
    target_link_libraries(vireo_ffmpeg INTERFACE PkgConfig::FFMPEG)
    set(VIREO_FFMPEG_KIND system)
    message(STATUS "Vireo: FFmpeg from the system (${FFMPEG_libavcodec_VERSION}); scripts/ffmpeg.sh builds the private one packages need")
  else()
    message(STATUS "Vireo: FFmpeg not found (neither ${VIREO_FFMPEG_ROOT} nor pkg-config); MP4 output is left out")
  endif()
endif()
set(VIREO_FFMPEG_KIND_USED "${VIREO_FFMPEG_KIND}" CACHE INTERNAL "Which FFmpeg the media layer links (packaging/make-packages.sh reads it)")
