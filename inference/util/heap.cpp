#include "inference/util/heap.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace vireo::heap {

void keepLargeAllocationsInTheHeap()
{
#if defined(__GLIBC__)
    mallopt(M_MMAP_MAX, 0);
    // Free memory at the top of the heap stays for the next step up to this much; the rest,
    // and everything after a run (releaseFreeMemory), goes back.
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

void releaseFreeMemory()
{
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
}

} // namespace vireo::heap
