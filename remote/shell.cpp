#include "remote/shell.h"

namespace netloom::remote {

std::string shellQuote(const std::string& arg) {
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string shellCommand(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& a : argv) {
    if (!line.empty()) line += ' ';
    line += shellQuote(a);
  }
  return line;
}

}  // namespace netloom::remote
