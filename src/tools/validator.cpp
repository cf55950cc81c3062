#include <ullm/tools/validator.hpp>

#include "argument_checker.hpp"
#include "schema_checker.hpp"

#include <memory>
#include <utility>

namespace ullm {

using detail::validation::check_arguments;
using detail::validation::check_schema;
using detail::validation::check_value;
using detail::validation::PatternMap;

void validate_schema(const json& schema) {
    (void)check_schema(schema, true);
}

void validate_value_schema(const json& schema) {
    (void)check_schema(schema, false);
}

void validate_arguments(const json& schema, const json& arguments) {
    check_arguments(schema, arguments, nullptr);
}

void validate_value(const json& schema, const json& value) {
    check_value(schema, value, nullptr);
}

struct CompiledSchema::State {
    json schema;
    PatternMap patterns;
};

CompiledSchema::CompiledSchema(std::shared_ptr<const State> state) noexcept
    : state_(std::move(state)) {}

CompiledSchema CompiledSchema::parameters(json schema) {
    auto patterns = check_schema(schema, true);
    return CompiledSchema(
        std::make_shared<const State>(State{std::move(schema), std::move(patterns)}));
}

CompiledSchema CompiledSchema::value(json schema) {
    auto patterns = check_schema(schema, false);
    return CompiledSchema(
        std::make_shared<const State>(State{std::move(schema), std::move(patterns)}));
}

const json& CompiledSchema::schema() const noexcept {
    return state_->schema;
}

void CompiledSchema::validate_arguments(const json& arguments) const {
    check_arguments(state_->schema, arguments, &state_->patterns);
}

void CompiledSchema::validate_value(const json& value) const {
    check_value(state_->schema, value, &state_->patterns);
}

}  // namespace ullm
