#include "engine/io/project_file.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <fstream>
#include <sstream>

#include "engine/io/output_file.h"

namespace netloom {

namespace {

// Keeps the first error with its position (the parser reports 0-based lines).
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (m_message.empty()) {
      m_line = line + 1;
      m_column = column + 1;
      m_message = message;
    }
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}

  std::string describe(const std::string& file) const {
    return file + ":" + std::to_string(m_line) + ":" + std::to_string(m_column) + ": " + m_message;
  }
  bool any() const { return !m_message.empty(); }

 private:
  int m_line = 0, m_column = 0;
  std::string m_message;
};

Status parseText(const std::string& text, const std::string& fileName,
                 google::protobuf::Message& out) {
  FirstError errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &out))
    return makeError(errors.any() ? errors.describe(fileName) : fileName + ": cannot parse it");
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

Result<proto::Project> loadProject(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError(path + ": cannot open the project file");
  std::stringstream buf;
  buf << in.rdbuf();
  return parseProject(buf.str(), path);
}

std::string projectToText(const proto::Project& project) {
  std::string out;
  google::protobuf::TextFormat::Printer printer;
  printer.PrintToString(project, &out);
  return out;
}

Status saveProject(const std::string& path, const proto::Project& project) {
  return writeFileAtomic(path, projectToText(project));
}

}  // namespace netloom
