#include "engine/io/project_file.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/io/output_file.h"

namespace netloom {

namespace {

// Keeps the first error with its position (the parser reports 0-based lines and
// columns, tabs advancing to the next multiple of 8).
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (m_message.empty()) {
      m_line = line;
      m_column = column;
      m_message = message;
    }
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}

  bool any() const { return !m_message.empty(); }

  // A file cut off mid-way says so: the tokenizer reports the end as an empty token
  // ("Expected identifier, got: "), and a cut inside the last token leaves a
  // fragment ("no field named 'n'") with nothing after it.
  std::string describe(const std::string& file, const std::string& text) const {
    std::string where =
        file + ":" + std::to_string(m_line + 1) + ":" + std::to_string(m_column + 1);
    const std::string got = ", got: ";
    const bool emptyToken = m_message.size() >= got.size() &&
                            m_message.compare(m_message.size() - got.size(), got.size(), got) == 0;
    if (emptyToken) {
      std::string expected = m_message.substr(0, m_message.size() - got.size());
      if (!expected.empty())
        expected[0] = char(std::tolower(static_cast<unsigned char>(expected[0])));
      return where + ": unexpected end of file (" + expected + ")";
    }
    if (lastTokenStartsAt(text)) return where + ": unexpected end of file (" + m_message + ")";
    return where + ": " + m_message;
  }

 private:
  bool lastTokenStartsAt(const std::string& text) const {
    size_t i = 0;
    for (int line = 0; line < m_line && i < text.size(); ++i)
      if (text[i] == '\n') ++line;
    for (int col = 0; col < m_column && i < text.size() && text[i] != '\n'; ++i)
      col = text[i] == '\t' ? (col / 8 + 1) * 8 : col + 1;
    if (i >= text.size()) return true;
    auto word = [](unsigned char ch) {
      return std::isalnum(ch) || ch == '_' || ch == '.' || ch >= 0x80;
    };
    while (i < text.size() && word(static_cast<unsigned char>(text[i]))) ++i;
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    return i == text.size();
  }

  int m_line = 0, m_column = 0;
  std::string m_message;
};

Status parseText(const std::string& text, const std::string& fileName,
                 google::protobuf::Message& out) {
  FirstError errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &out))
    return makeError(errors.any() ? errors.describe(fileName, text)
                                  : fileName + ": cannot parse it");
  return {};
}

}  // namespace

Result<proto::Project> parseProject(const std::string& text, const std::string& fileName) {
  proto::Project project;
  if (Status s = parseText(text, fileName, project); !s) return s.error();
  return project;
}

Result<proto::ModelDef> parseBlock(const std::string& text, const std::string& fileName) {
  proto::ModelDef block;
  if (Status s = parseText(text, fileName, block); !s) return s.error();
  if (block.name().empty()) return makeError(fileName + ": the block has no name");
  return block;
}

std::string blockToText(const proto::ModelDef& block) {
  std::string out;
  google::protobuf::TextFormat::Printer printer;
  printer.PrintToString(block, &out);
  return out;
}

Status checkFormatVersion(const proto::Project& project) {
  if (project.format_version() < 0)
    return makeError("format_version must not be negative, got " +
                     std::to_string(project.format_version()));
  if (project.format_version() > kProjectFormatVersion)
    return makeError("format_version " + std::to_string(project.format_version()) +
                     ": the project was written by a newer NetLoom (this one reads up to " +
                     std::to_string(kProjectFormatVersion) + ")");
  return {};
}

Result<proto::Project> loadProject(const std::string& path) {
  // Only a regular file of sane size is read: a directory, a device such as
  // /dev/zero or a FIFO would otherwise read as empty or never end.
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) return makeError(path + ": no such project file");
  if (std::filesystem::is_directory(st))
    return makeError(path + ": is a directory, not a project file (*.nlproj)");
  if (!std::filesystem::is_regular_file(st))
    return makeError(path + ": is not a regular file (a device, FIFO or socket)");
  auto size = std::filesystem::file_size(path, ec);
  if (ec) return makeError(path + ": cannot read the project file (" + ec.message() + ")");
  if (size > kMaxProjectBytes)
    return makeError(path + ": the project file is " + std::to_string(size >> 20) +
                     " MiB; projects are at most " + std::to_string(kMaxProjectBytes >> 20) +
                     " MiB");
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError(path + ": cannot open the project file");
  std::stringstream buf;
  buf << in.rdbuf();
  auto project = parseProject(buf.str(), path);
  if (!project) return project;
  if (Status s = checkFormatVersion(*project); !s) return makeError(path + ": " + s.message());
  return project;
}

Status saveProject(const std::string& path, const proto::Project& project,
                   const std::string& original) {
  return writeFileAtomic(path, projectToText(project, original));
}

}  // namespace netloom
