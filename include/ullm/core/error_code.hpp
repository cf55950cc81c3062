#pragma once

/// `ErrorCode`: the closed set of stable codes an `ullm::Error` (or a tool outcome, a dialog
/// turn, an interrupted turn) carries. Each is listed in docs/errors.md; a test holds the two
/// together and fails when a code is documented but never raised by a test, or the reverse.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

/// Internal: the one list of codes, in the order of the enum. Each entry is X(name).
#define ULLM_DETAIL_ERROR_CODES(X)                    \
    /* messages and tools */                          \
    X(invalid_message)                                \
    X(invalid_tool_name)                              \
    X(invalid_tool_description)                       \
    X(invalid_tool_schema)                            \
    X(unsupported_schema_keyword)                     \
    X(duplicate_tool_name)                            \
    X(invalid_tool_arguments)                         \
    X(missing_tool_execute)                           \
    X(unknown_tool)                                   \
    X(tool_execution_failed)                          \
    X(tool_error)                                     \
    /* transport */                                   \
    X(connection_failed)                              \
    X(timeout)                                        \
    X(tls_error)                                      \
    X(invalid_url)                                    \
    X(response_too_large)                             \
    X(transport_error)                                \
    X(cancelled)                                      \
    X(stream_truncated)                               \
    /* providers */                                   \
    X(authentication_failed)                          \
    X(rate_limited)                                   \
    X(queue_full)                                     \
    X(queue_timeout)                                  \
    X(context_length_exceeded)                        \
    X(provider_error)                                 \
    X(provider_overloaded)                            \
    X(invalid_provider_response)                      \
    X(invalid_request)                                \
    X(response_cancelled)                             \
    /* what a provider, model or library cannot do */ \
    X(unsupported_option)                             \
    X(unknown_model_route)                            \
    X(provider_not_configured)                        \
    X(unknown_model_pricing)                          \
    X(mock_queue_exhausted)                           \
    /* invalid options and values */                  \
    X(invalid_tool_choice)                            \
    X(unknown_tool_choice)                            \
    X(invalid_model)                                  \
    X(invalid_max_tokens)                             \
    X(invalid_temperature)                            \
    X(invalid_provider_options)                       \
    X(invalid_provider)                               \
    X(invalid_price_table)                            \
    X(invalid_cache_control)                          \
    X(invalid_document)                               \
    X(invalid_response_id)                            \
    X(invalid_poll_options)                           \
    X(invalid_batch_options)                          \
    X(invalid_limits)                                 \
    X(invalid_context_manager_output)                 \
    X(invalid_context_window)                         \
    X(invalid_max_tool_rounds)                        \
    X(invalid_max_parallel_tool_calls)                \
    X(invalid_tool_execution_timeout)                 \
    X(invalid_tool_validation)                        \
    X(invalid_budget)                                 \
    X(invalid_budget_action)                          \
    X(invalid_session_id)                             \
    X(invalid_tenant)                                 \
    X(invalid_list_limit)                             \
    X(invalid_cursor)                                 \
    X(invalid_embedding_input)                        \
    X(invalid_embedding_dimensions)                   \
    X(invalid_response_format)                        \
    X(invalid_max_repairs)                            \
    X(invalid_usage_record)                           \
    X(invalid_usage_query)                            \
    /* conversations and session stores */            \
    X(conversation_busy)                              \
    X(max_tool_rounds_exceeded)                       \
    X(budget_exceeded)                                \
    X(invalid_conversation_snapshot)                  \
    X(session_store_conflict)                         \
    X(session_store_failed)                           \
    X(usage_record_conflict)                          \
    X(usage_ledger_failed)                            \
    /* structured output */                           \
    X(structured_output_not_json)                     \
    X(structured_output_invalid)                      \
    X(structured_output_truncated)                    \
    X(structured_output_refused)                      \
    /* dialogs */                                     \
    X(reserved_tool_name)                             \
    X(invalid_link)                                   \
    X(unknown_cell)                                   \
    X(not_a_data_cell)                                \
    X(not_a_handler_cell)                             \
    X(not_a_pattern_cell)                             \
    X(invalid_cell_id)                                \
    X(invalid_cell_value)                             \
    X(invalid_cell_schema)                            \
    X(invalid_pattern_result)                         \
    X(pattern_write_denied)                           \
    X(handler_write_denied)                           \
    X(cell_space_full)                                \
    X(cell_in_use)                                    \
    X(turn_in_progress)                               \
    X(turn_failed)                                    \
    X(missing_structured_result)                      \
    /* MCP servers */                                 \
    X(mcp_spawn_failed)                               \
    X(mcp_server_exited)                              \
    X(mcp_protocol_error)                             \
    X(mcp_message_too_large)                          \
    X(mcp_timeout)                                    \
    X(mcp_unsupported_protocol_version)               \
    X(mcp_server_error)                               \
    X(mcp_connection_failed)                          \
    X(mcp_session_expired)

namespace ullm {

/// Every stable code ullm reports. `to_string` gives the code as it appears in `what()`
/// (`[ullm.<code>]`), in `Error::code()` and in docs/errors.md.
enum class ErrorCode : std::uint8_t {
#define ULLM_DETAIL_ERROR_CODE_ENUMERATOR(name) name,
    ULLM_DETAIL_ERROR_CODES(ULLM_DETAIL_ERROR_CODE_ENUMERATOR)
#undef ULLM_DETAIL_ERROR_CODE_ENUMERATOR
};

/// The code's text, e.g. `conversation_busy`.
[[nodiscard]] std::string_view to_string(ErrorCode code) noexcept;

/// The code whose text is `text`, or nullopt when no code is spelled so.
[[nodiscard]] std::optional<ErrorCode> parse_error_code(std::string_view text) noexcept;

/// Every code, in enum order.
[[nodiscard]] std::span<const ErrorCode> all_error_codes() noexcept;

namespace detail {

/// The code's text as a string that lives as long as the program (what `Error::code()` hands
/// out, so an error stores no copy of it).
[[nodiscard]] const std::string& error_code_text(ErrorCode code) noexcept;

/// Internal: records that `code` was reported in this process (every `Error` constructed, and
/// the codes reported without an exception: tool outcomes, dialog turns). Lock-free.
void note_reported(ErrorCode code) noexcept;

/// Internal: notes `code` as reported and returns its text, for a code reported without an
/// exception (a tool outcome's `error_code`, `DialogTurn::error_code`, `InterruptedTurn::code`).
[[nodiscard]] std::string report(ErrorCode code);

/// Internal: whether `code` was reported in this process since it started. The test suite
/// uses it to hold docs/errors.md to the codes the tests raise.
[[nodiscard]] bool was_reported(ErrorCode code) noexcept;

}  // namespace detail

}  // namespace ullm
