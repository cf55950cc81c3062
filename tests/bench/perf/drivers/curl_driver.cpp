// The floor: raw libcurl (one easy handle reused, so one keep-alive connection) plus
// nlohmann::json to build each request body, parse each unary body and each SSE data line.
// The SSE parser is a minimal line splitter (data:/event:, blank line dispatches).
// (ullm's in-tree copy of ../shared/perf/drivers/curl_driver.cpp: adds Google Gemini
// generateContent / streamGenerateContent?alt=sse and OpenAI Responses, scenarios gem-* and rsp-*.)
#include <curl/curl.h>

#include <nlohmann/json.hpp>

#include "common.hpp"

namespace {

using nlohmann::json;

enum class Api { oai, ant, gem, rsp };

Api api_of(const perf::Args& a) {
    return a.anthropic() ? Api::ant : a.gemini() ? Api::gem : a.responses() ? Api::rsp : Api::oai;
}

struct Sse {
    Api api = Api::oai;
    bool finished = false;  // gem: a chunk carried a finishReason (the stream must end after it)
    std::string buf;  // bytes not yet split into lines
    std::string data;
    bool have_data = false;
    bool done = false;
    perf::Outcome* out = nullptr;

    void dispatch() {
        if (!have_data) return;
        have_data = false;
        if (data == "[DONE]") {
            done = true;
            data.clear();
            return;
        }
        json j = json::parse(data, nullptr, /*allow_exceptions=*/false);
        data.clear();
        if (j.is_discarded()) {
            out->error = "bad SSE json";
            return;
        }
        if (api == Api::gem) {
            if (j.contains("error")) {
                out->error = "stream error chunk";
                return;
            }
            auto ch = j.find("candidates");
            if (ch == j.end() || !ch->is_array() || ch->empty()) return;
            const json& c = (*ch)[0];
            auto content = c.find("content");
            if (content != c.end()) {
                auto parts = content->find("parts");
                if (parts != content->end() && parts->is_array())
                    for (const auto& part : *parts) {
                        auto t = part.find("text");
                        if (t == part.end() || !t->is_string() || part.value("thought", false)) continue;
                        const std::string& s = t->get_ref<const std::string&>();
                        if (!s.empty()) {
                            out->text += s;
                            ++out->events;
                        }
                    }
            }
            if (c.contains("finishReason")) finished = true;
        } else if (api == Api::rsp) {
            auto t = j.find("type");
            if (t == j.end()) return;
            if (*t == "response.output_text.delta") {
                const std::string& s = j["delta"].get_ref<const std::string&>();
                if (!s.empty()) {
                    out->text += s;
                    ++out->events;
                }
            } else if (*t == "response.completed") {
                done = true;
            } else if (*t == "error" || *t == "response.failed" || *t == "response.incomplete") {
                out->error = "stream error event";
            }
        } else if (api == Api::ant) {
            auto t = j.find("type");
            if (t == j.end()) return;
            if (*t == "content_block_delta") {
                const json& d = j["delta"];
                if (d.value("type", "") == "text_delta") {
                    out->text += d["text"].get_ref<const std::string&>();
                    ++out->events;
                }
            } else if (*t == "message_stop") {
                done = true;
            } else if (*t == "error") {
                out->error = "stream error event";
            }
        } else {
            auto ch = j.find("choices");
            if (ch == j.end() || !ch->is_array() || ch->empty()) return;
            const json& d = (*ch)[0]["delta"];
            auto c = d.find("content");
            if (c != d.end() && c->is_string()) {
                const std::string& s = c->get_ref<const std::string&>();
                if (!s.empty()) {
                    out->text += s;
                    ++out->events;
                }
            }
        }
    }

    void feed(const char* p, size_t n) {
        buf.append(p, n);
        size_t pos = 0;
        for (;;) {
            size_t nl = buf.find('\n', pos);
            if (nl == std::string::npos) break;
            size_t end = nl;
            if (end > pos && buf[end - 1] == '\r') --end;
            if (end == pos) {
                dispatch();
            } else if (buf.compare(pos, 5, "data:") == 0) {
                size_t v = pos + 5;
                if (v < end && buf[v] == ' ') ++v;
                if (have_data) data += '\n';
                data.append(buf, v, end - v);
                have_data = true;
            }  // event:, id:, retry:, comments: not needed for dispatch here
            pos = nl + 1;
        }
        buf.erase(0, pos);
    }
};

size_t on_body(char* p, size_t sz, size_t nm, void* ud) {
    static_cast<std::string*>(ud)->append(p, sz * nm);
    return sz * nm;
}

size_t on_sse(char* p, size_t sz, size_t nm, void* ud) {
    static_cast<Sse*>(ud)->feed(p, sz * nm);
    return sz * nm;
}

struct Client {
    CURL* h = nullptr;
    curl_slist* headers = nullptr;
    std::string url;

