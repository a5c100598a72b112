#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace vireo {

// Categories a caller can branch on; the message is the sentence a user reads.
enum class ErrorCode {
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Io,
    Truncated,
    InvalidFormat,
    Unsupported,
    OutOfMemory,
    DeviceFault,  // the GPU reported a fault; the device may need the engine restarted
    Cancelled,
    Internal,
};

const char* errorCodeName(ErrorCode code);

struct Error {
    ErrorCode code = ErrorCode::Internal;
    std::string message;
};

inline Error makeError(ErrorCode code, std::string message)
{
    return Error{code, std::move(message)};
}

// The error-or-value type used at module boundaries (C++20 has no std::expected). Modules
// with richer failures (the Hub client) use their own error type E.
template <typename T, typename E = Error>
class [[nodiscard]] Result {
public:
    Result(T value) : m_state(std::in_place_index<0>, std::move(value)) {}
    Result(E error) : m_state(std::in_place_index<1>, std::move(error)) {}

    bool ok() const { return m_state.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() &
    {
        assert(ok());
        return std::get<0>(m_state);
    }
    const T& value() const&
    {
        assert(ok());
        return std::get<0>(m_state);
    }
    T&& value() &&
    {
        assert(ok());
        return std::get<0>(std::move(m_state));
    }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

    const E& error() const
    {
        assert(!ok());
        return std::get<1>(m_state);
    }

private:
    std::variant<T, E> m_state;
};

template <typename E>
class [[nodiscard]] Result<void, E> {
public:
    Result() = default;
    Result(E error) : m_error(std::move(error)), m_ok(false) {}

    bool ok() const { return m_ok; }
    explicit operator bool() const { return m_ok; }
    const E& error() const
    {
        assert(!m_ok);
        return m_error;
    }

private:
    E m_error;
    bool m_ok = true;
};

}  // namespace vireo
