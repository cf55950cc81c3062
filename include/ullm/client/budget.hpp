#pragma once

/// Budgets: what happens when the next request could cost more than a cap allows. Direct calls
/// take a `CallBudget` (`Client::complete`, `Client::stream`); conversations take their caps
/// in `ConversationOptions` and `SendOptions`.

#include <ullm/providers/chat.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace ullm {

/// What happens when the next model request could exceed a budget.
enum class BudgetAction {
    throw_error,  ///< Throw `BudgetExceededError` before the request ("throw").
    warn,         ///< Call the warning callback once, then send anyway ("warn").
    skip,         ///< Send nothing; return a synthetic reply with zero usage ("skip").
};

/// "throw", "warn" or "skip".
[[nodiscard]] std::string_view to_string(BudgetAction action) noexcept;

/// What the warning callback of `BudgetAction::warn` is told. Holds only budget figures and
/// the model and provider: no prompt text, no credentials.
struct BudgetWarning {
    /// Which cap the request would exceed: "request" (a direct call), "conversation" or "turn".
    std::string scope;
    double budget_usd = 0;     ///< That cap.
    double remaining_usd = 0;  ///< What the cap still allows.
    double estimated_usd = 0;  ///< What the next request could cost at most.
    std::string model;
    std::string provider;
    std::string message;  ///< The figures in one sentence.
};

/// A spend cap for one direct call. The request's worst-case cost (`Client::estimate`: the
/// prompt's estimated tokens plus the whole output limit) is compared with `usd` before
/// anything is sent; a model without a price fails with `unknown_model_pricing`.
struct CallBudget {
    double usd = 0;  ///< The cap in USD (finite, ≥ 0).
    BudgetAction action = BudgetAction::throw_error;
    /// Called once under `BudgetAction::warn`; exceptions it throws are ignored.
    std::function<void(const BudgetWarning&)> on_warning;
};

namespace detail {

/// Throws `ProviderCapabilityError` `invalid_budget` when `usd` is set and not a finite number
/// ≥ 0; `what` names the option in the message.
void check_budget(const std::optional<double>& usd, const char* what);

/// Throws `ProviderCapabilityError` `invalid_budget_action` for a value outside the enum.
void check_budget_action(BudgetAction action);

/// `value` as "$0.000123" (six decimals).
[[nodiscard]] std::string format_usd(double value);

/// What a request that could cost more than a cap allows does, by `action`: `throw_error`
/// throws `BudgetExceededError` (with `over.message` and figures); `warn` calls `on_warning`
/// when set (exceptions it throws are ignored) and returns true (send); `skip` returns false
/// (send nothing). One rule for direct calls and conversations.
[[nodiscard]] bool admit_over_budget(const BudgetWarning& over, BudgetAction action,
                                     const std::function<void(const BudgetWarning&)>& on_warning);

/// The reply of a skipped request: text `Budget exceeded: <message>.`, finish reason `error`
/// (`budget_exceeded`), zero usage and cost.
[[nodiscard]] ChatResponse budget_skipped_response(const std::string& message, std::string model,
                                                   std::string provider);

}  // namespace detail

}  // namespace ullm
