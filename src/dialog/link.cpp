#include <ullm/dialog/cell_space.hpp>

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>

#include "../core/text.hpp"
#include "pointer.hpp"

#include <string>
#include <string_view>

namespace ullm {

namespace {

constexpr std::string_view link_key = "@link";
constexpr std::string_view link_prefix = "/of:";

// Links quote what they name at most this long.
constexpr std::size_t link_quote_limit = 80;

[[noreturn]] void link_error(const std::string& message) {
    throw DialogError(ErrorCode::invalid_link, message);
}

CellLink parse_link_text(std::string_view raw) {
    const std::string_view text = detail::trim_space(raw);
    if (text.empty() || text.front() != '/') link_error("Target must start with a slash.");
    if (text.substr(0, link_prefix.size()) != link_prefix) {
        link_error("Target must include a piece handle, e.g. \"/of:fid1:abc123/path\".");
    }
    const std::string_view rest = text.substr(link_prefix.size());
    const std::size_t slash = rest.find('/');
    const std::string_view id = rest.substr(0, slash);
    std::string_view pointer =
        slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
    if (id.empty()) {
        link_error("Target must include a piece handle, e.g. \"/of:fid1:abc123/path\".");
    }
    if (id.size() < min_cell_id_length) {
        link_error(detail::quote(id, link_quote_limit) +
                   " is a name, not a cell id: use the link shown under # Available Cells, e.g. "
                   "{\"@link\": \"/of:<id>/path\"}.");
    }
    if (!pointer.empty() && pointer.back() == '/') pointer.remove_suffix(1);
    for (std::size_t i = 0; i < pointer.size(); ++i) {
        if (pointer[i] != '~') continue;
        if (i + 1 >= pointer.size() || (pointer[i + 1] != '0' && pointer[i + 1] != '1')) {
            link_error("Target path " + detail::quote(pointer, link_quote_limit) +
                       " has a '~' that is not an escape: write ~0 for '~' and ~1 for '/'.");
        }
    }
    return CellLink{std::string(id), std::string(pointer)};
}

}  // namespace

std::string CellLink::to_string() const {
    return std::string(link_prefix) + cell_id + pointer;
}

json CellLink::to_json() const {
    return json{{std::string(link_key), to_string()}};
}

CellLink CellLink::child(std::string_view token) const {
    return CellLink{cell_id, detail::pointer_append(pointer, token)};
}

bool is_link_object(const json& value) noexcept {
    if (!value.is_object() || value.size() != 1) return false;
    const auto found = value.find(link_key);
    return found != value.end() && found->is_string();
}

CellLink parse_link(const json& target) {
    if (target.is_object()) {
        const auto found = target.find(link_key);
        if (found == target.end() || !found->is_string()) {
            link_error(
                "Target must be a link such as {\"@link\": \"/of:<id>/path\"}; this "
                "object has no \"@link\" string.");
        }
        return parse_link_text(found->get_ref<const std::string&>());
    }
    if (!target.is_string()) {
        link_error(
            "Target must be a link such as {\"@link\": \"/of:<id>/path\"} or the string "
            "\"/of:<id>/path\".");
    }
    const auto& text = target.get_ref<const std::string&>();
    const std::string_view trimmed = detail::trim_space(text);
    if (!trimmed.empty() && trimmed.front() == '{') {
        // A model sometimes sends the link object serialised into a string.
        const json inner = detail::parse_json_exact(trimmed);
        if (inner.is_object()) return parse_link(inner);
    }
    return parse_link_text(text);
}

}  // namespace ullm
