// fuzz_check: runs fuzz programs with their PyTorch results through ember
// and reports every mismatch (tests/fuzz/README.md). The long mode of
// tests/fuzz/fuzz.py writes a file of fresh programs and calls this.
//
//   build/tests/fuzz_check FILE...           # exit status 1 on any mismatch
//   build/tests/fuzz_check --stats FILE...   # also the largest errors seen
#include <cstring>
#include <iostream>

#include "interpreter.h"

int main(int argc, char** argv) {
    bool stats = false;
    int programs = 0, failed = 0;
    double worst64 = 0, worst32 = 0;
    std::string worst64_name, worst32_name;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--stats") == 0) {
            stats = true;
            continue;
        }
        for (const auto& program : ember::fuzz::read_programs(argv[i])) {
            ++programs;
            ember::fuzz::Report report = ember::fuzz::check_program(program);
            if (report.worst64 > worst64) worst64 = report.worst64, worst64_name = program.name;
            if (report.worst32 > worst32) worst32 = report.worst32, worst32_name = program.name;
            if (report.problems.empty()) continue;
            ++failed;
            std::cout << "MISMATCH in " << program.name << ":\n";
            for (const auto& p : report.problems) std::cout << "  " << p << "\n";
            std::cout << program.text << "\n";
        }
    }
    std::cout << programs << " programs, " << failed << " with mismatches\n";
    if (stats)
        std::cout << "largest error as a fraction of its tolerance: float64 " << worst64 << " (" << worst64_name
                  << "), float32 " << worst32 << " (" << worst32_name << ")\n";
    return failed ? 1 : 0;
}
