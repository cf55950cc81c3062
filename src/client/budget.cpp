#include <ullm/client/budget.hpp>

#include <ullm/core/error.hpp>

#include <cmath>
#include <cstdio>

namespace ullm {

std::string_view to_string(BudgetAction action) noexcept {
    switch (action) {
        case BudgetAction::throw_error:
            return "throw";
        case BudgetAction::warn:
            return "warn";
        case BudgetAction::skip:
            return "skip";
    }
    return "unknown";
}

namespace detail {

void check_budget(const std::optional<double>& usd, const char* what) {
    if (usd && (!std::isfinite(*usd) || *usd < 0)) {
        throw InvalidOptionError(
            ErrorCode::invalid_budget,
            std::string(what) + " must be a finite number of USD that is not negative");
    }
}

void check_budget_action(BudgetAction action) {
    if (action != BudgetAction::throw_error && action != BudgetAction::warn &&
        action != BudgetAction::skip) {
        throw InvalidOptionError(ErrorCode::invalid_budget_action,
                                 "budget_action must be throw, warn or skip");
    }
}

std::string format_usd(double value) {
    char text[64];
    std::snprintf(text, sizeof text, "$%.6f", value);
    return text;
}

bool admit_over_budget(const BudgetWarning& over, BudgetAction action,
                       const std::function<void(const BudgetWarning&)>& on_warning) {
    switch (action) {
        case BudgetAction::throw_error:
            throw BudgetExceededError(over.message, over.remaining_usd, over.estimated_usd);
        case BudgetAction::warn:
            if (on_warning) {
                try {
                    on_warning(over);
                } catch (...) {
                    // A warning callback cannot stop the request.
                }
            }
            return true;
        case BudgetAction::skip:
            break;
    }
    return false;
}

ChatResponse budget_skipped_response(const std::string& message, std::string model,
                                     std::string provider) {
    ChatResponse response;
    response.text = "Budget exceeded: " + message + ".";
    response.message = Message::assistant(response.text);
    response.finish_reason = FinishReason::error;
    response.raw_finish_reason = "budget_exceeded";
    response.usage.cost_usd = 0.0;
    response.model = std::move(model);
    response.provider = std::move(provider);
    return response;
}

}  // namespace detail

}  // namespace ullm
