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
if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST} AND NOT TORCH_CUDA_ARCH_LIST)
  set(TORCH_CUDA_ARCH_LIST "8.9;9.0")
endif()
find_package(Torch REQUIRED)
# TORCH_CXX_FLAGS carries the ABI macro; apply it through a target, not globally.
add_library(vireo_torch INTERFACE)
target_link_libraries(vireo_torch INTERFACE ${TORCH_LIBRARIES})
target_include_directories(vireo_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
separate_arguments(_vireo_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
target_compile_options(vireo_torch INTERFACE $<$<COMPILE_LANGUAGE:CXX,CUDA>:${_vireo_torch_flags}>)
