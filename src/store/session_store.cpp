#include <ullm/store/session_store.hpp>

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>

#include "../core/text.hpp"
#include "store_rules.hpp"

#include <cstddef>
#include <string>
#include <utility>

namespace ullm {

namespace {

constexpr std::size_t max_tenant_bytes = 128;
constexpr std::size_t max_session_id_bytes = 256;
constexpr std::size_t min_list_limit = 1;
constexpr std::size_t max_list_limit = 1000;

// Why `text` breaks the key rules (valid UTF-8 without C0, DEL or C1 control characters), or
// null when it does not.
const char* key_text_problem(std::string_view text) {
    if (!detail::is_valid_utf8(text)) return "is not valid UTF-8";
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto byte = static_cast<unsigned char>(text[i]);
        const bool c1 = byte == 0xC2U && i + 1 < text.size() &&
                        static_cast<unsigned char>(text[i + 1]) <= 0x9FU;
        if (byte < 0x20U || byte == 0x7FU || c1) return "contains a control character";
    }
    return nullptr;
}

void check_session_id(std::string_view session_id) {
    if (session_id.empty()) {
        throw InvalidOptionError(ErrorCode::invalid_session_id, "the session id must not be empty");
    }
    if (session_id.size() > max_session_id_bytes) {
        throw InvalidOptionError(
            ErrorCode::invalid_session_id,
            "the session id must be at most 256 bytes, got " + std::to_string(session_id.size()));
    }
    if (const char* problem = key_text_problem(session_id)) {
        throw InvalidOptionError(ErrorCode::invalid_session_id,
                                 std::string("the session id ") + problem);
    }
}

// Lowercase only, as `to_hex` writes them: a cursor has one spelling.
int lower_hex_value(char c) {
    return c >= 'A' && c <= 'F' ? -1 : detail::hex_digit_value(c);
}

[[noreturn]] void bad_cursor(const std::string& why) {
    throw InvalidOptionError(ErrorCode::invalid_cursor,
                             "the list cursor " + why +
                                 "; pass the next_cursor of the previous page unchanged, "
                                 "or an empty cursor for the first page");
}

}  // namespace

void validate_session_key(std::string_view tenant, std::string_view session_id) {
    detail::validate_tenant(tenant);
    check_session_id(session_id);
}

namespace detail {

void validate_tenant(std::string_view tenant) {
    if (tenant.size() > max_tenant_bytes) {
        throw InvalidOptionError(
            ErrorCode::invalid_tenant,
            "the tenant must be empty or at most 128 bytes, got " + std::to_string(tenant.size()));
    }
    if (const char* problem = key_text_problem(tenant)) {
        throw InvalidOptionError(ErrorCode::invalid_tenant, std::string("the tenant ") + problem);
    }
}

bool is_valid_session_id(std::string_view session_id) noexcept {
    return !session_id.empty() && session_id.size() <= max_session_id_bytes &&
           key_text_problem(session_id) == nullptr;
}

ListQuery parse_list_query(std::string_view tenant, const SessionListOptions& options) {
    validate_tenant(tenant);
    if (options.limit < min_list_limit || options.limit > max_list_limit) {
        throw InvalidOptionError(
            ErrorCode::invalid_list_limit,
            "the list limit must be between 1 and 1000, got " + std::to_string(options.limit));
    }
    ListQuery query{options.limit, {}};
    const std::string& cursor = options.cursor;
    if (cursor.empty()) return query;
    // A cursor is the hex of the last session id of the previous page: anything else was not
    // made by a store.
    if (cursor.size() > 2 * max_session_id_bytes) bad_cursor("is too long");
    if (!from_hex(cursor, query.after) || key_text_problem(query.after) != nullptr) {
        bad_cursor("is not one a store made");
    }
    return query;
}

std::string to_hex(std::string_view bytes) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (const char c : bytes) {
        const auto byte = static_cast<unsigned char>(c);
        out.push_back(digits[byte >> 4U]);
        out.push_back(digits[byte & 0x0FU]);
    }
    return out;
}

bool from_hex(std::string_view text, std::string& bytes) {
    if (text.size() % 2 != 0) return false;
    std::string out;
    out.reserve(text.size() / 2);
    for (std::size_t i = 0; i < text.size(); i += 2) {
        const int high = lower_hex_value(text[i]);
        const int low = lower_hex_value(text[i + 1]);
        if (high < 0 || low < 0) return false;
        out.push_back(static_cast<char>((high << 4) | low));
    }
    bytes = std::move(out);
    return true;
}

std::string encode_cursor(std::string_view session_id) {
    return to_hex(session_id);
}

SessionPage finish_page(std::vector<SessionSummary> rows, std::size_t limit) {
    SessionPage page;
    if (rows.size() > limit) {
        rows.resize(limit);
        page.next_cursor = encode_cursor(rows.back().session_id);
    }
    page.sessions = std::move(rows);
    return page;
}

void throw_conflict(std::uint64_t expected, std::uint64_t actual) {
    std::string message;
    if (expected == 0) {
        message = "the session already exists (version " + std::to_string(actual) +
                  ") but the write expected to create it";
    } else if (actual == 0) {
        message =
            "the session does not exist but the write expected version " + std::to_string(expected);
    } else {
        message = "the session is at version " + std::to_string(actual) +
                  " but the write expected version " + std::to_string(expected);
    }
    message += "; another writer got there first: reload the session and retry";
    throw SessionStoreConflictError(message, expected, actual);
}

std::int64_t to_unix_ms(std::chrono::system_clock::time_point time) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch()).count();
}

std::chrono::system_clock::time_point from_unix_ms(std::int64_t ms) {
    return std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::milliseconds(ms)));
}

std::chrono::system_clock::time_point now_ms() {
    return from_unix_ms(to_unix_ms(std::chrono::system_clock::now()));
}

}  // namespace detail

}  // namespace ullm
