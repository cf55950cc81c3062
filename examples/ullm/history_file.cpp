#include "history_file.hpp"

#include <nlohmann/json.hpp>

namespace ullm_cli {

std::string history_path(const std::string& store_path) {
    return store_path + ".history";
}

std::string history_line(const std::string& entry) {
    return nlohmann::json(entry).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
           "\n";
}

std::optional<std::string> history_entry(const std::string& line) {
    const auto value = nlohmann::json::parse(line, nullptr, false);
    if (!value.is_string()) return std::nullopt;
    return value.get<std::string>();
}

}  // namespace ullm_cli
