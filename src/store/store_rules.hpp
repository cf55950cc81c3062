#pragma once

// Internal to the session stores: the rules every store applies the same way (tenant checks,
// list paging and cursors, timestamps), so the three stores cannot drift apart.

#include <ullm/store/session_store.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ullm::detail {

/// Checks a tenant alone against the key rules; throws `ProviderCapabilityError`
/// (`invalid_tenant`).
void validate_tenant(std::string_view tenant);

/// Whether `session_id` meets the key rules (the non-throwing form of the check).
bool is_valid_session_id(std::string_view session_id) noexcept;

/// A validated page request: at most `limit` sessions whose id sorts after `after` (bytewise;
/// empty `after` means from the start).
struct ListQuery {
    std::size_t limit = 100;
    std::string after;
};

/// Checks the tenant, the limit (1..1000) and the cursor of a list call; throws
/// `ProviderCapabilityError` (`invalid_tenant`, `invalid_list_limit`, `invalid_cursor`).
ListQuery parse_list_query(std::string_view tenant, const SessionListOptions& options);

/// `bytes` as lowercase hex, two digits a byte.
std::string to_hex(std::string_view bytes);

/// The bytes that lowercase hex `text` spells, or false when it is not lowercase hex of even
/// length.
bool from_hex(std::string_view text, std::string& bytes);

/// The cursor that continues a listing after `session_id`.
std::string encode_cursor(std::string_view session_id);

/// Turns up to `limit + 1` summaries, in session id order and all after the query's start,
/// into a page: the first `limit` of them, with a cursor when there were more.
SessionPage finish_page(std::vector<SessionSummary> rows, std::size_t limit);

/// Throws the `SessionStoreConflictError` for a write that expected `expected` and found
/// `actual` (0: no session).
[[noreturn]] void throw_conflict(std::uint64_t expected, std::uint64_t actual);

/// Milliseconds since the Unix epoch, the precision every store keeps.
std::int64_t to_unix_ms(std::chrono::system_clock::time_point time);
std::chrono::system_clock::time_point from_unix_ms(std::int64_t ms);

/// The current time, truncated to whole milliseconds.
std::chrono::system_clock::time_point now_ms();

}  // namespace ullm::detail
