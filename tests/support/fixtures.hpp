#pragma once

/// Helpers for the tests that read recorded provider traffic from ULLM_FIXTURES_DIR
/// (../shared/fixtures, read in place; see its README.md for the formats).

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

/// How the payload lines of a `*.chunks.txt` file go on the wire (fixtures README).
enum class Framing {
    data_only,         ///< `data: LINE\n\n` per line (Gemini `alt=sse`).
    chat_completions,  ///< `data: LINE\n\n` per line, then `data: [DONE]\n\n`.
    typed_events,      ///< `event: TYPE\ndata: LINE\n\n`, TYPE = the line's JSON "type".
};

/// The lines of a `*.chunks.txt` file: split on LF, without the empty text after a final LF.
/// Never throws except `std::bad_alloc`.
std::vector<std::string_view> chunk_lines(std::string_view chunks_txt);

/// The value of the top-level "type" string of a JSON object line, read up to the first syntax
/// error (so a line whose JSON breaks after "type" still has one). Never throws.
std::optional<std::string> json_type_field(std::string_view line);

/// Turns a `*.chunks.txt` file (one SSE data payload per line) into the bytes a server sends.
/// With `typed_events`, a line without a "type" string is framed without an `event:` line.
/// Never throws except `std::bad_alloc`.
std::string frame_chunks_as_sse(std::string_view chunks_txt, Framing framing);

/// Whether a text already is an SSE wire body (its first line is an `event:`, `data:`, `id:`,
/// `retry:` or comment line) rather than one payload per line. A few `*.chunks.txt` files are.
/// Never throws.
bool looks_like_sse_wire(std::string_view text);

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
