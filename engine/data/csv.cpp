// Numeric CSV: every column is a float feature except the label column. Labels
// keep their raw value in `targets` (regression) and are rounded to class indices.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "engine/data/dataset.h"

namespace netloom {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// Splits on `delim`, then trims each field, so a tab delimiter survives the trim.
void splitFields(std::string_view line, char delim, std::vector<std::string_view>& out) {
  out.clear();
  size_t start = 0;
  while (true) {
    size_t pos = line.find(delim, start);
    std::string_view field = line.substr(start, pos == std::string_view::npos ? pos : pos - start);
    out.push_back(trim(field));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
}

std::string_view unquote(std::string_view s) {
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') return s.substr(1, s.size() - 2);
  return s;
}

bool parseFloat(std::string_view s, float& out) {
  s = unquote(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

bool isBlank(std::string_view line) {
  return trim(line).empty();
}

// std::getline with a bound: a file without line breaks must not grow one line past
// what memory allows. False at the end of the file, or with `tooLong` set.
bool readLine(std::istream& in, std::string& line, int64_t maxLength, bool& tooLong) {
  line.clear();
  std::streambuf* buf = in.rdbuf();
  while (true) {
    int c = buf->sbumpc();
    if (c == std::char_traits<char>::eof()) return !line.empty();
    if (c == '\n') return true;
    if (int64_t(line.size()) >= maxLength) {
      tooLong = true;
      return false;
    }
    line.push_back(char(c));
  }
}

// Plans a vector's next growth before it happens: doubling, with the old block
// alive while it is copied.
Status planGrowth(std::vector<float>& v, size_t more, MemoryBudget& budget,
                  const std::string& what) {
  if (v.size() + more <= v.capacity()) return {};
  size_t cap = std::max({v.capacity() * 2, v.size() + more, size_t(1024)});
  int64_t added = int64_t(cap - v.capacity()) * int64_t(sizeof(float));
  if (Status s = budget.check(what, added + int64_t(v.capacity() * sizeof(float))); !s) return s;
  if (Status s = budget.reserve(what, added); !s) return s;
  v.reserve(cap);
  return {};
}

}  // namespace

Result<Dataset> readCsv(const std::string& path, const std::string& labelColumn, bool hasHeader,
                        char delimiter, const std::shared_ptr<MemoryBudget>& budgetOrNull) {
  std::shared_ptr<MemoryBudget> budget = budgetOrThisProcess(budgetOrNull);
  std::error_code ec;
  auto type = std::filesystem::status(path, ec).type();
  if (type == std::filesystem::file_type::character || type == std::filesystem::file_type::block)
    return makeError("'" + path + "' is a device, not a CSV file");
  std::ifstream in(path);
  if (!in) return makeError("cannot open CSV file '" + path + "'");

  std::string line;
  std::vector<std::string_view> fields;
  int64_t lineNo = 0;
  std::vector<std::string> names;
  int64_t columns = -1;  // fixed by the header or the first data row
  int64_t labelIndex = -1;

  bool tooLong = false;
  auto nextLine = [&]() -> bool {
    if (!readLine(in, line, budget->remaining(), tooLong)) return false;
    // Spreadsheets often start the file with a UTF-8 byte order mark.
    if (++lineNo == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    return true;
  };

  auto resolveLabel = [&]() -> Status {
    if (labelColumn.empty()) {
      labelIndex = columns - 1;
      return {};
    }
    if (!names.empty()) {
      auto it = std::find(names.begin(), names.end(), labelColumn);
      if (it == names.end()) {
        std::string known;
        for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
        return makeError("'" + path + "': no label column '" + labelColumn + "' in the header (" +
                         known + ")");
      }
      labelIndex = it - names.begin();
      return {};
    }
    // Without a header the label column can only be named by its 0-based index.
    int64_t idx = -1;
    auto [ptr, ec] =
        std::from_chars(labelColumn.data(), labelColumn.data() + labelColumn.size(), idx);
    if (ec != std::errc() || ptr != labelColumn.data() + labelColumn.size() || idx < 0 ||
        idx >= columns) {
      return makeError("'" + path + "': label column '" + labelColumn +
                       "' not found (the file has no header and " + std::to_string(columns) +
                       " columns; give a 0-based index)");
    }
    labelIndex = idx;
    return {};
  };

  auto lineTooLong = [&] {
    return makeRefusal("'" + path + "' line " + std::to_string(lineNo + 1) +
                       " is longer than the " + formatBytes(budget->remaining()) +
                       " this process has left for it");
  };

  if (hasHeader) {
    while (nextLine()) {
      if (isBlank(line)) continue;
      splitFields(line, delimiter, fields);
      for (auto f : fields) names.emplace_back(unquote(f));
      columns = static_cast<int64_t>(names.size());
      break;
    }
    if (tooLong) return lineTooLong();
    if (columns < 0) return makeError("'" + path + "': empty file, expected a header line");
    if (Status s = resolveLabel(); !s) return s.error();
  }

  Dataset ds;
  while (nextLine()) {
    if (isBlank(line)) continue;
    splitFields(line, delimiter, fields);
    if (columns < 0) {
      columns = static_cast<int64_t>(fields.size());
      if (Status s = resolveLabel(); !s) return s.error();
    }
    if (static_cast<int64_t>(fields.size()) != columns) {
      return makeError("'" + path + "' line " + std::to_string(lineNo) + ": expected " +
                       std::to_string(columns) + " columns, got " + std::to_string(fields.size()));
    }
    if (columns < 2) {
      return makeError("'" + path + "' line " + std::to_string(lineNo) +
                       ": need at least one feature column and a label column");
    }
    if (ds.floats.size() + size_t(columns) > ds.floats.capacity() ||
        ds.targets.size() == ds.targets.capacity()) {
      std::string rows = "'" + path + "' (rows up to line " + std::to_string(lineNo) + ")";
      if (Status s = planGrowth(ds.floats, size_t(columns - 1), *budget, rows); !s)
        return s.error();
      if (Status s = planGrowth(ds.targets, 1, *budget, rows); !s) return s.error();
    }
    for (int64_t c = 0; c < columns; ++c) {
      float v = 0;
      if (!parseFloat(fields[c], v) || !std::isfinite(v)) {
        std::string col = std::to_string(c + 1);
        if (!names.empty()) col += " ('" + names[c] + "')";
        return makeError("'" + path + "' line " + std::to_string(lineNo) + ", column " + col +
                         ": '" + std::string(fields[c]) + "' is not a number");
      }
      if (c == labelIndex) {
        ds.targets.push_back(v);
        ds.origins.push_back(lineNo);
      } else {
        ds.floats.push_back(v);
      }
    }
  }
  if (tooLong) return lineTooLong();
  if (ds.targets.empty()) return makeError("'" + path + "': no data rows");
  // One int32 class index per row.
  if (Status s = budget->reserve("'" + path + "' labels", int64_t(ds.targets.size()) * 4); !s)
    return s.error();

  ds.sampleShape = {columns - 1};
  ds.labelFile = path;
  ds.originsAreLines = true;
  ds.labels.reserve(ds.targets.size());
  int32_t maxLabel = -1;
  for (float t : ds.targets) {
    // Negative values keep their rounded index; classification losses reject them.
    // The clamp only keeps huge regression targets from overflowing the cast.
    auto label = static_cast<int32_t>(std::lround(std::clamp(t, -1e9f, 1e9f)));
    ds.labels.push_back(label);
    maxLabel = std::max(maxLabel, label);
  }
  ds.classes = maxLabel + 1;
  return ds;
}

}  // namespace netloom
