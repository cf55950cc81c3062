#include "output.hpp"

#include <cstdio>
#include <string>

namespace ullm_cli {

out_json usage_json(const ullm::Usage& usage) {
    return {{"input_tokens", usage.input_tokens},
            {"output_tokens", usage.output_tokens},
            {"cached_read_tokens", usage.cached_read_tokens},
            {"cached_write_tokens", usage.cached_write_tokens},
            {"reasoning_tokens", usage.reasoning_tokens},
            {"cost_usd", usage.cost_usd ? out_json(*usage.cost_usd) : out_json(nullptr)}};
}

out_json event_json(const ullm::StreamEvent& event) {
    out_json out = {{"type", ullm::to_string(event.type)}};
    using Type = ullm::StreamEvent::Type;
    switch (event.type) {
        case Type::text_delta:
        case Type::reasoning_delta:
            out["delta"] = event.delta;
            break;
        case Type::tool_call_start:
            out["id"] = event.tool_call_id;
            out["name"] = event.tool_name;
            break;
        case Type::tool_call_delta:
            out["id"] = event.tool_call_id;
            out["delta"] = event.delta;
            break;
        case Type::tool_call_end:
            out["id"] = event.tool_call_id;
            out["name"] = event.tool_name;
            if (event.tool_call) out["arguments"] = event.tool_call->arguments;
            break;
        case Type::usage_update:
            if (event.usage) out["usage"] = usage_json(*event.usage);
            break;
        case Type::retry:
            out["attempt"] = event.attempt;
            out["delay_ms"] = event.delay.count();
            out["error_code"] = event.error_code;
            break;
        case Type::tool_call_result:
            break;
        case Type::done:
            if (event.response)
                out["finish_reason"] = ullm::to_string(event.response->finish_reason);
            break;
    }
    return out;
}

out_json response_json(const ullm::ChatResponse& response) {
    out_json calls = out_json::array();
    for (const auto& call : response.tool_calls) {
        calls.push_back({{"id", call.id}, {"name", call.name}, {"arguments", call.arguments}});
    }
    return {{"text", response.text},
            {"reasoning_text", response.reasoning_text},
            {"tool_calls", calls},
            {"finish_reason", ullm::to_string(response.finish_reason)},
            {"usage", usage_json(response.usage)},
            {"model", response.model},
            {"provider", response.provider},
            {"request_id", response.request_id},
            {"refusal", response.refusal ? out_json(*response.refusal) : out_json(nullptr)}};
}

out_json error_json(const ullm::Error& error) {
    return {{"error",
             {{"code", error.code()}, {"status", error.status()}, {"message", error.message()}}}};
}

void print_line(const out_json& value) {
    const std::string line = value.dump(-1, ' ', false, out_json::error_handler_t::replace);
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
}

}  // namespace ullm_cli
