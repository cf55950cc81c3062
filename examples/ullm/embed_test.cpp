// `ullm embed` against an in-process OpenAI-compatible server: the texts go out as one request
// with the dimensions asked for, and one JSON line comes back with the vectors in input order.
//   ullm_cli_embed_test PATH_TO_ULLM

#include <ullm/core/json.hpp>

#include <cstdio>
#include <string>

#include "cli_check.hpp"
#include "support/test_server.hpp"

namespace {

using ullm::json;

using ullm_cli_test::check;
using ullm_cli_test::failures;
using ullm_cli_test::run;

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: ullm_cli_embed_test PATH_TO_ULLM\n");
        return 64;
    }
    ullm::test::TestServer server;
    server.set_handler([](const ullm::test::RecordedRequest& request) {
        const json body = json::parse(request.body);
        json data = json::array();
        // Answered out of order: the vectors must come back by index.
        for (std::size_t i = body["input"].size(); i-- > 0;) {
            const float first = static_cast<float>(body["input"][i].get<std::string>().size());
            data.push_back({{"index", i}, {"embedding", {first, -0.25, 0.001}}});
        }
        return ullm::test::ScriptedResponse::json(
            200, json{{"model", "mini-embed"},
                      {"data", data},
                      {"usage", {{"prompt_tokens", 4}, {"total_tokens", 4}}}}
                     .dump());
    });

    int status = -1;
    const std::string out =
        run(std::string("'") + argv[1] + "' embed --base-url " + server.base_url() +
                "/v1 --model mini-embed --dimensions 3 " + "'a cat' 'the dog'",
            status);
    check(status == 0, "ullm embed exits 0");
    check(out ==
              "{\"model\":\"mini-embed\",\"dimensions\":3,\"requests\":1,\"budget_skipped\":false,"
              "\"usage\":{\"input_tokens\":4,\"output_tokens\":0,\"cached_read_tokens\":0,"
              "\"cached_write_tokens\":0,\"reasoning_tokens\":0,\"cost_usd\":null},"
              "\"embeddings\":[[5,-0.25,0.001],[7,-0.25,0.001]]}\n",
          "it prints the vectors in input order as one JSON line: " + out);
    const auto sent = server.requests();
    check(sent.size() == 1 && sent[0].target == "/v1/embeddings", "one POST to /v1/embeddings");
    if (!sent.empty()) {
        const json body = json::parse(sent[0].body);
        check(body == json{{"model", "mini-embed"},
                           {"input", {"a cat", "the dog"}},
                           {"encoding_format", "float"},
                           {"dimensions", 3}},
              "with the texts and the dimensions: " + sent[0].body);
    }
    if (failures == 0) std::printf("all embed checks passed\n");
    return failures == 0 ? 0 : 1;
}
