#pragma once

/// Helpers for replaying recorded provider traffic in users' own tests and tools: turning the
/// one-payload-per-line `*.chunks.txt` form back into the bytes a server sends.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ullm::testing {

/// How the payload lines of a `*.chunks.txt` recording go on the wire.
enum class ChunkFraming {
    data_only,         ///< `data: LINE\n\n` per line (Gemini `alt=sse`).
    chat_completions,  ///< `data: LINE\n\n` per line, then `data: [DONE]\n\n`.
    typed_events,      ///< `event: TYPE\ndata: LINE\n\n`, TYPE = the line's JSON "type".
};

/// The lines of a text: split on LF, without the empty text after a final LF.
[[nodiscard]] std::vector<std::string_view> chunk_lines(std::string_view text);

/// The value of the top-level "type" string of a JSON object line, read up to the first syntax
/// error (so a line whose JSON breaks after "type" still has one). Never throws.
[[nodiscard]] std::optional<std::string> json_type_field(std::string_view line);

/// The bytes a server sends for a recording holding one SSE data payload per line. With
/// `typed_events`, a line without a "type" string is framed without an `event:` line.
[[nodiscard]] std::string frame_chunks_as_sse(std::string_view chunks_txt, ChunkFraming framing);

/// Whether a text already is an SSE wire body (its first line is an `event:`, `data:`, `id:`,
/// `retry:` or comment line) rather than one payload per line.
[[nodiscard]] bool looks_like_sse_wire(std::string_view text);

}  // namespace ullm::testing
