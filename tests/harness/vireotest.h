#pragma once

// A small test harness for the inference layer, whose tests must build where Qt is absent
// (the GPU machine). Output follows Qt Test's shape so CTest logs read the same, and ends
// with "Totals: N passed, N failed".

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace vireo::test {

struct Case {
    const char* name;
    std::function<void()> body;
};

inline std::vector<Case>& registry()
{
    static std::vector<Case> cases;
    return cases;
}

struct Failure {
    std::string message;
};

struct Registrar {
    Registrar(const char* name, std::function<void()> body) { registry().push_back({name, std::move(body)}); }
};

inline int& checksRun()
{
    static int n = 0;
    return n;
}

[[noreturn]] inline void fail(const char* file, int line, const std::string& what)
{
    std::ostringstream s;
    s << what << "\n   Loc: [" << file << "(" << line << ")]";
    throw Failure{s.str()};
}

template <typename T>
std::string show(const T& value)
{
    std::ostringstream s;
    if constexpr (requires(std::ostream & o, const T& x) { o << x; }) {
        s << value;
    } else if constexpr (std::is_enum_v<T>) {
        s << "enum " << static_cast<long long>(value);
    } else if constexpr (requires(const T& x) {
                             x.begin();
                             x.end();
                         }) {
        s << "[";
        bool first = true;
        for (const auto& item : value) {
            s << (first ? "" : ", ") << show(item);
            first = false;
        }
        s << "]";
    } else {
        s << "(unprintable)";
    }
    return s.str();
}

inline int runAll(int argc, char** argv, const char* suite)
{
    std::string only = argc > 1 ? argv[1] : "";
    int passed = 0, failed = 0;
    std::printf("********* Start testing of %s *********\n", suite);
    for (const auto& c : registry()) {
        if (!only.empty() && only != c.name)
            continue;
        try {
            c.body();
            ++passed;
            std::printf("PASS   : %s::%s()\n", suite, c.name);
        } catch (const Failure& f) {
            ++failed;
            std::printf("FAIL!  : %s::%s() %s\n", suite, c.name, f.message.c_str());
        } catch (const std::exception& e) {
            ++failed;
            std::printf("FAIL!  : %s::%s() uncaught exception: %s\n", suite, c.name, e.what());
        }
        std::fflush(stdout);
    }
    std::printf("Totals: %d passed, %d failed, %d checks\n", passed, failed, checksRun());
    std::printf("********* Finished testing of %s *********\n", suite);
    return failed == 0 && passed > 0 ? 0 : 1;
}

}  // namespace vireo::test

#define VT_CONCAT2(a, b) a##b
#define VT_CONCAT(a, b) VT_CONCAT2(a, b)
#define VT_TEST(name)                                                                                                                      \
    static void name();                                                                                                                    \
    static ::vireo::test::Registrar VT_CONCAT(vtRegistrar_, name)(#name, name);                                                            \
    static void name()

#define VT_CHECK(cond)                                                                                                                     \
    do {                                                                                                                                   \
        ++::vireo::test::checksRun();                                                                                                      \
        if (!(cond))                                                                                                                       \
            ::vireo::test::fail(__FILE__, __LINE__, "'" #cond "' returned FALSE");                                                         \
    } while (0)

#define VT_CHECK_MSG(cond, msg)                                                                                                            \
    do {                                                                                                                                   \
        ++::vireo::test::checksRun();                                                                                                      \
        if (!(cond)) {                                                                                                                     \
            std::ostringstream vtS;                                                                                                        \
            vtS << "'" #cond "' returned FALSE: " << msg;                                                                                  \
            ::vireo::test::fail(__FILE__, __LINE__, vtS.str());                                                                            \
        }                                                                                                                                  \
    } while (0)

#define VT_COMPARE(actual, expected)                                                                                                       \
    do {                                                                                                                                   \
        ++::vireo::test::checksRun();                                                                                                      \
        const auto& vtA = (actual);                                                                                                        \
        const auto& vtE = (expected);                                                                                                      \
        if (!(vtA == vtE)) {                                                                                                               \
            std::ostringstream vtS;                                                                                                        \
            vtS << "Compared values are not the same\n   Actual   (" #actual "): " << ::vireo::test::show(vtA)                             \
                << "\n   Expected (" #expected "): " << ::vireo::test::show(vtE);                                                          \
            ::vireo::test::fail(__FILE__, __LINE__, vtS.str());                                                                            \
        }                                                                                                                                  \
    } while (0)

#define VT_MAIN(suite)                                                                                                                     \
    int main(int argc, char** argv)                                                                                                        \
    {                                                                                                                                      \
        return ::vireo::test::runAll(argc, argv, suite);                                                                                   \
    }
