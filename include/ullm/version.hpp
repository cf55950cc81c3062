#pragma once

/// The version of ullm and of the libraries it was built with.

#include <string>
#include <string_view>

namespace ullm {

/// The version of the compiled ullm library, e.g. "0.1.0". Thread-safe.
[[nodiscard]] std::string_view version() noexcept;

/// The versions of the libraries ullm was built with, and of those it runs with where a
/// library can tell (libcurl and SQLite are shared libraries; nlohmann_json is header-only).
struct BuildInfo {
    std::string ullm;             ///< As `version()`.
    std::string libcurl;          ///< The libcurl headers compiled against, e.g. "7.88.1".
    std::string libcurl_runtime;  ///< The libcurl loaded at run time, with its TLS library.
    std::string nlohmann_json;    ///< e.g. "3.11.2".
    std::string sqlite;           ///< The SQLite headers compiled against, e.g. "3.40.1".
    std::string sqlite_runtime;   ///< The SQLite loaded at run time.
    /// The CA bundle file the loaded libcurl uses when none is set (empty when it has none).
    std::string libcurl_ca_bundle;
    /// The CA certificate folder the loaded libcurl uses when none is set (empty when none).
    std::string libcurl_ca_path;
};

/// What `BuildInfo` says of this build. Thread-safe; never throws but `std::bad_alloc`.
[[nodiscard]] BuildInfo build_info();

}  // namespace ullm