    explicit Client(const perf::Args& a) {
        h = curl_easy_init();
        if (a.gemini())
            url = a.base() + "/v1beta/models/" + perf::kGemModel +
                  (a.streaming() ? ":streamGenerateContent?alt=sse" : ":generateContent");
        else
            url = a.base() + (a.anthropic()   ? "/v1/messages"
                              : a.responses() ? "/v1/responses"
                                              : "/v1/chat/completions");
        headers = curl_slist_append(headers, "Content-Type: application/json");
        headers = curl_slist_append(headers, "Accept: application/json");
        headers = curl_slist_append(headers, "Expect:");
        if (a.anthropic()) {
            headers = curl_slist_append(headers, "x-api-key: sk-ant-test");
            headers = curl_slist_append(headers, "anthropic-version: 2023-06-01");
        } else if (a.gemini()) {
            headers = curl_slist_append(headers, "x-goog-api-key: gem-test");
        } else {
            headers = curl_slist_append(headers, "Authorization: Bearer sk-test");
        }
        headers = curl_slist_append(headers, ("x-mock-events: " + std::to_string(a.n)).c_str());
        curl_easy_setopt(h, CURLOPT_URL, url.c_str());
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    }
    ~Client() {
        curl_slist_free_all(headers);
        curl_easy_cleanup(h);
    }
};

std::string request_body(const perf::Args& a) {
    json j;
    if (a.anthropic()) {
        j = {{"model", perf::kAntModel},
             {"max_tokens", 1024},
             {"system", perf::kSystemPrompt},
             {"messages", json::array({{{"role", "user"}, {"content", perf::kUserPrompt}}})}};
    } else if (a.gemini()) {
        // Streaming or not is in the URL, not the body.
        j = {{"contents",
              json::array({{{"role", "user"}, {"parts", json::array({{{"text", perf::kUserPrompt}}})}}})},
             {"systemInstruction", {{"parts", json::array({{{"text", perf::kSystemPrompt}}})}}},
             {"generationConfig", {{"maxOutputTokens", 1024}}}};
        return j.dump();
    } else if (a.responses()) {
        j = {{"model", perf::kOaiModel},
             {"instructions", perf::kSystemPrompt},
             {"input", json::array({{{"role", "user"}, {"content", perf::kUserPrompt}}})},
             {"max_output_tokens", 1024},
             {"store", false}};
    } else {
        j = {{"model", perf::kOaiModel},
             {"messages", json::array({{{"role", "system"}, {"content", perf::kSystemPrompt}},
                                       {{"role", "user"}, {"content", perf::kUserPrompt}}})}};
    }
    if (a.streaming()) {
        j["stream"] = true;
        if (a.openai_chat()) j["stream_options"] = {{"include_usage", true}};
    }
    return j.dump();
}

}  // namespace

int main(int argc, char** argv) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    perf::Args args = perf::parse_args(argc, argv);
    Client cl(args);
    int rc = perf::run_driver("raw-libcurl", argc, argv, [&](const perf::Args& a, perf::Outcome& o) {
        std::string body = request_body(a);
        curl_easy_setopt(cl.h, CURLOPT_POSTFIELDS, body.c_str());
        curl_easy_setopt(cl.h, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
        std::string resp;
        Sse sse;
        sse.api = api_of(a);
        sse.out = &o;
        if (a.streaming()) {
            curl_easy_setopt(cl.h, CURLOPT_WRITEFUNCTION, on_sse);
            curl_easy_setopt(cl.h, CURLOPT_WRITEDATA, &sse);
        } else {
            curl_easy_setopt(cl.h, CURLOPT_WRITEFUNCTION, on_body);
            curl_easy_setopt(cl.h, CURLOPT_WRITEDATA, &resp);
        }
        CURLcode cc = curl_easy_perform(cl.h);
        if (cc != CURLE_OK) {
            o.error = curl_easy_strerror(cc);
            return false;
        }
        long status = 0;
        curl_easy_getinfo(cl.h, CURLINFO_RESPONSE_CODE, &status);
        if (status != 200) {
            o.error = "HTTP " + std::to_string(status);
            return false;
        }
        if (a.streaming()) {
            sse.dispatch();
            if (sse.api == Api::gem) sse.done = sse.finished;  // Gemini has no terminator event
            if (!sse.done && o.error.empty()) o.error = "stream ended without terminator";
            return o.error.empty();
        }
        json j = json::parse(resp, nullptr, false);
        if (j.is_discarded()) {
            o.error = "bad json";
            return false;
        }
        if (a.anthropic()) {
            for (const auto& b : j["content"])
                if (b.value("type", "") == "text") o.text += b["text"].get_ref<const std::string&>();
        } else if (a.gemini()) {
            for (const auto& p : j["candidates"][0]["content"]["parts"])
                if (p.contains("text") && !p.value("thought", false))
                    o.text += p["text"].get_ref<const std::string&>();
        } else if (a.responses()) {
            for (const auto& item : j["output"])
                if (item.value("type", "") == "message")
                    for (const auto& c : item["content"])
                        if (c.value("type", "") == "output_text")
                            o.text += c["text"].get_ref<const std::string&>();
        } else {
            o.text = j["choices"][0]["message"]["content"].get<std::string>();
        }
        return true;
    });
    curl_global_cleanup();
    return rc;
}
