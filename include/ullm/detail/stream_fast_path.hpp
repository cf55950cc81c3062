#pragma once

// Internal: the switch of the stream decoders' fast paths, for tests.

namespace ullm::detail {

/// Turns the stream decoders' fast paths (a chunk of the usual shape read without building a
/// JSON DOM) on or off for every decoder made afterwards; on by default. Tests turn it off to
/// check that both paths decode the same bytes to the same events and errors. Thread-safe.
void set_stream_fast_paths(bool on) noexcept;

/// Whether decoders made now take their fast paths. Thread-safe.
[[nodiscard]] bool stream_fast_paths() noexcept;

}  // namespace ullm::detail
