#pragma once

// What a test expects to fail, by its stable code.

#include <ullm/core/error.hpp>

#include <string>

namespace ullm::test {

// The `code()` of the `ullm::Error` that `f` throws, or "no error" when it returns.
template <class F>
std::string error_code_of(F&& f) {
    try {
        f();
    } catch (const ullm::Error& error) {
        return error.code();
    }
    return "no error";
}

}  // namespace ullm::test
