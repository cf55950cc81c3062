#pragma once

#include <string_view>

namespace ullm {

/// The version of the compiled ullm library, e.g. "0.1.0". Thread-safe.
[[nodiscard]] std::string_view version() noexcept;

}  // namespace ullm
