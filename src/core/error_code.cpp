#include <ullm/core/error_code.hpp>

#include <algorithm>
#include <array>
#include <atomic>

namespace ullm {

namespace {

constexpr std::array codes = {
#define ULLM_DETAIL_ERROR_CODE_VALUE(name) ErrorCode::name,
    ULLM_DETAIL_ERROR_CODES(ULLM_DETAIL_ERROR_CODE_VALUE)
#undef ULLM_DETAIL_ERROR_CODE_VALUE
};

constexpr std::size_t code_count = codes.size();

// One bit per code, set when the code is reported.
constexpr std::size_t word_bits = 64;
std::array<std::atomic<std::uint64_t>, (code_count + word_bits - 1) / word_bits> reported{};

const std::array<std::string, code_count>& texts() {
    static const std::array<std::string, code_count> table = {
#define ULLM_DETAIL_ERROR_CODE_TEXT(name) std::string(#name),
        ULLM_DETAIL_ERROR_CODES(ULLM_DETAIL_ERROR_CODE_TEXT)
#undef ULLM_DETAIL_ERROR_CODE_TEXT
    };
    return table;
}

std::size_t index_of(ErrorCode code) noexcept {
    return std::min(static_cast<std::size_t>(code), code_count - 1);
}

}  // namespace

std::string_view to_string(ErrorCode code) noexcept {
    return detail::error_code_text(code);
}

std::optional<ErrorCode> parse_error_code(std::string_view text) noexcept {
    const auto& table = texts();
    const auto found = std::find(table.begin(), table.end(), text);
    if (found == table.end()) return std::nullopt;
    return codes[static_cast<std::size_t>(found - table.begin())];
}

std::span<const ErrorCode> all_error_codes() noexcept {
    return codes;
}

namespace detail {

const std::string& error_code_text(ErrorCode code) noexcept {
    return texts()[index_of(code)];
}

void note_reported(ErrorCode code) noexcept {
    const std::size_t index = index_of(code);
    reported[index / word_bits].fetch_or(std::uint64_t{1} << (index % word_bits),
                                         std::memory_order_relaxed);
}

std::string report(ErrorCode code) {
    note_reported(code);
    return error_code_text(code);
}

bool was_reported(ErrorCode code) noexcept {
    const std::size_t index = index_of(code);
    return (reported[index / word_bits].load(std::memory_order_relaxed) &
            (std::uint64_t{1} << (index % word_bits))) != 0;
}

}  // namespace detail

}  // namespace ullm
