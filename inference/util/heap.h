#pragma once

#include <cstdint>

namespace vireo::heap {

// Inference on the CPU allocates and frees the same large temporaries over and over
// (convolution column buffers of hundreds of MB, attention scores). glibc serves every
// allocation above its mmap threshold (at most 32 MiB) from a fresh mapping, so each use pays
// a page fault per 4 KiB; keeping them in the heap, where freed memory is reused, halved the
// video decode phase of `bench generate` (medium). Call once, first thing in main(). A no-op
// on other C libraries.
void keepLargeAllocationsInTheHeap();

// Hands free heap memory back to the system: after a component is released and after a run,
// so what a generation used does not stay resident while the studio waits.
void releaseFreeMemory();

// The process's resident memory now and its peak since start or the last reset (Linux:
// /proc/self/status VmRSS and VmHWM), in bytes; -1 where they cannot be read.
std::int64_t residentBytes();
std::int64_t peakResidentBytes();
// Resets the peak to what is resident now (Linux 4.0+: clear_refs 5); false where it cannot.
bool resetPeakResident();

}  // namespace vireo::heap
