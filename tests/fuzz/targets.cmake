# The fuzz targets and the sources each one compiles: only torch-free, Qt-free, curl-free
# files, so the libFuzzer build (tests/fuzz/CMakeLists.txt, clang) and the replay tests of the
# main build (tests/CMakeLists.txt) use the same lists. Paths relative to the repository root.
set(VIREO_FUZZ_COMMON inference/util/result.cpp inference/util/format.cpp inference/util/jsonlimits.cpp inference/util/text.cpp)
set(VIREO_FUZZ_TENSORFILE inference/tensorfile/mappedfile.cpp inference/tensorfile/dtype.cpp inference/tensorfile/tensorinfo.cpp)

set(VIREO_FUZZ_TARGETS safetensors gguf hubjson config tokenizer inspect recipe media)
set(VIREO_FUZZ_SOURCES_safetensors ${VIREO_FUZZ_TENSORFILE} inference/tensorfile/safetensors.cpp)
set(VIREO_FUZZ_SOURCES_gguf ${VIREO_FUZZ_TENSORFILE} inference/tensorfile/gguf.cpp)
set(VIREO_FUZZ_SOURCES_hubjson core/hub/hubjson.cpp)
set(VIREO_FUZZ_SOURCES_config inference/models/ltx2/ltx2config.cpp)
set(VIREO_FUZZ_SOURCES_recipe core/output/recipe.cpp)
set(VIREO_FUZZ_SOURCES_tokenizer inference/text/tokenizer.cpp inference/text/unicode.cpp)
# The start-media readers link the private FFmpeg (scripts/ffmpeg.sh), which the fuzz build
# takes from .cache/ffmpeg and the main builds from their vireo_media target.
set(VIREO_FUZZ_SOURCES_media media/mediareader.cpp media/imageops.cpp media/imageheader.cpp)
set(VIREO_FUZZ_SOURCES_inspect ${VIREO_FUZZ_TENSORFILE} inference/tensorfile/safetensors.cpp inference/tensorfile/gguf.cpp
  inference/tensorfile/modelsource.cpp inference/inspect/modelinspector.cpp)
