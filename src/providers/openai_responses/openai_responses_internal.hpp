#pragma once

// Internal to the Responses adapter (openai_responses.cpp): what its components share, one
// source file each in this folder.

#include <ullm/core/json.hpp>
#include <ullm/core/message.hpp>
#include <ullm/providers/chat.hpp>
#include <ullm/providers/provider.hpp>
#include <ullm/providers/provider_errors.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ullm::detail::openai_responses {

// Visible reasoning pieces (summary parts, reasoning_text parts) that follow each other in
// one canonical reasoning part are separated by a blank line, in bodies and streams alike.
inline constexpr std::string_view reasoning_separator = "\n\n";

// ---------------------------------------------------------------------------------------
// Encoding (input_encoder.cpp)

std::string arguments_text(const json& arguments);

void encode_message(const Message& message, std::string_view provider, const std::string& model,
                    json& input);

// ---------------------------------------------------------------------------------------
// Decoding (output_decoder.cpp)

struct DecodeContext {
    std::string provider;
    std::string model;  // the request's model: replay is bound to what the caller sends
    std::set<std::string, std::less<>> declared_tools;
    bool background = false;  // the request asked for `background: true`
};

DecodeContext context_for(std::string_view provider, const ChatRequest& request);

bool is_parallel_wrapper(const DecodeContext& context, std::string_view name);

std::string call_id_of(const json& item, std::int64_t index);

std::string arguments_of(const json& item);

// The tool calls one function_call item stands for: itself, or the calls of a parallel
// wrapper (`unwrapped`).
struct ItemCalls {
    std::vector<ToolCallPart> calls;
    bool unwrapped = false;
};

ItemCalls calls_of(const DecodeContext& context, const json& item, std::int64_t index);

ChatResponse interpret(const json& response, const json& output, const DecodeContext& context,
                       std::string_view fallback_status, const std::string& request_id);

// A background response that has not finished: no content (what a running response holds is
// not final), zero usage, and the id to poll it by.
ChatResponse unfinished(const json& response, const std::string& status,
                        const DecodeContext& context, const ErrorOrigin& origin);

// ---------------------------------------------------------------------------------------
// Errors (error_mapping.cpp)

// Reads an error: `{"error": {code, message, type}}`, `{"error": "text"}`, an error object, or
// an `error` stream event with the fields at its top level. `status` 0 derives the status
// from the code, for errors inside a 200 body or stream.
ProviderFailure failure_from(const json& value, int status);

// ---------------------------------------------------------------------------------------
// Streaming (stream_decoder.cpp)

/// The decoder of a Responses stream (SSE).
std::unique_ptr<StreamDecoder> make_stream_decoder(DecodeContext context);

/// A decoder that joins a background stream after event `from.sequence_number`.
std::unique_ptr<StreamDecoder> make_resumed_stream_decoder(DecodeContext context,
                                                           const StreamPosition& from);

}  // namespace ullm::detail::openai_responses
