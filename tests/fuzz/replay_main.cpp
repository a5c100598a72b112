// Runs a libFuzzer target over files without libFuzzer: the seeds and every input a fuzzing
// run found to crash (tests/fuzz/regressions/<target>/), as a ctest in the main and the
// sanitizer builds. Usage: replay_<target> FILE_OR_FOLDER...
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

int replay(const std::filesystem::path& file)
{
    std::ifstream in(file, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // A copy of exactly the input's size, so a read past its end is a sanitizer error.
    std::vector<std::uint8_t> exact(bytes.begin(), bytes.end());
    LLVMFuzzerTestOneInput(exact.data(), exact.size());
    return 1;
}

}  // namespace

int main(int argc, char** argv)
{
    int inputs = 0;
    for (int i = 1; i < argc; ++i) {
        const std::filesystem::path arg(argv[i]);
        std::error_code ec;
        if (std::filesystem::is_directory(arg, ec)) {
            std::vector<std::filesystem::path> files;
            for (std::filesystem::directory_iterator it(arg, ec), end; !ec && it != end; it.increment(ec))
                if (it->is_regular_file(ec) && it->path().filename().string()[0] != '.')
                    files.push_back(it->path());
            std::sort(files.begin(), files.end());
            for (const auto& f : files)
                inputs += replay(f);
        } else if (std::filesystem::is_regular_file(arg, ec)) {
            inputs += replay(arg);
        }
    }
    std::printf("replayed %d inputs without a crash\n", inputs);
    return inputs > 0 ? 0 : 1;
}
