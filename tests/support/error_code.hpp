#pragma once

// What a test expects to fail, by its stable code.

#include <ullm/core/error.hpp>

#include <future>
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

// The code of the error a failed future holds. Read through a shared_future, which keeps the
// call's state (and so the exception) until the catch has ended: `std::future::get()` lets go
// of the state while it unwinds, and TSan, which cannot see libstdc++'s count of references to
// an exception, then takes the callback thread's release of it for a race with the catch.
template <class T>
std::string failure_code(std::future<T>& future) {
    const auto shared = future.share();
    return error_code_of([&] { (void)shared.get(); });
}

template <class T>
std::string failure_code(std::future<T>&& future) {
    return failure_code(future);
}

}  // namespace ullm::test
