#pragma once

// Internal to the Chat Completions adapter (openai_chat.cpp): what its components share, one
// source file each in this folder.

#include <ullm/core/json.hpp>
#include <ullm/core/message.hpp>
#include <ullm/core/usage.hpp>
#include <ullm/http/http_types.hpp>
#include <ullm/providers/chat.hpp>
#include <ullm/providers/provider.hpp>
#include <ullm/providers/provider_errors.hpp>

#include <memory>
#include <string>
#include <string_view>

namespace ullm::detail::openai_chat {

// Encoding (message_encoder.cpp)

void encode_message(const Message& message, json& out);

// Decoding (message_decoder.cpp)

FinishReason map_finish(std::string_view reason);

// Usage in Chat Completions and in the dialects of compatible servers. `reasoning_apart`:
// the server counts reasoning outside completion_tokens (xAI), so output adds it back.
Usage decode_usage(const json& usage, bool reasoning_apart);

// Text and reasoning of a `content` value: a string, or (Mistral) an array of chunks such as
// {"type":"text"} and {"type":"thinking","thinking":[{"type":"text",…}]}.
void decode_content(const json& content, std::string& text, std::string& reasoning);

// Visible reasoning as compatible servers send it: `reasoning_content` (DeepSeek, vLLM,
// llama.cpp, Qwen) or `reasoning` (OpenRouter, Groq, Ollama).
std::string decode_reasoning(const json& message);

ErrorOrigin origin_of(std::string_view provider, const std::string& model,
                      const HttpResponseHead* head, std::string request_id = {});

// Errors (error_mapping.cpp)

ProviderFailure failure_from_body(const json& body, int status);

// Throws the mapped error of a response with a non-2xx status (its body an error object, or
// anything else, quoted), with the delay its headers ask for.
[[noreturn]] void throw_status_failure(const HttpResponse& response, const ErrorOrigin& origin);

// Streaming (stream_decoder.cpp, text_chunk_reader.cpp)

/// What a plain text delta chunk says.
struct TextChunk {
    std::string id;
    std::string model;
    std::string content;
};

/// Reads `data` when it is a plain text delta: an object of only `id`, `object`, `created`,
/// `model`, `system_fingerprint`, `service_tier`, `obfuscation`, null `usage` and at most one
/// choice of index 0 with a `delta` of string or null `content`, a `role` and null `refusal`,
/// with null `logprobs` and `finish_reason`; no key twice. Builds no DOM. Returns false for
/// anything else, invalid JSON included: the general decoder then reads it (and reports its
/// errors). What it accepts, the general decoder reads to the same effect.
[[nodiscard]] bool read_text_chunk(std::string_view data, TextChunk& out);

/// The decoder of a Chat Completions stream (SSE).
std::unique_ptr<StreamDecoder> make_stream_decoder(std::string provider, std::string model);

}  // namespace ullm::detail::openai_chat
