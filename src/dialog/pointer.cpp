#include "pointer.hpp"

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>

#include <utility>

namespace ullm::detail {

namespace {

[[noreturn]] void invalid_link(const std::string& message) {
    throw DialogError(ErrorCode::invalid_link, message);
}

}  // namespace

std::string show(const CellLink& link) {
    return quote(link.to_string(), message_quote_limit);
}

std::vector<std::string> split_pointer(const CellLink& link) {
    const std::string& pointer = link.pointer;
    std::vector<std::string> tokens;
    if (pointer.empty()) return tokens;
    if (pointer.front() != '/') {
        invalid_link("The path of " + show(link) + " must be empty or start with '/'.");
    }
    std::string token;
    for (std::size_t i = 1; i <= pointer.size(); ++i) {
        if (i == pointer.size() || pointer[i] == '/') {
            tokens.push_back(std::move(token));
            token.clear();
            continue;
        }
        if (pointer[i] != '~') {
            token.push_back(pointer[i]);
            continue;
        }
        if (i + 1 < pointer.size() && pointer[i + 1] == '0') {
            token.push_back('~');
        } else if (i + 1 < pointer.size() && pointer[i + 1] == '1') {
            token.push_back('/');
        } else {
            invalid_link("The path of " + show(link) +
                         " has a '~' that is not an escape: write ~0 for '~' and ~1 "
                         "for '/'.");
        }
        ++i;
    }
    return tokens;
}

std::string join_pointer(const std::vector<std::string>& tokens, std::size_t from) {
    std::string out;
    for (std::size_t i = from; i < tokens.size(); ++i) out = pointer_append(out, tokens[i]);
    return out;
}

std::size_t parse_index(std::string_view token) {
    if (token.empty() || token.size() > 15) return std::string_view::npos;
    if (token.size() > 1 && token.front() == '0') return std::string_view::npos;
    std::size_t index = 0;
    for (const char c : token) {
        if (c < '0' || c > '9') return std::string_view::npos;
        index = index * 10 + static_cast<std::size_t>(c - '0');
    }
    return index;
}

const char* type_name(const json& value) {
    switch (value.type()) {
        case json::value_t::object:
            return "an object";
        case json::value_t::array:
            return "an array";
        case json::value_t::string:
            return "a string";
        case json::value_t::boolean:
            return "a boolean";
        case json::value_t::null:
            return "null";
        default:
            return "a number";
    }
}

const json& pointer_step(const json& node, const std::string& token, const CellLink& at,
                         const CellLink& requested) {
    const std::string where =
        at.pointer.empty() ? std::string("the root") : quote(at.pointer, message_quote_limit);
    if (node.is_object()) {
        const auto found = node.find(token);
        if (found != node.end()) return *found;
        invalid_link(show(requested) + " does not resolve: there is no key " +
                     quote(token, message_quote_limit) + " at " + where + " of " +
                     show({at.cell_id, {}}) + ".");
    }
    if (node.is_array()) {
        const std::size_t index = parse_index(token);
        if (index != std::string_view::npos && index < node.size()) return node[index];
        invalid_link(show(requested) + " does not resolve: " + where + " of " +
                     show({at.cell_id, {}}) + " is an array of " + std::to_string(node.size()) +
                     " elements and " + quote(token, message_quote_limit) +
                     " is not one of its indexes.");
    }
    invalid_link(show(requested) + " does not resolve: " + where + " of " + show({at.cell_id, {}}) +
                 " is " + type_name(node) + ", which has no members.");
}

}  // namespace ullm::detail
