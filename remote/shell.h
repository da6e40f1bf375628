// Remote commands are built from arguments, never from text a shell would parse:
// each argument is quoted so that a project or job name such as
// `x'; touch /tmp/pwned; '$(id)` reaches the remote program as those very bytes.
#pragma once

#include <string>
#include <vector>

namespace netloom::remote {

// One argument for a POSIX shell: single-quoted, with embedded single quotes
// written as '\''.
std::string shellQuote(const std::string& arg);

// `argv` as one command line for `sh -c`, every argument quoted.
std::string shellCommand(const std::vector<std::string>& argv);

}  // namespace netloom::remote
