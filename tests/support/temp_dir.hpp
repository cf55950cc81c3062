#pragma once

/// `TempDir`: a uniquely named directory under the system's temporary directory, removed with
/// everything in it when the object is destroyed.

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <system_error>

namespace ullm::test {

/// A fresh empty directory for one test; `label` goes into its name to make leftovers
/// recognisable. Throws `std::filesystem::filesystem_error` when it cannot be created.
class TempDir {
public:
    explicit TempDir(const std::string& label = "test") {
        static std::atomic<unsigned> counter{0};
        const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
        path_ = std::filesystem::temp_directory_path() /
                ("ullm-" + label + "-" + std::to_string(::getpid()) + "-" +
                 std::to_string(counter.fetch_add(1)) + "-" + std::to_string(now));
        std::filesystem::create_directories(path_);
    }
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
    /// `path() / name`.
    [[nodiscard]] std::filesystem::path operator/(const std::string& name) const {
        return path_ / name;
    }

private:
    std::filesystem::path path_;
};

}  // namespace ullm::test
