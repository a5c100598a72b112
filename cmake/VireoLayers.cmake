# The layers of docs/architecture.md, enforced by the compiler: no target sees the repository
# root. Each layer has an include folder in the build tree holding only a link to its own
# sources (layers/core/core -> core/), given to the layer's targets and, through them, to the
# layers allowed to use it; inference's public folder links only the facade's torch-free
# headers (the same list as INFERENCE_PUBLIC in tests/build/test_layers.py, which also checks
# the rules no include path can express). A forbidden #include is a compile error.
set(VIREO_LAYERS_DIR "${PROJECT_BINARY_DIR}/layers")

function(vireo_link_into link target)
  get_filename_component(dir "${link}" DIRECTORY)
  file(MAKE_DIRECTORY "${dir}")
  if(NOT EXISTS "${link}")
    file(CREATE_LINK "${target}" "${link}" SYMBOLIC)
  endif()
endfunction()

foreach(layer base kernels inference media core ui app)
  vireo_link_into("${VIREO_LAYERS_DIR}/${layer}/${layer}" "${PROJECT_SOURCE_DIR}/${layer}")
endforeach()

set(VIREO_INFERENCE_PUBLIC_HEADERS
  facade/generator.h util/result.h util/format.h util/text.h util/jsonlimits.h util/log.h inspect/modelinspector.h)
foreach(header IN LISTS VIREO_INFERENCE_PUBLIC_HEADERS)
  vireo_link_into("${VIREO_LAYERS_DIR}/inference-public/inference/${header}" "${PROJECT_SOURCE_DIR}/inference/${header}")
endforeach()

# vireo_layer_includes(target scope layer...): the include folders of these layers.
function(vireo_layer_includes target scope)
  foreach(layer IN LISTS ARGN)
    target_include_directories(${target} ${scope} "${VIREO_LAYERS_DIR}/${layer}")
  endforeach()
endfunction()

# What media/ and core/ may see of inference/: the facade's headers and base/ (which they include).
add_library(vireo_inference_public INTERFACE)
vireo_layer_includes(vireo_inference_public INTERFACE inference-public base)
