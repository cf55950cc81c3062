#pragma once

/// Helpers for the tests that read recorded provider traffic from ULLM_FIXTURES_DIR
/// (../shared/fixtures, read in place; see its README.md for the formats).

#include <ullm/testing/replay.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ullm::test {

/// The fixtures directory (the ULLM_FIXTURES_DIR compile definition). Never throws.
std::filesystem::path fixtures_dir();

/// Every regular file under `fixtures_dir() / subdir` (recursively) whose name ends with
/// `suffix`, sorted by path. An empty `subdir` searches the whole tree. Throws
/// `std::runtime_error` when the directory does not exist.
std::vector<std::filesystem::path> fixture_files(std::string_view subdir, std::string_view suffix);

/// The whole content of a file, byte for byte. Throws `std::runtime_error` when it cannot be
/// read.
std::string read_file(const std::filesystem::path& path);

// The framing helpers live in the public testing layer; these names keep the tests short.
using Framing = ullm::testing::ChunkFraming;
using ullm::testing::chunk_lines;
using ullm::testing::frame_chunks_as_sse;
using ullm::testing::json_type_field;
using ullm::testing::looks_like_sse_wire;

/// The framing of a `*.chunks.txt` file: by provider folder (openai-chat and
/// openai-compatible: `chat_completions`; anthropic and openai-responses: `typed_events`;
/// gemini: `data_only`), except that a file whose first payload is a `chat.completion.chunk`
/// is framed as Chat Completions wherever it lives. Never throws except `std::bad_alloc`.
Framing framing_for(const std::filesystem::path& chunks_file, std::string_view chunks_txt);

/// One recorded SSE stream, as the bytes a server would send.
struct RecordedStream {
    /// The file, relative to `fixtures_dir()`; `#N` names the N-th body inside a JSON file.
    std::string name;
    /// The wire bytes.
    std::string wire;
    /// For framed `*.chunks.txt` files, the framing used; empty for recorded wire bodies.
    std::optional<Framing> framing;
    /// For framed files, the payload lines: each must come back as one event's data.
    std::vector<std::string> payloads;
};

/// Every recorded SSE stream in the fixtures: `openai-chat/openai-python-sse/*.bin`; the
/// `anthropic/anthropic-sdk-python` `*.txt` and `*.sse` files that are SSE (one `.txt` is a
/// plain JSON message and is left out); the SSE response bodies embedded in that folder's
/// `*.json` request/response recordings; and every `*.chunks.txt`, framed per `framing_for`
/// unless it already is an SSE wire body. Sorted by name. Throws `std::runtime_error` when the
/// fixtures cannot be read.
std::vector<RecordedStream> recorded_sse_streams();

}  // namespace ullm::test
