#pragma once

// What ran where, counted where it ran: each GEMM, attention and dequantization call site
// records the path it took into the recording of its thread, so the report after a
// generation is what happened (a cuDNN refusal, a weight that could not take the FP8 path),
// not what the load expected. Without a live Recording on the thread, recording does nothing.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace vireo::paths {

struct Counts {
    // site ("GEMM", "attention", "dequantize") -> path -> calls
    std::map<std::string, std::map<std::string, std::int64_t>> bySite;
    // "site: path instead of the planned one (reason)" -> calls
    std::map<std::string, std::int64_t> fallbacks;

    bool empty() const { return bySite.empty() && fallbacks.empty(); }
    void merge(const Counts& other);
    // "GEMM: 240 FP8 tensor-core GEMM, 96 dense GEMM (bf16); attention: ..."
    std::string text() const;
    // One sentence per fallback with its count.
    std::vector<std::string> warnings() const;
};

void record(std::string_view site, std::string_view path, std::int64_t calls = 1);
// A call that took a slower path than the one planned for it, with the reason: the report
// shows it as a warning with its count (the path it took is recorded where it runs).
void recordFallback(std::string_view site, std::string_view path, std::string_view reason);
// Adds counts recorded elsewhere (a CUDA graph's capture, replayed) to this thread's recording.
void replay(const Counts& counts);
// Whether anything records on this thread now (callers skip building texts when not).
bool active();

// Records this thread's calls while it lives; recordings nest, and an inner one keeps its
// calls to itself (a graph capture records what each replay will run, not a run).
class Recording {
public:
    Recording();
    ~Recording();
    Recording(const Recording&) = delete;
    Recording& operator=(const Recording&) = delete;

    const Counts& counts() const { return m_counts; }
    Counts take();

private:
    friend void record(std::string_view, std::string_view, std::int64_t);
    friend void recordFallback(std::string_view, std::string_view, std::string_view);
    friend void replay(const Counts&);
    Counts m_counts;
    Recording* m_previous;
};

}  // namespace vireo::paths
