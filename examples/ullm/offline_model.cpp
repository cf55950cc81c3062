#include "offline_model.hpp"

#include <ullm/core/error.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

namespace ullm_cli {

namespace {

using ullm::json;

constexpr const char* story =
    "Once upon a time a small program learned to talk to large models. It sent each word "
    "down a socket, listened for the answer one token at a time, and wrote everything down "
    "so that nothing was ever lost. When the user grew tired of a story, a single Ctrl-C was "
    "enough: the program stopped mid-sentence, kept the conversation as it was before, and "
    "asked what to do next. And it never once needed the internet to tell this tale.";

std::string lower(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
}

bool offers(const ullm::ChatRequest& request, const std::string& tool) {
    return std::any_of(
        request.tools.begin(), request.tools.end(),
        [&](const ullm::ToolDeclaration& declared) { return declared.name == tool; });
}

// The longest run of calculator characters that holds a digit and an operator.
std::string find_expression(const std::string& text) {
    const std::string allowed = "0123456789.+-*/%^() ";
    std::string best;
    std::size_t i = 0;
    while (i < text.size()) {
        std::size_t j = i;
        while (j < text.size() && allowed.find(text[j]) != std::string::npos) ++j;
        std::string run = text.substr(i, j - i);
        const bool digit = run.find_first_of("0123456789") != std::string::npos;
        const bool op = run.find_first_of("+-*/%^") != std::string::npos;
        if (digit && op && run.size() > best.size()) best = run;
        i = j == i ? i + 1 : j;
    }
    const auto first = best.find_first_not_of(' ');
    const auto last = best.find_last_not_of(' ');
    return first == std::string::npos ? std::string() : best.substr(first, last - first + 1);
}

std::string number(double value) {
    if (std::fabs(value - std::round(value)) < 1e-9 && std::fabs(value) < 1e15) {
        return std::to_string(static_cast<long long>(std::llround(value)));
    }
    char text[64];
    std::snprintf(text, sizeof text, "%.10g", value);
    return text;
}

// What the model says about the results of its tool calls.
std::string about_results(const std::vector<ullm::ToolResultPart>& results) {
    std::string out;
    for (const auto& result : results) {
        if (!out.empty()) out += " ";
        if (result.is_error) {
            out += "The tool " + result.name + " reported: " +
                   (result.result.is_string() ? result.result.get<std::string>()
                                              : result.result.dump());
        } else if (result.name == "current_time") {
            out += "It is " + result.result.value("local", std::string("?")) + " (" +
                   result.result.value("utc", std::string("?")) + ").";
        } else if (result.name == "calculate") {
            out += result.result.value("expression", std::string("?")) + " = " +
                   number(result.result.value("value", 0.0)) + ".";
        } else if (result.name == "read_file") {
            const auto text = result.result.value("text", std::string());
            out += result.result.value("path", std::string("The file")) + " has " +
                   std::to_string(std::count(text.begin(), text.end(), '\n')) +
                   " lines. It begins: \"" + text.substr(0, 80) + "\"";
        } else {
            out += "The tool " + result.name + " answered " + result.result.dump() + ".";
        }
    }
    return out;
}

// The answer to a user message: a tool call when one fits, text otherwise.
ullm::ChatResponse answer_user(const ullm::ChatRequest& request, const std::string& said) {
    const std::string text = lower(said);
    ullm::ChatResponse response;
    const auto call = [&](std::string tool, json arguments) {
        ullm::ToolCallPart part{"offline_" + std::to_string(request.messages.size()),
                                std::move(tool), std::move(arguments)};
        response.message = ullm::Message::assistant("");
        response.message.parts = {part};
        response.tool_calls = {part};
        response.finish_reason = ullm::FinishReason::tool_call;
    };
    const std::string expression = find_expression(said);
    if (text.rfind("read ", 0) == 0 && offers(request, "read_file")) {
        call("read_file", {{"path", said.substr(5)}});
    } else if ((text.find("time") != std::string::npos || text.find("date") != std::string::npos) &&
               offers(request, "current_time")) {
        call("current_time", json::object());
    } else if (!expression.empty() && offers(request, "calculate")) {
        call("calculate", {{"expression", expression}});
    } else if (text.find("story") != std::string::npos) {
        response.text = story;
    } else {
        response.text =
            "I am the offline model: I only know a few tricks. Ask me the time, a sum such as "
            "12 * (3 + 4), for a story (and press Ctrl-C to stop it), or to \"read FILE\" with "
            "--allow-dir. Set an API key to talk to a real model.";
    }
    if (!response.text.empty()) {
        response.message = ullm::Message::assistant(response.text);
        response.finish_reason = ullm::FinishReason::stop;
    }
    return response;
}

std::int64_t tokens_of(const std::string& text) {
    return static_cast<std::int64_t>(text.size() / 4 + 1);
}

// The answer to `request`, with the usage a model would count for it.
ullm::ChatResponse answer(const ullm::ChatRequest& request) {
    ullm::ChatResponse response;
    if (!request.messages.empty() && request.messages.back().role == ullm::Role::tool) {
        response.text = about_results(request.messages.back().tool_results());
        response.message = ullm::Message::assistant(response.text);
        response.finish_reason = ullm::FinishReason::stop;
    } else {
        const std::string said =
            request.messages.empty() ? std::string() : request.messages.back().text();
        response = answer_user(request, said);
    }
    std::int64_t input = tokens_of(request.system);
    for (const auto& message : request.messages)
        input += tokens_of(ullm::message_to_json(message).dump());
    response.usage.input_tokens = input;
    response.usage.output_tokens =
        tokens_of(response.text) + static_cast<std::int64_t>(response.tool_calls.size()) * 12;
    response.usage.cost_usd = 0.0;
    response.model = request.model;
    response.provider = "offline";
    return response;
}

}  // namespace

std::shared_ptr<ullm::ScriptedProvider> offline_model(std::chrono::milliseconds word_delay) {
    auto model = std::make_shared<ullm::ScriptedProvider>("offline", word_delay);
    // Nothing is queued: every request is answered by the rules.
    model->answer_with(
        [](const ullm::ChatRequest& request) { return ullm::ScriptedTurn{answer(request)}; });
    // A long session would otherwise keep a copy of every request, each with the history.
    model->keep_requests(0);
    return model;
}

}  // namespace ullm_cli
