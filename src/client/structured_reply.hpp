#pragma once

// Internal: how a structured-output reply is judged, refused and repaired, shared by
// `Client::complete_object`/`stream_object` and `Conversation::send_object`.

#include <ullm/client/structured_output.hpp>
#include <ullm/tools/validator.hpp>

#include <string>

namespace ullm::detail {

/// Checks `name`, `max_repairs` and `budget` (`invalid_response_format`,
/// `invalid_max_repairs`, `invalid_budget`).
void check_object_options(const StructuredOutputOptions& options);

/// What one reply came to.
struct ReplyVerdict {
    enum class Kind { good, refused, skipped, problem };
    Kind kind = Kind::good;
    ErrorCode code = ErrorCode::structured_output_invalid;
    std::string problem;  ///< For the model and the error message.
    std::string path;     ///< Where the first problem is, for a reply that breaks the schema.
    json value;           ///< The validated value (`good`).
};

/// Judges `response` against `schema`, running `decode` on a value that passes. Throws
/// `StructuredOutputError` `structured_output_truncated` (with `usage`, the call's so far) for
/// a reply cut off by the output limit (a repair could only be cut off again).
[[nodiscard]] ReplyVerdict judge_reply(const ChatResponse& response, const CompiledSchema& schema,
                                       const ObjectDecoder& decode, const Usage& usage);

/// The error for a reply judged `problem` when no repair is left; `repairs` were made, `usage`
/// is the call's so far.
[[noreturn]] void throw_unusable_reply(const ReplyVerdict& verdict, const ChatResponse& response,
                                       int repairs, const Usage& usage);

/// The user message that sends `problem` back to the model.
[[nodiscard]] Message repair_request(const std::string& problem);

}  // namespace ullm::detail
