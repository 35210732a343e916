// Byte-level BPE (nn/tokenizer.h) and the tokenize program: minbpe's worked
// example, its merges on tiny Shakespeare against a second implementation
// (tests/fixtures/make_bpe_fixture.py), decoding with replacement against
// Python's bytes.decode("utf-8", errors="replace"), round trips, minbpe's
// file format, and every error.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <ember.h>

#include "process.h"

using namespace ember;
using namespace ember::tokenizer;
namespace fs = std::filesystem;

namespace {

std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string scratch(const std::string& name) {
    const std::string dir = (fs::temp_directory_path() / ("ember_tokenizer_" + name)).string();
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

const std::string kProgram = std::string(EMBER_EXAMPLES_DIR) + "/tokenize";

} // namespace

TEST_CASE("minbpe's worked example: aaabdaaabac with three merges", "[tokenizer]") {
    BasicTokenizer t;
    std::vector<std::string> printed;
    t.train("aaabdaaabac", 256 + 3, [&](const MergeStep& s) { printed.push_back(describe(s)); });
    REQUIRE(t.merges() == std::vector<Pair>{{97, 97}, {256, 97}, {257, 98}});
    CHECK(t.vocab_size() == 259);
    CHECK(t.token_bytes(258) == "aaab");
    CHECK(t.encode("aaabdaaabac") == std::vector<int>{258, 100, 258, 97, 99});
    CHECK(t.decode({258, 100, 258, 97, 99}) == "aaabdaaabac");
    // As minbpe's verbose training prints them.
    CHECK(printed == std::vector<std::string>{"merge 1/3: (97, 97) -> 256 (b'aa') had 4 occurrences",
                                              "merge 2/3: (256, 97) -> 257 (b'aaa') had 2 occurrences",
                                              "merge 3/3: (257, 98) -> 258 (b'aaab') had 2 occurrences"});
}

TEST_CASE("count_pairs and merge: minbpe's get_stats and merge", "[tokenizer]") {
    const std::vector<PairCount> c = count_pairs({1, 2, 3, 1, 2});
    REQUIRE(c.size() == 3);
    CHECK((c[0].pair == Pair{1, 2} && c[0].count == 2 && c[0].first == 0));
    CHECK((c[1].pair == Pair{2, 3} && c[1].count == 1 && c[1].first == 1));
    CHECK((c[2].pair == Pair{3, 1} && c[2].count == 1 && c[2].first == 2));
    CHECK(count_pairs({7}).empty());
    CHECK(merge({97, 97, 97}, {97, 97}, 256) == std::vector<int>{256, 97}); // left to right, no overlap
    CHECK(merge({1, 2, 1, 2, 3}, {1, 2}, 9) == std::vector<int>{9, 9, 3});
    // Equal counts: the pair seen first wins (minbpe's max over a dict in insertion order).
    BasicTokenizer t;
    t.train("abcd", 257);
    CHECK(t.merges() == std::vector<Pair>{{97, 98}});
    // A text of one byte has no pair: training stops with no merge.
    t.train("a", 300);
    CHECK(t.merges().empty());
}

TEST_CASE("on tiny Shakespeare, the merges of a second implementation", "[tokenizer][data][heavy]") {
    std::ifstream fixture(std::string(EMBER_FIXTURE_DIR) + "/bpe_shakespeare.txt");
    REQUIRE(fixture);
    std::string line;
    std::getline(fixture, line); // the header
    std::vector<PairCount> expected;
    int64_t tokens = -1;
    while (std::getline(fixture, line)) {
        std::istringstream f(line);
        if (line.rfind("tokens ", 0) == 0) {
            std::string word;
            f >> word >> tokens;
            continue;
        }
        int a = 0, b = 0, id = 0;
        int64_t count = 0;
        f >> a >> b >> id >> count;
        expected.push_back({{a, b}, count, id});
    }
    REQUIRE(expected.size() == 256);
    const std::string text = read(std::string(EMBER_DATA_DIR) + "/tinyshakespeare.txt");
    BasicTokenizer t;
    std::vector<MergeStep> steps;
    t.train(text, 512, [&](const MergeStep& s) { steps.push_back(s); });
    REQUIRE(steps.size() == 256);
    for (size_t i = 0; i < 256; ++i) {
        INFO("merge " << i + 1 << ": " << describe(steps[i]));
        CHECK(steps[i].pair == expected[i].pair);
        CHECK(steps[i].id == expected[i].first); // (the fixture's id column)
        CHECK(steps[i].count == expected[i].count);
    }
    const std::vector<int> ids = t.encode(text);
    CHECK(static_cast<int64_t>(ids.size()) == tokens);
    CHECK(t.decode(ids) == text);
}

TEST_CASE("decode replaces invalid UTF-8 as Python's errors=\"replace\" does", "[tokenizer]") {
    // Each pair: bytes, then b.decode("utf-8", "replace").encode() from Python 3.11.
    const std::vector<std::pair<std::string, std::string>> cases = {
        {std::string("\x61\x62\x63", 3), std::string("\x61\x62\x63", 3)},
        {std::string("\xc3\xa9", 2), std::string("\xc3\xa9", 2)},
        {std::string("\xff", 1), std::string("\xef\xbf\xbd", 3)},
        {std::string("\xc3", 1), std::string("\xef\xbf\xbd", 3)},
        {std::string("\xc3\x28", 2), std::string("\xef\xbf\xbd\x28", 4)},
        {std::string("\xe2\x82", 2), std::string("\xef\xbf\xbd", 3)},
        {std::string("\xe2\x82\x28", 3), std::string("\xef\xbf\xbd\x28", 4)},
        {std::string("\xed\xa0\x80", 3), std::string("\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 9)},
        {std::string("\xf0\x9f\x98", 3), std::string("\xef\xbf\xbd", 3)},
        {std::string("\xf0\x9f\x98\x80", 4), std::string("\xf0\x9f\x98\x80", 4)},
        {std::string("\xf4\x90\x80\x80", 4), std::string("\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 12)},
        {std::string("\xc0\xaf", 2), std::string("\xef\xbf\xbd\xef\xbf\xbd", 6)},
        {std::string("\xe0\x80\xaf", 3), std::string("\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 9)},
        {std::string("\x61\x80\x62", 3), std::string("\x61\xef\xbf\xbd\x62", 5)},
        {std::string("\xf8\x88\x80\x80\x80", 5),
         std::string("\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 15)},
        {std::string("\xef\xbf\xbd", 3), std::string("\xef\xbf\xbd", 3)},
    };
    BasicTokenizer t;
    for (const auto& [bytes, text] : cases) {
        CHECK(utf8_replace_invalid(bytes) == text);
        std::vector<int> ids;
        for (unsigned char c : bytes) ids.push_back(c);
        CHECK(t.decode(ids) == text);
        CHECK(t.decode_bytes(ids) == bytes);
    }
}

TEST_CASE("bytes_repr prints as Python's repr of bytes", "[tokenizer]") {
    // Expected: repr(b) in Python 3.11.
    CHECK(bytes_repr("e ") == "b'e '");
    CHECK(bytes_repr("\n") == "b'\\n'");
    CHECK(bytes_repr("'s") == "b\"'s\"");
    CHECK(bytes_repr("\xe2\x80") == "b'\\xe2\\x80'");
    CHECK(bytes_repr("a\\b") == "b'a\\\\b'");
    CHECK(bytes_repr("\"'") == "b'\"\\''");
    CHECK(bytes_repr(std::string("\t\r\x00\x7f", 4)) == "b'\\t\\r\\x00\\x7f'");
}

TEST_CASE("decode(encode(text)) is the text, for any UTF-8 and any bytes", "[tokenizer]") {
    BasicTokenizer t;
    const std::string sample =
        "Ye gods! The café's crêpes cost 3,40 €; Ελληνικά, русский, 中文, 🙂👍🏽 and   "
        "spaces\n\n";
    t.train(sample + sample + "the the the then", 300);
    std::mt19937 rng(5);
    for (int round = 0; round < 200; ++round) {
        // Random code points of every UTF-8 length (no surrogates).
        std::string text;
        for (int i = 0; i < 40; ++i) {
            uint32_t cp = std::uniform_int_distribution<uint32_t>(0, 0x10FFFF)(rng);
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
            if (round % 2 == 0) cp = cp % 128; // ASCII-heavy rounds, where the merges apply
            if (cp < 0x80) text += static_cast<char>(cp);
            else if (cp < 0x800)
                text += static_cast<char>(0xC0 | (cp >> 6)), text += static_cast<char>(0x80 | (cp & 0x3F));
            else if (cp < 0x10000)
                text += static_cast<char>(0xE0 | (cp >> 12)), text += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
                    text += static_cast<char>(0x80 | (cp & 0x3F));
            else
                text += static_cast<char>(0xF0 | (cp >> 18)), text += static_cast<char>(0x80 | ((cp >> 12) & 0x3F)),
                    text += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), text += static_cast<char>(0x80 | (cp & 0x3F));
        }
        REQUIRE(t.decode(t.encode(text)) == text);
        // Any bytes at all come back as bytes.
        std::string bytes;
        for (int i = 0; i < 40; ++i) bytes += static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
        REQUIRE(t.decode_bytes(t.encode(bytes)) == bytes);
    }
    CHECK(t.encode("").empty());
    CHECK(t.decode({}).empty());
}

TEST_CASE("save writes minbpe's files; load reads them back", "[tokenizer]") {
    const std::string dir = scratch("save");
    BasicTokenizer t;
    t.train("aaabdaaabac", 259);
    t.save(dir + "/ex");
    CHECK(read(dir + "/ex.model") == "minbpe v1\n\n0\n97 97\n256 97\n257 98\n");
    const std::string vocab = read(dir + "/ex.vocab");
    CHECK(vocab.find("[a] 97\n") != std::string::npos);
    CHECK(vocab.find("[\\u000a] 10\n") != std::string::npos); // control characters escaped
    CHECK(vocab.find("[a][a] -> [aa] 256\n[aa][a] -> [aaa] 257\n[aaa][b] -> [aaab] 258\n") != std::string::npos);
    const BasicTokenizer back = BasicTokenizer::load(dir + "/ex.model");
    CHECK(back.merges() == t.merges());
    CHECK(back.encode("aaabdaaabac") == t.encode("aaabdaaabac"));
    // A model file written on Windows (CRLF) reads the same.
    write(dir + "/crlf.model", "minbpe v1\r\n\r\n0\r\n97 97\r\n256 97\r\n");
    CHECK(BasicTokenizer::load(dir + "/crlf.model").merges() == std::vector<Pair>{{97, 97}, {256, 97}});
    fs::remove_all(dir);
}

TEST_CASE("every error names the op, the file and the line", "[tokenizer][errors]") {
    BasicTokenizer t;
    CHECK_THROWS_WITH(t.train("abc", 255), Catch::Contains("[BasicTokenizer::train]") && Catch::Contains("255"));
    CHECK_THROWS_AS(t.train("abc", 255), ValueError);
    CHECK_THROWS_WITH(t.decode({5, 256}), Catch::Contains("id 256") && Catch::Contains("256 tokens"));
    CHECK_THROWS_AS(t.decode({-1}), IndexError);
    CHECK_THROWS_AS(t.token_bytes(1000), IndexError);

    const std::string dir = scratch("errors");
    CHECK_THROWS_WITH(BasicTokenizer::load(dir + "/none.model"), Catch::Contains("cannot open"));
    CHECK_THROWS_WITH(BasicTokenizer::load(dir), Catch::Contains("cannot open") && Catch::Contains("as a file"));
    const std::vector<std::pair<std::string, std::string>> bad = {
        {"", "ends at line 0, before the version"},
        {"minbpe v2\n\n0\n", ":1: not a minbpe v1 model file"},
        {"minbpe v1\n", "ends at line 1, before the split pattern"},
        {"minbpe v1\n\\w+\n0\n", ":2: the model has a split pattern"},
        {"minbpe v1\n\n1\n<|endoftext|> 256\n", ":3: the model has special tokens"},
        {"minbpe v1\n\n0\n97\n", ":4: expected a merge"},
        {"minbpe v1\n\n0\n97 98 99\n", ":4: expected a merge"},
        {"minbpe v1\n\n0\n97 x\n", ":4: expected a merge"},
        {"minbpe v1\n\n0\n97 256\n", ":4: a merge of an id not yet defined (this merge makes id 256)"},
        {"minbpe v1\n\n0\n-1 5\n", ":4: a merge of an id not yet defined"},
        {"minbpe v1\n\n0\n97 97\n97 97\n", ":5: the pair was merged before, into id 256"},
    };
    for (const auto& [text, message] : bad) {
        INFO(text);
        write(dir + "/bad.model", text);
        CHECK_THROWS_AS(BasicTokenizer::load(dir + "/bad.model"), TokenizerError);
        CHECK_THROWS_WITH(BasicTokenizer::load(dir + "/bad.model"), Catch::Contains("[BasicTokenizer::load]") &&
                                                                        Catch::Contains("bad.model") &&
                                                                        Catch::Contains(message));
    }
    // A folder where a file should go: the save says so, and writes nothing.
    fs::create_directories(dir + "/taken.model");
    CHECK_THROWS_AS(t.save(dir + "/taken"), TokenizerError);
    CHECK_FALSE(fs::exists(dir + "/taken.vocab"));
    fs::remove_all(dir);
}

TEST_CASE("the tokenize program: train, encode, decode and its errors", "[tokenizer][program]") {
    const std::string dir = scratch("program");
    write(dir + "/text.txt", "aaabdaaabac");
    auto run = [&](const std::string& args) { return testing::run_command(kProgram + " " + args + " 2>&1"); };
    testing::CommandResult r = run("train --vocab-size 259 --out " + dir + "/ex " + dir + "/text.txt");
    INFO(r.out);
    CHECK(r.status == 0);
    CHECK(r.out.find("merge 1/3: (97, 97) -> 256 (b'aa') had 4 occurrences\n") == 0);
    CHECK(r.out.find("learned 3 merges in ") != std::string::npos);
    CHECK(r.out.find("11 bytes of text are 5 tokens (2.20x)") != std::string::npos);
    CHECK(r.out.find("wrote " + dir + "/ex.model, " + dir + "/ex.vocab") != std::string::npos);

    r = run("encode --tokenizer " + dir + "/ex.model " + dir + "/text.txt");
    CHECK(r.status == 0);
    CHECK(r.out == "258 100 258 97 99\n");
    write(dir + "/ids.txt", r.out);
    r = run("decode --tokenizer " + dir + "/ex.model " + dir + "/ids.txt");
    CHECK(r.status == 0);
    CHECK(r.out == "aaabdaaabac");

    // Errors: status 2 and a message that says what to fix.
    write(dir + "/bad_ids.txt", "258 x");
    write(dir + "/big_ids.txt", "258 900");
    for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
             {"", "expected a command"},
             {"train " + dir + "/text.txt", "--vocab-size"},
             {"train --vocab-size 100 " + dir + "/text.txt", "--vocab-size"},
             {"train --vocab-size 300 " + dir + "/missing.txt", "cannot read"},
             {"encode --tokenizer gpt2 " + dir, "as a file"},
             {"split --tokenizer x " + dir + "/text.txt", "unknown command \"split\""},
             {"encode " + dir + "/text.txt", "needs --tokenizer"},
             {"encode --tokenizer " + dir + "/text.txt " + dir + "/text.txt", "not a minbpe v1 model file"},
             {"decode --tokenizer " + dir + "/ex.model " + dir + "/bad_ids.txt", "bad_ids.txt"},
             {"decode --tokenizer " + dir + "/ex.model " + dir + "/big_ids.txt", "id 900"},
             {"--frobnicate", "unknown option --frobnicate"},
         }) {
        INFO(args);
        r = run(args);
        CHECK(r.status == 2);
        CHECK(r.out.find(message) != std::string::npos);
    }
    CHECK(run("--help").out.find("usage: tokenize COMMAND") == 0);

    // --regex: minbpe's RegexTokenizer with GPT-2's pattern, its file found by its pattern line.
    write(dir + "/aa.txt", "aa aa aa");
    r = run("train --regex --vocab-size 300 --out " + dir + "/rx " + dir + "/aa.txt");
    CHECK(r.status == 0);
    CHECK(r.out.find("merge 2/44: (32, 256) -> 257 (b' aa') had 2 occurrences\nlearned 2 merges") != std::string::npos);
    CHECK(run("encode --tokenizer " + dir + "/rx.model " + dir + "/aa.txt").out == "256 257 257\n");

    // GPT-2's tokenizer: the reference encoder's ids (tests/fixtures/gpt2_tokenizer.txt's first case).
    write(dir + "/hello.txt", "Hello world! I'm here");
    r = run("encode --tokenizer gpt2 " + dir + "/hello.txt");
    CHECK(r.status == 0);
    CHECK(r.out == "15496 995 0 314 1101 994\n");
    write(dir + "/hello_ids.txt", r.out);
    CHECK(run("decode --tokenizer gpt2 " + dir + "/hello_ids.txt").out == "Hello world! I'm here");
    write(dir + "/broken.txt", "ok \xff");
    r = run("encode --tokenizer gpt2 " + dir + "/broken.txt");
    CHECK(r.status == 2);
    CHECK(r.out.find("not valid UTF-8 at byte 3") != std::string::npos);
    fs::remove_all(dir);
}

// ---- RegexTokenizer ---------------------------------------------------------------------------

TEST_CASE("RegexTokenizer merges only inside GPT-2's pieces", "[tokenizer][regex]") {
    // "aa aa aa" is the pieces "aa", " aa", " aa": (97,97) occurs 3 times
    // and becomes 256; then (32,256) twice, 257; then no piece has a pair
    // left, so training stops with two merges (BasicTokenizer would go on
    // across the spaces).
    RegexTokenizer t;
    t.train("aa aa aa", 300);
    CHECK(t.merges() == std::vector<Pair>{{97, 97}, {32, 256}});
    CHECK(t.encode("aa aa aa") == std::vector<int>{256, 257, 257});
    BasicTokenizer basic;
    basic.train("aa aa aa", 300);
    CHECK(basic.merges().size() > 2);
    CHECK(t.decode(t.encode("Hello world, it's 2024!")) == "Hello world, it's 2024!");
    CHECK_THROWS_AS(t.encode("ok \xff"), ValueError);
    CHECK_THROWS_AS(t.train("x", 10), ValueError);
}

TEST_CASE("RegexTokenizer on tiny Shakespeare: the merges of a second implementation",
          "[tokenizer][regex][data][heavy]") {
    std::ifstream fixture(std::string(EMBER_FIXTURE_DIR) + "/bpe_shakespeare_regex.txt");
    REQUIRE(fixture);
    std::string line;
    std::getline(fixture, line); // the header
    std::vector<std::vector<int64_t>> expected;
    int64_t tokens = -1;
    while (std::getline(fixture, line)) {
        std::istringstream f(line);
        if (line.rfind("tokens ", 0) == 0) {
            std::string word;
            f >> word >> tokens;
            continue;
        }
        std::vector<int64_t> row(4);
        f >> row[0] >> row[1] >> row[2] >> row[3];
        expected.push_back(row);
    }
    REQUIRE(expected.size() == 256);
    const std::string text = read(std::string(EMBER_DATA_DIR) + "/tinyshakespeare.txt");
    RegexTokenizer t;
    std::vector<MergeStep> steps;
    t.train(text, 512, [&](const MergeStep& s) { steps.push_back(s); });
    REQUIRE(steps.size() == 256);
    for (size_t i = 0; i < 256; ++i) {
        INFO("merge " << i + 1 << ": " << describe(steps[i]));
        CHECK(steps[i].pair.first == expected[i][0]);
        CHECK(steps[i].pair.second == expected[i][1]);
        CHECK(steps[i].id == expected[i][2]);
        CHECK(steps[i].count == expected[i][3]);
    }
    const std::vector<int> ids = t.encode(text);
    CHECK(static_cast<int64_t>(ids.size()) == tokens);
    CHECK(t.decode(ids) == text);
}

TEST_CASE("RegexTokenizer's special tokens, as minbpe's allowed_special", "[tokenizer][regex]") {
    RegexTokenizer t;
    t.train("aa aa aa", 258);
    t.register_special_tokens({{"<|endoftext|>", 300}, {"<|pad|>", 301}});
    const std::string text = "aa<|endoftext|> aa<|pad|>";
    CHECK(t.encode(text, AllowedSpecial::All) == std::vector<int>{256, 300, 257, 301});
    CHECK_THROWS_WITH(t.encode(text), Catch::Contains("[RegexTokenizer::encode]") && Catch::Contains("<|endoftext|>") &&
                                          Catch::Contains("at byte 2"));
    const std::vector<int> ordinary = t.encode(text, AllowedSpecial::None);
    CHECK(ordinary == t.encode_ordinary(text));
    CHECK(std::find(ordinary.begin(), ordinary.end(), 300) == ordinary.end());
    CHECK(t.decode({256, 300, 257, 301}) == text);
    CHECK(t.decode(ordinary) == text);
    CHECK_THROWS_AS(t.decode({299}), IndexError); // neither a token nor a special one
    // Ids already taken, empty or repeated texts.
    CHECK_THROWS_AS(t.register_special_tokens({{"<|x|>", 100}}), ValueError);
    CHECK_THROWS_AS(t.register_special_tokens({{"", 400}}), ValueError);
    CHECK_THROWS_AS(t.register_special_tokens({{"<|pad|>", 400}}), ValueError);
    CHECK_THROWS_AS(t.register_special_tokens({{"<|y|>", 301}}), ValueError);
    CHECK_THROWS_WITH(t.register_special_tokens({{"<|a b|>", 400}}), Catch::Contains("white space"));
    CHECK_THROWS_WITH(t.register_special_tokens({{"<|\n|>", 400}}), Catch::Contains("white space"));
    CHECK_THROWS_WITH(t.register_special_tokens({{"<|z|>", -5}}), Catch::Contains("negative id"));
    CHECK_THROWS_WITH(t.decode({299}), Catch::Contains("[RegexTokenizer] id 299 is neither a token (0 to 257)"));
    CHECK(t.special_tokens().size() == 2);
    // Training again may not give a merge a special token's id: refused before the work.
    CHECK_THROWS_WITH(t.train("aa aa aa", 400), Catch::Contains("300") && Catch::Contains("<|endoftext|>"));
    CHECK(t.merges().size() == 2);
}

TEST_CASE("RegexTokenizer saves minbpe's file with GPT-2's pattern and its special tokens", "[tokenizer][regex]") {
    const std::string dir = scratch("regex_save");
    RegexTokenizer t;
    t.train("aa aa aa", 258);
    t.register_special_tokens({{"<|endoftext|>", 300}});
    t.save(dir + "/r");
    CHECK(read(dir + "/r.model") ==
          "minbpe v1\n" + std::string(kGPT2Pattern) + "\n1\n<|endoftext|> 300\n97 97\n32 256\n");
    const RegexTokenizer back = RegexTokenizer::load(dir + "/r.model");
    CHECK(back.merges() == t.merges());
    CHECK(back.special_tokens() == t.special_tokens());
    CHECK(back.encode("aa<|endoftext|>", AllowedSpecial::All) == std::vector<int>{256, 300});
    // OpenAI's spelling of the same pattern reads too; another pattern (GPT-4's) is refused.
    write(dir + "/openai.model", "minbpe v1\n" + std::string(kGPT2PatternOpenAI) + "\n0\n97 97\n");
    CHECK(RegexTokenizer::load(dir + "/openai.model").merges().size() == 1);
    write(dir + "/gpt4.model", "minbpe v1\n'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+\n0\n");
    CHECK_THROWS_WITH(RegexTokenizer::load(dir + "/gpt4.model"),
                      Catch::Contains(":2: the split pattern is not GPT-2's"));
    // A BasicTokenizer refuses the regex tokenizer's file, and the reverse.
    CHECK_THROWS_WITH(BasicTokenizer::load(dir + "/r.model"), Catch::Contains("split pattern"));
    BasicTokenizer basic;
    basic.train("aa aa aa", 258);
    basic.save(dir + "/b");
    CHECK_THROWS_WITH(RegexTokenizer::load(dir + "/b.model"), Catch::Contains("not GPT-2's"));
    // Bad special token lines, and special tokens that collide.
    for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
             {"minbpe v1\n" + std::string(kGPT2Pattern) + "\nx\n", ":3: expected the number of special tokens"},
             {"minbpe v1\n" + std::string(kGPT2Pattern) + "\n1\n", "before a special token"},
             {"minbpe v1\n" + std::string(kGPT2Pattern) + "\n1\n<|eot|>\n", ":4: expected a special token"},
             {"minbpe v1\n" + std::string(kGPT2Pattern) + "\n1\n<|eot|> 65\n", "which a byte or merge holds"},
             {"minbpe v1\n" + std::string(kGPT2Pattern) + "\n2\n<|a|> 300\n<|b|> 300\n", "repeats"},
         }) {
        INFO(text);
        write(dir + "/bad.model", text);
        CHECK_THROWS_AS(RegexTokenizer::load(dir + "/bad.model"), TokenizerError);
        CHECK_THROWS_WITH(RegexTokenizer::load(dir + "/bad.model"),
                          Catch::Contains("[RegexTokenizer::load]") && Catch::Contains(message));
    }
    fs::remove_all(dir);
}
