// Running a program from a test: the end-to-end tests of the examples
// (test_examples, test_train_gpt, test_train_tasks) start them as a user would.
#pragma once

#include <string>

namespace ember::testing {

struct CommandResult {
    int status;      // the exit status, or -1 when the program did not exit normally
    std::string out; // its standard output (add 2>&1 to the command to include stderr)
};

// Runs `command` through the shell and waits for it.
CommandResult run_command(const std::string& command);

} // namespace ember::testing
