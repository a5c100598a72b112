#include "inference/util/result.h"

namespace vireo {

const char* errorCodeName(ErrorCode code)
{
    switch (code) {
    case ErrorCode::InvalidArgument: return "invalid-argument";
    case ErrorCode::NotFound: return "not-found";
    case ErrorCode::PermissionDenied: return "permission-denied";
    case ErrorCode::Io: return "io";
    case ErrorCode::Truncated: return "truncated";
    case ErrorCode::InvalidFormat: return "invalid-format";
    case ErrorCode::Unsupported: return "unsupported";
    case ErrorCode::OutOfMemory: return "out-of-memory";
    case ErrorCode::DeviceFault: return "device-fault";
    case ErrorCode::Cancelled: return "cancelled";
    case ErrorCode::Internal: return "internal";
    }
    return "internal";
}

}  // namespace vireo
