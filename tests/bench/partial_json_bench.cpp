// Google Benchmark: what PartialJsonParser costs when a structured-output reply streams in one
// byte per delta, used the way Client::stream_object uses it (feed each delta; when feed says the
// value changed, the partial value is handed out by reference). Sizes from 12.5 kB to 100 kB show
// whether the cost per byte stays flat (linear in the text) or grows with it; the baselines are
// the same text fed in one piece and nlohmann's json::parse of the whole text once.

#include <ullm/core/json.hpp>
#include <ullm/core/partial_json.hpp>

#include <benchmark/benchmark.h>
#include <fmt/core.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <string_view>

namespace {

using ullm::json;

// One inventory record of the kind a structured-output schema asks for: strings (with JSON
// escapes, \u escapes, a surrogate pair and raw UTF-8), integers, decimals, negatives, exponents,
// literals, an array and objects nested three deep.
void append_record(std::string& out, std::size_t index, std::mt19937& random) {
    std::uniform_int_distribution<int> quantity(0, 500);
    std::uniform_real_distribution<double> price(0.5, 2500.0);
    std::uniform_real_distribution<double> coordinate(-90.0, 90.0);
    static constexpr const char* colours[] = {"red", "green", "blue", "black", "white"};
    static constexpr const char* cities[] = {"Z\\u00fcrich", "S\u00e3o Paulo", "Berlin", "New York",
                                             "\\u6771\\u4eac"};
    const int stock = quantity(random);
    out += fmt::format(
        R"({{"id":{},"sku":"SKU-{:06}","name":"Widget {} \"{}\" edition","price":{:.2f},)"
        R"("quantity":{},"in_stock":{},"discount":{},"weight_kg":{:.3e},)"
        R"("tags":["{}","size-{}","sale","{}"],)"
        R"("dimensions":{{"width":{:.1f},"height":{:.2f},"depth":-{:.2f},"unit":"cm"}},)"
        R"("supplier":{{"name":"Acme \\ Sons","address":{{"street":"{} Main St\/Unit {}",)"
        R"("city":"{}","geo":{{"lat":{:.4f},"lon":{:.4f}}}}}}},)"
        R"("note":"Line one\nLine \"two\"\ttabbed, caf\u00e9 \ud83d\ude80 \u2014 ok"}})",
        index, index, index, colours[index % 5], price(random), stock, stock > 0 ? "true" : "false",
        index % 3 == 0 ? "null" : "0.15", price(random) / 1000.0, colours[(index + 2) % 5],
        index % 4, index % 7 == 0 ? "clearance" : "regular", price(random) / 50.0,
        price(random) / 300.0, price(random) / 900.0, index % 200 + 1, index % 40,
        cities[index % 5], coordinate(random), coordinate(random) * 2.0);
}

// A reply of about `size` bytes (the first record past it ends the array): a report object with
// an array of records and a few members around it. The same size always gives the same text.
const std::string& document(std::size_t size) {
    static std::map<std::size_t, std::string> made;
    std::string& text = made[size];
    if (!text.empty()) return text;
    std::mt19937 random(static_cast<std::mt19937::result_type>(size));
    text = R"({"report":"inventory","version":3,"generated_at":"2025-05-20T10:00:00Z",)"
           R"("records":[)";
    std::size_t records = 0;
    while (text.size() < size) {
        if (records != 0) text += ',';
        append_record(text, records++, random);
    }
    text += fmt::format(R"(],"total":{},"complete":true}})", records);
    return text;
}

// Feeds `text` one byte per delta and reads the partial value after each delta that changed it,
// as ObjectStreamCore::next does. Returns how many partial values were handed out.
std::size_t stream_bytes(std::string_view text, bool& finished) {
    ullm::PartialJsonParser parser;
    std::size_t partials = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (parser.feed(text.substr(i, 1))) {
            const json* partial = &parser.value();
            benchmark::DoNotOptimize(partial);
            ++partials;
        }
    }
    finished = parser.finish();
    return partials;
}

// The streamed value must be the parsed one, or the figures measure something else.
bool same_as_parse(std::string_view text) {
    ullm::PartialJsonParser parser;
    for (std::size_t i = 0; i < text.size(); ++i) parser.feed(text.substr(i, 1));
    const json parsed = json::parse(text, nullptr, false);
    return !parsed.is_discarded() && parser.finish() && parser.value() == parsed;
}

void set_figures(benchmark::State& state, std::size_t bytes) {
    state.SetComplexityN(static_cast<std::int64_t>(bytes));
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                            static_cast<std::int64_t>(bytes));
    state.counters["text_bytes"] = static_cast<double>(bytes);
    // Time per input byte: flat across sizes when the cost is linear.
    state.counters["per_byte"] = benchmark::Counter(
        static_cast<double>(bytes),
        benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_partial_json_one_byte_deltas(benchmark::State& state) {
    const std::string& text = document(static_cast<std::size_t>(state.range(0)));
    if (!same_as_parse(text)) {
        state.SkipWithError("the streamed value differs from json::parse");
        return;
    }
    std::size_t partials = 0;
    for (auto _ : state) {
        bool finished = false;
        partials = stream_bytes(text, finished);
        if (!finished) {
            state.SkipWithError("the parser did not finish the text");
            break;
        }
    }
    set_figures(state, text.size());
    state.counters["partials"] = static_cast<double>(partials);
}

void BM_partial_json_one_feed(benchmark::State& state) {
    const std::string& text = document(static_cast<std::size_t>(state.range(0)));
    for (auto _ : state) {
        ullm::PartialJsonParser parser;
        parser.feed(text);
        if (!parser.finish()) {
            state.SkipWithError("the parser did not finish the text");
            break;
        }
        benchmark::DoNotOptimize(&parser.value());
    }
    set_figures(state, text.size());
}

void BM_nlohmann_parse_whole_text(benchmark::State& state) {
    const std::string& text = document(static_cast<std::size_t>(state.range(0)));
    for (auto _ : state) {
        json value = json::parse(text);
        benchmark::DoNotOptimize(&value);
    }
    set_figures(state, text.size());
}

}  // namespace

BENCHMARK(BM_partial_json_one_byte_deltas)
    ->Arg(12'500)
    ->Arg(25'000)
    ->Arg(50'000)
    ->Arg(100'000)
    ->Unit(benchmark::kMicrosecond)
    ->Complexity(benchmark::oN);
BENCHMARK(BM_partial_json_one_feed)
    ->Arg(12'500)
    ->Arg(25'000)
    ->Arg(50'000)
    ->Arg(100'000)
    ->Unit(benchmark::kMicrosecond)
    ->Complexity(benchmark::oN);
BENCHMARK(BM_nlohmann_parse_whole_text)
    ->Arg(12'500)
    ->Arg(25'000)
    ->Arg(50'000)
    ->Arg(100'000)
    ->Unit(benchmark::kMicrosecond)
    ->Complexity(benchmark::oN);

BENCHMARK_MAIN();
