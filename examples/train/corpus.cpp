// The default corpus: a play, written by a small grammar, so that train_gpt
// runs with no download and no third-party text (it is part of ember, under
// ember's MIT licence).
//
// The play has what a character-level model can learn step by step: spelling
// (a few hundred words), grammar (sentence templates with agreement), layout
// (acts, scenes, SPEAKER: lines, blank lines), and long-range structure that
// needs attention: speakers take turns within a scene and often address the
// previous speaker by name, so the right name is one that appeared lines
// earlier. A fixed seed makes the text the same on every machine.
#include "corpus.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace train {

namespace {

// splitmix64: a tiny, well-mixed generator, so the corpus does not depend on
// any library's random numbers.
class Rng {
public:
    explicit Rng(uint64_t seed) : state_(seed) {}
    uint64_t next() {
        uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    size_t below(size_t n) { return static_cast<size_t>(next() % n); }
    template <typename List>
    const std::string& pick(const List& list) {
        return list[below(list.size())];
    }

private:
    uint64_t state_;
};

using Words = std::vector<std::string>;

const Words kNames = {"ROMILDA", "BERNARDO", "CAMILLA", "DUNSTAN",  "ELINOR",  "FABIAN", "GERTRUDE", "HORATIO",
                      "IMOGEN",  "JAQUES",   "LAVINIA", "MALVOLIO", "NERISSA", "OSWALD", "PERDITA",  "SILVIUS"};
const Words kNouns = {"king",    "queen", "crown",  "sword",  "rose",  "river",  "moon",   "star",   "heart",
                      "letter",  "ring",  "castle", "garden", "storm", "fool",   "ghost",  "horse",  "night",
                      "morning", "song",  "tower",  "field",  "gate",  "shadow", "candle", "mirror", "bell"};
const Words kAdjectives = {"gentle", "bitter", "golden", "silent", "noble",   "wicked",   "bright",  "cold",
                           "sweet",  "proud",  "weary",  "hidden", "ancient", "faithful", "strange", "pale"};
// Verbs: base form, and the form after he/she/it.
const Words kVerbs = {"love", "fear", "seek", "keep", "break", "praise", "follow", "remember", "guard", "forsake"};
const Words kVerbsS = {"loves",   "fears",   "seeks",     "keeps",  "breaks",
                       "praises", "follows", "remembers", "guards", "forsakes"};
const Words kPlaces = {"court", "forest", "chapel", "harbour", "market", "hall", "orchard", "battlement"};
const Words kAdverbs = {"truly", "softly", "gladly", "boldly", "dearly", "swiftly", "never", "ever"};
const Words kGreetings = {"Good", "Sweet", "Gentle", "Noble", "Dear"};
const Words kOaths = {"By my troth", "Upon my honour", "Alas", "O heavens", "Marry", "In faith"};

std::string capitalised(std::string s) {
    if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 'a' + 'A');
    return s;
}

// A name as it is spoken: "ROMILDA" -> "Romilda".
std::string spoken(const std::string& name) {
    std::string s = name;
    for (size_t i = 1; i < s.size(); ++i)
        if (s[i] >= 'A' && s[i] <= 'Z') s[i] = static_cast<char>(s[i] - 'A' + 'a');
    return s;
}

// One sentence. `addressee` is the previous speaker, whom lines often name.
// Every draw is a statement of its own: C++ leaves the order in which the
// operands of one expression are evaluated unspecified, and the text must
// not depend on the compiler (examples/train_gpt.py draws in this order too).
std::string sentence(Rng& r, const std::string& addressee) {
    const size_t v = r.below(kVerbs.size());
    const size_t kind = r.below(9);
    std::vector<std::string> w; // the words the template needs, drawn in order
    auto draw = [&](const Words& list) { w.push_back(r.pick(list)); };
    const std::string name = spoken(addressee);
    switch (kind) {
    case 0:
        draw(kAdjectives), draw(kNouns), draw(kNouns);
        return "The " + w[0] + " " + w[1] + " " + kVerbsS[v] + " the " + w[2] + ".";
    case 1: draw(kAdverbs); return "I " + w[0] + " " + kVerbs[v] + " thee, " + name + ".";
    case 2:
        draw(kGreetings), draw(kAdjectives), draw(kNouns);
        return w[0] + " " + name + ", " + kVerbs[v] + " the " + w[1] + " " + w[2] + "!";
    case 3: draw(kNouns); return "Why dost thou " + kVerbs[v] + " the " + w[0] + ", " + name + "?";
    case 4:
        draw(kNouns), draw(kAdjectives), draw(kNouns), draw(kAdjectives);
        return "My " + w[0] + " is " + w[1] + ", and thy " + w[2] + " is " + w[3] + ".";
    case 5: draw(kNouns), draw(kPlaces); return "Where is the " + w[0] + "? It lies in the " + w[1] + ".";
    case 6:
        draw(kOaths), draw(kNouns), draw(kNouns);
        return w[0] + ", the " + w[1] + " " + kVerbsS[v] + " no " + w[2] + ".";
    case 7: draw(kNouns), draw(kPlaces); return "Come, let us " + kVerbs[v] + " the " + w[0] + " of the " + w[1] + ".";
    default:
        draw(kAdverbs), draw(kAdjectives), draw(kNouns);
        return capitalised(w[0]) + " shall I " + kVerbs[v] + " the " + w[1] + " " + w[2] + ".";
    }
}

// Roman numerals: 1 -> I, 14 -> XIV.
std::string roman(int n) {
    static const std::array<std::pair<int, const char*>, 13> parts = {{{1000, "M"},
                                                                       {900, "CM"},
                                                                       {500, "D"},
                                                                       {400, "CD"},
                                                                       {100, "C"},
                                                                       {90, "XC"},
                                                                       {50, "L"},
                                                                       {40, "XL"},
                                                                       {10, "X"},
                                                                       {9, "IX"},
                                                                       {5, "V"},
                                                                       {4, "IV"},
                                                                       {1, "I"}}};
    std::string out;
    for (const auto& [value, text] : parts)
        for (; n >= value; n -= value) out += text;
    return out;
}

} // namespace

std::string default_corpus(size_t target_chars) {
    Rng r(1337);
    std::string text;
    for (int act = 1; text.size() < target_chars; ++act) {
        text += "ACT " + roman(act) + ".\n\n";
        for (int scene = 1; scene <= 4 && text.size() < target_chars; ++scene) {
            text += "SCENE " + roman(scene) + ". The " + r.pick(kPlaces) + ".\n\n";
            // Two or three characters take turns for a while.
            std::vector<std::string> cast;
            const size_t cast_size = 2 + r.below(2);
            while (cast.size() < cast_size) {
                const std::string& who = r.pick(kNames);
                bool present = false;
                for (const auto& c : cast) present = present || c == who;
                if (!present) cast.push_back(who);
            }
            std::string previous = cast.back();
            for (int turn = 0, turns = 4 + static_cast<int>(r.below(8)); turn < turns; ++turn) {
                const std::string& speaker = cast[static_cast<size_t>(turn) % cast.size()];
                text += speaker + ":\n";
                for (int line = 0, lines = 1 + static_cast<int>(r.below(3)); line < lines; ++line)
                    text += sentence(r, previous) + "\n";
                text += "\n";
                previous = speaker;
            }
        }
    }
    return text;
}

} // namespace train
