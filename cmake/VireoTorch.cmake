# libtorch comes from the torch wheel of the project's virtual environment (Debian's libtorch
# is too old: no float8, no SDPA). Ask that Python where the wheel keeps its CMake config.
if(NOT VIREO_PYTHON)
  if(EXISTS "${PROJECT_SOURCE_DIR}/.venv/bin/python")
    set(VIREO_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH "" FORCE)
  else()
    find_program(VIREO_PYTHON_FOUND NAMES python3 python REQUIRED)
    set(VIREO_PYTHON "${VIREO_PYTHON_FOUND}" CACHE FILEPATH "" FORCE)
  endif()
endif()
execute_process(
  COMMAND "${VIREO_PYTHON}" -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
  OUTPUT_VARIABLE VIREO_TORCH_PREFIX OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE _vireo_torch_rc ERROR_QUIET)
if(NOT _vireo_torch_rc EQUAL 0)
  message(FATAL_ERROR "${VIREO_PYTHON} cannot import torch: run scripts/bootstrap.sh to create the environment")
endif()
list(APPEND CMAKE_PREFIX_PATH "${VIREO_TORCH_PREFIX}")
# The wheel's config looks for the CUDA toolkit itself; keep it quiet about the optional
# pieces (nvToolsExt, cuDNN frontend) the studio does not use.
set(CAFFE2_USE_CUDNN OFF CACHE BOOL "")
# The CUDA architectures Vireo's kernels are built for: every one the packaged libtorch carries
# (read from the wheel, so a user's GPU that runs torch runs Vireo's kernels too), Ada (sm_89,
# for its FP8 conversion instructions; torch runs Ada on its sm_86 code) and PTX of the newest,
# which the driver compiles for GPUs that come after this build. torch's CMake config turns
# TORCH_CUDA_ARCH_LIST into -gencode flags (and sets CMAKE_CUDA_ARCHITECTURES OFF).
execute_process(
  COMMAND "${VIREO_PYTHON}" -c "import torch; print(getattr(torch._C, '_cuda_getArchFlags', lambda: '')() or '')"
  OUTPUT_VARIABLE _vireo_wheel_archs OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
string(REGEX MATCHALL "sm_[0-9]+" _vireo_wheel_archs "${_vireo_wheel_archs}")
set(_vireo_archs 89)
foreach(a IN LISTS _vireo_wheel_archs)
  string(REPLACE "sm_" "" a "${a}")
  list(APPEND _vireo_archs ${a})
endforeach()
list(REMOVE_DUPLICATES _vireo_archs)
list(SORT _vireo_archs COMPARE NATURAL)
set(VIREO_CUDA_ARCHS "${_vireo_archs}" CACHE INTERNAL "Compute capabilities (x10) the kernels are built for")
if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST} AND NOT TORCH_CUDA_ARCH_LIST)
  set(TORCH_CUDA_ARCH_LIST "")
  list(LENGTH _vireo_archs _n)
  set(_i 0)
  foreach(a IN LISTS _vireo_archs)
    math(EXPR _major "${a} / 10")
    math(EXPR _minor "${a} % 10")
    math(EXPR _i "${_i} + 1")
    if(_i EQUAL _n)
      list(APPEND TORCH_CUDA_ARCH_LIST "${_major}.${_minor}+PTX")
    else()
      list(APPEND TORCH_CUDA_ARCH_LIST "${_major}.${_minor}")
    endif()
  endforeach()
endif()
message(STATUS "Vireo: CUDA kernels for ${TORCH_CUDA_ARCH_LIST} (the torch wheel carries ${_vireo_wheel_archs})")
find_package(Torch REQUIRED)
# TORCH_CXX_FLAGS carries the ABI macro; apply it through a target, not globally.
add_library(vireo_torch INTERFACE)
target_link_libraries(vireo_torch INTERFACE ${TORCH_LIBRARIES})
target_include_directories(vireo_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
separate_arguments(_vireo_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
target_compile_options(vireo_torch INTERFACE $<$<COMPILE_LANGUAGE:CXX,CUDA>:${_vireo_torch_flags}>)
