#include <ullm/detail/json_checks.hpp>

#include <cmath>
#include <vector>

namespace ullm::detail {

JsonSafetyViolation check_json_safe(const json& value, const std::string& path,
                                    std::size_t max_depth) {
    struct Item {
        const json* value;
        std::string path;
        std::size_t depth;
    };
    std::vector<Item> pending{{&value, path, 0}};
    while (!pending.empty()) {
        Item item = std::move(pending.back());
        pending.pop_back();
        const json& current = *item.value;
        if (current.is_number_float() && !std::isfinite(current.get<double>())) {
            return {item.path.empty() ? "/" : item.path, "must be a finite number"};
        }
        if (!current.is_structured()) continue;
        if (item.depth >= max_depth) {
            return {item.path.empty() ? "/" : item.path,
                    "nests deeper than " + std::to_string(max_depth) + " levels"};
        }
        if (current.is_object()) {
            for (auto it = current.begin(); it != current.end(); ++it) {
                pending.push_back(
                    {&it.value(), pointer_append(item.path, it.key()), item.depth + 1});
            }
        } else {
            std::size_t index = 0;
            for (const auto& element : current) {
                pending.push_back({&element, pointer_append(item.path, index++), item.depth + 1});
            }
        }
    }
    return {};
}

}  // namespace ullm::detail
