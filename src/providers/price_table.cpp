#include <ullm/providers/price_table.hpp>

#include <ullm/core/error.hpp>

#include <cctype>
#include <cmath>

namespace ullm {

namespace detail {
extern const std::string_view builtin_prices_json;
}

namespace {

[[noreturn]] void invalid(const std::string& where, const std::string& rule) {
    throw InvalidOptionError(ErrorCode::invalid_price_table, "price table " + where + ": " + rule);
}

bool is_date(const std::string& text) {
    if (text.size() != 10 || text[4] != '-' || text[7] != '-') return false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (i == 4 || i == 7) continue;
        if (std::isdigit(static_cast<unsigned char>(text[i])) == 0) return false;
    }
    const int month = std::stoi(text.substr(5, 2));
    const int day = std::stoi(text.substr(8, 2));
    return month >= 1 && month <= 12 && day >= 1 && day <= 31;
}

double price_field(const json& entry, const char* key, const std::string& where, bool required,
                   bool* present = nullptr) {
    const auto it = entry.find(key);
    if (it == entry.end()) {
        if (required) invalid(where, std::string("\"") + key + "\" is required");
        if (present) *present = false;
        return 0;
    }
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0) {
        invalid(where + "/" + key, "must be a finite non-negative number (USD per million tokens)");
    }
    if (present) *present = true;
    return it->get<double>();
}

std::map<std::string, ModelPrice, std::less<>> parse_models(const json& value) {
    if (!value.is_object()) invalid("", "must be a JSON object");
    const auto models = value.find("models");
    if (models == value.end() || !models->is_object()) invalid("", "\"models\" must be an object");
    std::map<std::string, ModelPrice, std::less<>> out;
    for (const auto& [key, entry] : models->items()) {
        const std::string where = "models/" + key;
        const auto slash = key.find('/');
        if (slash == std::string::npos || slash == 0 || slash + 1 == key.size()) {
            invalid(where, "keys are \"provider/model\" or \"provider/*\"");
        }
        if (!entry.is_object()) invalid(where, "must be an object");
        for (const auto& [field, _] : entry.items()) {
            if (field != "input" && field != "output" && field != "cached_read" &&
                field != "cached_write" && field != "lastUpdated") {
                invalid(where + "/" + field, "is not a price field");
            }
        }
        ModelPrice price;
        price.input = price_field(entry, "input", where, true);
        price.output = price_field(entry, "output", where, true);
        bool present = false;
        const double read = price_field(entry, "cached_read", where, false, &present);
        if (present) price.cached_read = read;
        const double write = price_field(entry, "cached_write", where, false, &present);
        if (present) price.cached_write = write;
        const auto updated = entry.find("lastUpdated");
        if (updated == entry.end() || !updated->is_string() ||
            !is_date(updated->get<std::string>())) {
            invalid(where + "/lastUpdated", "must be a YYYY-MM-DD date");
        }
        price.last_updated = updated->get<std::string>();
        out[key] = std::move(price);
    }
    return out;
}

// `-2024-08-06`, `-20250514`, `-latest`, `-001`: suffixes that name a snapshot of a model.
bool is_snapshot_suffix(std::string_view rest) {
    if (rest.size() < 2 || rest[0] != '-') return false;
    if (rest == "-latest") return true;
    return std::isdigit(static_cast<unsigned char>(rest[1])) != 0;
}

}  // namespace

const PriceTable& PriceTable::builtin() {
    static const PriceTable table = parse(json::parse(detail::builtin_prices_json));
    return table;
}

PriceTable PriceTable::parse(const json& value) {
    PriceTable table;
    table.prices_ = parse_models(value);
    return table;
}

PriceTable PriceTable::with_overrides(const json& overrides) const {
    auto parsed = parse_models(overrides);  // validates everything before changing anything
    PriceTable table = *this;
    for (auto& [key, price] : parsed) table.prices_[key] = std::move(price);
    return table;
}

std::optional<ModelPrice> PriceTable::find(std::string_view provider,
                                           std::string_view model) const {
    if (model.substr(0, 7) == "models/") model.remove_prefix(7);  // Gemini's resource names
    const std::string prefix = std::string(provider) + "/";
    if (const auto it = prices_.find(prefix + std::string(model)); it != prices_.end()) {
        return it->second;
    }
    // The longest priced base name of a snapshot id.
    const ModelPrice* best = nullptr;
    std::size_t best_length = 0;
    for (auto it = prices_.lower_bound(prefix); it != prices_.end(); ++it) {
        const std::string_view key = it->first;
        if (key.substr(0, prefix.size()) != prefix) break;
        const std::string_view base = key.substr(prefix.size());
        if (base.size() < model.size() && model.substr(0, base.size()) == base &&
            is_snapshot_suffix(model.substr(base.size())) && base.size() > best_length) {
            best = &it->second;
            best_length = base.size();
        }
    }
    if (best != nullptr) return *best;
    if (const auto it = prices_.find(prefix + "*"); it != prices_.end()) return it->second;
    // The Responses API serves OpenAI's models at OpenAI's prices.
    if (provider == "openai-responses") return find("openai", model);
    return std::nullopt;
}

ModelPrice PriceTable::require(std::string_view provider, std::string_view model) const {
    if (auto price = find(provider, model)) return *price;
    throw ProviderCapabilityError(
        ErrorCode::unknown_model_pricing,
        "no price is known for " + std::string(provider) + "/" + std::string(model) +
            "; add one with PriceTable::with_overrides to use a budget with it");
}

double PriceTable::cost(const ModelPrice& price, const Usage& usage) noexcept {
    const auto cached_read = static_cast<double>(usage.cached_read_tokens);
    const auto cached_write = static_cast<double>(usage.cached_write_tokens);
    const double uncached =
        std::max(0.0, static_cast<double>(usage.input_tokens) - cached_read - cached_write);
    const double total = uncached * price.input +
                         cached_read * price.cached_read.value_or(price.input) +
                         cached_write * price.cached_write.value_or(price.input) +
                         static_cast<double>(usage.output_tokens) * price.output;
    return total / 1'000'000.0;
}

}  // namespace ullm
