#pragma once

/// `Result<T>`: the outcome of one async call, a value or the error that ended it.

#include <ullm/core/error.hpp>

#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace ullm {

/// A value of `T`, or the exception that took its place. What an async callback receives and
/// what `Client::complete_many` returns per request. A value type; not thread-safe.
template <class T>
class Result {
public:
    /// A success.
    Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit
    /// A failure; `error` must not be null.
    Result(std::exception_ptr error)  // NOLINT: implicit, as a function returns either
        : error_(std::move(error)) {}

    /// Whether this holds a value.
    [[nodiscard]] bool has_value() const noexcept { return value_.has_value(); }
    explicit operator bool() const noexcept { return has_value(); }

    /// The value; rethrows the error when there is none.
    [[nodiscard]] T& value() & {
        rethrow_error();
        return *value_;
    }
    [[nodiscard]] const T& value() const& {
        rethrow_error();
        return *value_;
    }
    [[nodiscard]] T&& value() && {
        rethrow_error();
        return *std::move(value_);
    }

    /// The error, or null for a success.
    [[nodiscard]] std::exception_ptr error() const& noexcept { return error_; }
    /// The error, moved out (this result keeps no reference to it), or null for a success.
    [[nodiscard]] std::exception_ptr error() && noexcept { return std::move(error_); }

    /// The stable code of the error (`cancelled`, `rate_limited`, …); empty for a success, and
    /// `unknown` for an exception that is not an `ullm::Error`.
    [[nodiscard]] std::string error_code() const {
        if (has_value()) return {};
        try {
            std::rethrow_exception(error_);
        } catch (const Error& error) {
            return error.code();
        } catch (...) {
            return "unknown";
        }
    }

private:
    void rethrow_error() const {
        if (!has_value()) std::rethrow_exception(error_);
    }

    // Exactly one is set. Not a `std::variant`: g++ 12 at -O2 and above warns that a moved
    // variant's exception_ptr "may be used uninitialized" (a false positive), in every program
    // that moves a Result.
    std::optional<T> value_;
    std::exception_ptr error_;
};

namespace detail {

/// A future, and the handler that fulfils it with the value or the error of a `Result`: the
/// future face of an async call that reports through a callback.
template <class T>
std::pair<std::future<T>, std::function<void(Result<T>)>> future_and_handler() {
    auto promise = std::make_shared<std::promise<T>>();
    std::future<T> future = promise->get_future();
    return {std::move(future), [promise](Result<T> result) {
                if (result) {
                    promise->set_value(std::move(result).value());
                } else {
                    promise->set_exception(std::move(result).error());
                }
            }};
}

}  // namespace detail

}  // namespace ullm
