#include <ullm/detail/stream_fast_path.hpp>

#include <atomic>

namespace ullm::detail {

namespace {

std::atomic<bool> fast_paths{true};

}  // namespace

void set_stream_fast_paths(bool on) noexcept {
    fast_paths.store(on, std::memory_order_relaxed);
}

bool stream_fast_paths() noexcept {
    return fast_paths.load(std::memory_order_relaxed);
}

}  // namespace ullm::detail
